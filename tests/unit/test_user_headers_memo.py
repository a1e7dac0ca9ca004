"""apimachinery.user.from_headers remembers the UserInfo of X-Remote-* headers it has seen (issue 15:
every request to a backend decoded them and built a UserInfo): the same headers give the same user,
another user's headers that user, and a user with extra values is built afresh each time."""

from __future__ import annotations

from genericapi.apimachinery import user


def test_user_from_headers_remembered_only_without_extra() -> None:
    """The same X-Remote-* headers give the same user; one with extra values is built afresh (its lists
    are the caller's to change), and headers of another user give that user."""
    alice = [(b"host", b"x"), (b"x-remote-user", b"alice-memo"), (b"x-remote-group", b"dev")]
    first, again = user.from_headers(alice), user.from_headers([*alice, (b"accept", b"*/*")])
    assert first == user.UserInfo("alice-memo", ("dev",)) and again is first
    assert user.from_headers([(b"x-remote-user", b"alice-memo")]) == user.UserInfo("alice-memo")
    assert user.from_headers([(b"x-remote-user", b"alice-memo"), (b"x-remote-group", b"ops")]) == \
        user.UserInfo("alice-memo", ("ops",))
    extra = [(b"x-remote-user", b"bob-memo"), (b"x-remote-extra-scopes", b"a")]
    one, two = user.from_headers(extra), user.from_headers(extra)
    assert one == two == user.UserInfo("bob-memo", (), "", {"scopes": ["a"]}) and one is not two
    assert one is not None and one.extra is not (two.extra if two is not None else None)


def test_a_full_memo_starts_afresh_so_new_users_are_remembered_too() -> None:
    user._memo.clear()
    for i in range(user._MEMO_SIZE):
        user.from_headers([(b"x-remote-user", f"u{i}".encode())])
    assert len(user._memo) == user._MEMO_SIZE
    late = [(b"x-remote-user", b"late-comer")]
    first = user.from_headers(late)
    assert first is not None and first.name == "late-comer"
    assert user.from_headers(late) is first  # remembered, though the memo had been full
