"""The one backoff helper: doubling from initial to cap, reset, bounded jitter."""

from __future__ import annotations

from genericapi.backoff import Backoff


def test_doubles_up_to_the_cap_and_resets() -> None:
    b = Backoff(0.05, 0.3)
    assert [b.next() for _ in range(5)] == [0.05, 0.1, 0.2, 0.3, 0.3]
    b.reset()
    assert b.next() == 0.05


def test_jitter_only_adds_up_to_its_share() -> None:
    b = Backoff(1.0, 8.0, jitter=0.2)
    for base in (1.0, 2.0, 4.0, 8.0, 8.0):
        assert base <= b.next() <= base * 1.2
