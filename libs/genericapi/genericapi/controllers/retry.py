"""Reads and writes that controllers repeat: "gone is fine" reads and optimistic read-modify-write.

Controllers act on objects that other actors delete or change at the same time. A 404 means the
work is moot; a 409 on a write pinned to the version read means "read again and recompute"
(client-go's ``RetryOnConflict``). Kept here so every controller treats them alike.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from genericapi.apimachinery.errors import APIError

from .types import ResourceClient


async def get_or_none(client: ResourceClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The object, or None when it does not exist (404); other errors propagate."""
    try:
        return await client.get(namespace, name)
    except APIError as err:
        if err.code == 404:
            return None
        raise


async def update_on_conflict(read: Callable[[], Awaitable[dict[str, Any] | None]],
                             change: Callable[[dict[str, Any]], dict[str, Any] | None],
                             write: Callable[[dict[str, Any]], Awaitable[Any]],
                             *, tries: int, conflict: str) -> None:
    """Read, compute the write (``change`` -> body, or None when nothing is left to do), write.

    A missing object (``read`` gives None, or the write is a 404) ends quietly; a 409 on the write
    starts over with a fresh read, at most ``tries`` times, then gives up with a 409 ``conflict``.
    """
    for _ in range(tries):
        obj = await read()
        if obj is None:
            return
        body = change(obj)
        if body is None:
            return
        try:
            await write(body)
            return
        except APIError as err:
            if err.code == 404:
                return
            if err.code != 409:
                raise
    raise APIError(409, "Conflict", conflict)
