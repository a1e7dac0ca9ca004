"""Bootstrap when several core-api replicas start at once: the loser of the race for the
``default/kubernetes`` Service waits for the winner's instead of failing its start."""

from __future__ import annotations

from typing import Any

import pytest
from coreapi.bootstrap import _ensure_absent_first
from genericapi.apimachinery.errors import APIError

SVC = {"metadata": {"name": "kubernetes"}}


class RacingStore:
    """The winner allocated the address; its Service lands after ``lands_after`` reads."""

    def __init__(self, lands_after: int, create_error: int = 422) -> None:
        self.reads = 0
        self.lands_after = lands_after
        self.create_error = create_error
        self.creates = 0

    async def get(self, _ns: str, name: str) -> dict[str, Any]:
        self.reads += 1
        if self.reads > self.lands_after:
            return SVC
        raise APIError(404, "NotFound", f'services "{name}" not found')

    async def create(self, _ns: str, _obj: dict[str, Any]) -> dict[str, Any]:
        self.creates += 1
        raise APIError(self.create_error, "Invalid", "provided IP is already allocated")


@pytest.mark.parametrize("code", [409, 422])
async def test_the_loser_waits_for_the_winners_service(code: int) -> None:
    store = RacingStore(lands_after=3, create_error=code)
    await _ensure_absent_first(store, "default", SVC)  # type: ignore[arg-type]
    assert store.reads == 4 and store.creates == 3


async def test_a_service_that_never_lands_fails_the_start_with_the_allocation_error() -> None:
    store = RacingStore(lands_after=10**6)
    with pytest.raises(APIError, match="already allocated"):
        await _ensure_absent_first(store, "default", SVC, tries=3)  # type: ignore[arg-type]


async def test_other_errors_are_not_retried() -> None:
    store = RacingStore(lands_after=10**6, create_error=500)
    with pytest.raises(APIError):
        await _ensure_absent_first(store, "default", SVC)  # type: ignore[arg-type]
    assert store.creates == 1
