"""Who is asking: the user the gateway authenticated, for the duration of one request.

The gateway passes the user in ``X-Remote-*`` headers; the server layer turns them into a
``UserInfo`` in a context variable, so registry code (reviews today; admission and
authorization later) can read it without HTTP types.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field

ANONYMOUS = "system:anonymous"


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict)

    def headers(self) -> list[tuple[str, str]]:
        """The ``X-Remote-*`` headers that carry this user to a backend (``from_headers`` reads them)."""
        out = [("X-Remote-User", self.name)]
        out.extend(("X-Remote-Group", g) for g in self.groups)
        if self.uid:
            out.append(("X-Remote-Uid", self.uid))
        for key, values in self.extra.items():
            out.extend((f"X-Remote-Extra-{key}", v) for v in values)
        return out

    def to_dict(self) -> dict[str, object]:
        """``authentication.k8s.io/v1`` UserInfo."""
        out: dict[str, object] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = self.extra
        return out


ANONYMOUS_USER = UserInfo(ANONYMOUS, ("system:unauthenticated",))

current_user: ContextVar[UserInfo | None] = ContextVar("current_user", default=None)


def from_headers(headers: Iterable[tuple[bytes, bytes]]) -> UserInfo | None:
    """The user asserted in ``X-Remote-User`` / ``-Group`` / ``-Uid`` / ``-Extra-<key>``.

    Every request to a backend carries its user this way, and a handful of users (the admin, the
    controllers, a few service accounts) make most requests: the ``UserInfo`` of the same headers
    is remembered (when it has no extra values, whose lists a caller could change; at most
    ``_MEMO_SIZE`` of them, forgotten together when full) instead of being decoded and built again
    for every request."""
    remote: list[tuple[bytes, bytes]] = []
    for pair in headers:
        if pair[0][:9].lower() == b"x-remote-":  # most headers: skipped without decoding them
            remote.append(pair)
    if not remote:
        return None
    key = tuple(remote)
    found = _memo.get(key)
    if found is not None:
        return found
    info = _decode(remote)
    if info is not None and not info.extra:
        if len(_memo) >= _MEMO_SIZE:
            _memo.clear()  # users come and go (service accounts): the next ones are remembered too
        _memo[key] = info
    return info


#: ``from_headers``' users by their ``X-Remote-*`` header pairs.
_MEMO_SIZE = 1024
_memo: dict[tuple[tuple[bytes, bytes], ...], UserInfo] = {}


def _decode(headers: list[tuple[bytes, bytes]]) -> UserInfo | None:
    name = ""
    uid = ""
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    for raw_key, raw_value in headers:
        key = raw_key.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if key == "x-remote-user":
            name = value
        elif key == "x-remote-group":
            groups.append(value)
        elif key == "x-remote-uid":
            uid = value
        elif key.startswith("x-remote-extra-"):
            extra.setdefault(key[len("x-remote-extra-"):], []).append(value)
    if not name:
        return None
    return UserInfo(name, tuple(groups), uid, extra)
