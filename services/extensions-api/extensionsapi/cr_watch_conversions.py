"""Watch events of a webhook-converted custom resource, converted once per event and served version.

Why it exists: a ``ConvertingStore``'s watches read the storage version's watch cache and convert
each event on the way out. Done per watcher, N watchers of one change cost N conversion webhook
calls and N encodes; kube's cacher converts once per event per version (the version's watch cache
decodes through the conversion codec) and encodes once per output (cachingObject, KEP-1152).
``EventConversions`` is that for a converting store: a small LRU keyed by (key, revision, version)
of futures holding the converted object (with its JSON), the converted previous object when a
selector needs it (both in one ConversionReview, as before), and the dict of encodings the watch
handler shares between watchers (``CacheEvent.encoded``).

Bounded: at most ``size`` events are remembered; the oldest go first (a watcher lagging further
behind converts again, at the cost of a call). A conversion that fails is forgotten at once, so
every watcher waiting on it gets the error (and ends) while a later watch, once the webhook is
back, converts again. A watcher that goes away while waiting does not cancel the conversion the
others wait on.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from genericapi.apimachinery import deepjson
from genericapi.storage.cacher import CacheEvent

Convert = Callable[[list[dict[str, Any]]], Awaitable[list[dict[str, Any]]]]

#: Events remembered per converting store: watchers of one version read the same events at about
#: the same time, so a few hundred covers a burst while bounding memory to that many objects.
DEFAULT_SIZE = 256


class Converted:
    """One event's object at the served version, and what is made of it once for every watcher."""

    __slots__ = ("_left", "encoded", "obj", "prev", "raw")

    def __init__(self, obj: dict[str, Any], prev: dict[str, Any] | None, encoded: dict[object, bytes]) -> None:
        self.obj = obj
        self.raw = deepjson.dumps(obj)
        #: The converted previous object (only when a selector asked for it).
        self.prev = prev
        #: The handler's encodings of this event, shared by every watcher of this version.
        self.encoded = encoded
        self._left: tuple[dict[str, Any], bytes] | None = None

    def left_selection(self, revision: int) -> tuple[dict[str, Any], bytes]:
        """What a watcher whose selector the object leaves is sent as DELETED: the previous object's
        content at the change's resourceVersion (kube's ``cacheWatcher.convertToWatchEvent``), made once."""
        if self._left is None:
            prev = self.prev if self.prev is not None else self.obj
            meta = dict(prev.get("metadata") or {})
            meta["resourceVersion"] = str(revision)
            obj = {**prev, "metadata": meta}  # the converted object itself is shared: never mutated
            self._left = (obj, deepjson.dumps(obj))
        return self._left


class _Entry:
    """The conversions of one event: the object (alone or with the previous one), then the previous one."""

    __slots__ = ("encoded", "made", "made_prev", "obj", "prev")

    def __init__(self) -> None:
        self.obj: asyncio.Future[dict[str, Any]] | None = None
        self.prev: asyncio.Future[dict[str, Any]] | None = None
        #: The handler's encodings, shared by every watcher of the event at this version.
        self.encoded: dict[object, bytes] = {}
        #: What watchers without and with a selector get (made once each: the JSON is encoded once).
        self.made: Converted | None = None
        self.made_prev: Converted | None = None


def _retrieved(fut: asyncio.Future[Any]) -> None:
    """A failure nobody waits for any more is not logged as 'never retrieved' (watchers report it)."""
    if not fut.cancelled():
        fut.exception()


def _future() -> asyncio.Future[dict[str, Any]]:
    fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    fut.add_done_callback(_retrieved)
    return fut


class EventConversions:
    """Converted watch events of one served version, shared by its watchers (see the module doc)."""

    def __init__(self, convert: Convert, version: str, size: int = DEFAULT_SIZE) -> None:
        self._convert = convert
        self._version = version
        self._size = size
        self._entries: OrderedDict[tuple[bytes, int, str], _Entry] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._entries)

    async def event(self, item: CacheEvent, with_prev: bool) -> Converted:
        """``item``'s object at the served version (and its previous one when ``with_prev``).

        Raises what the conversion raises (APIError), for every watcher that waited on it.
        """
        key = (item.key, item.revision, self._version)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        prev_obj = item.prev if with_prev else None
        if entry.obj is None:  # the first to ask converts, the previous object too if it needs it
            entry.obj = _future()
            if prev_obj is not None:
                entry.prev = _future()
                self._start(key, entry, [item.obj, prev_obj], entry.obj, entry.prev)
            else:
                self._start(key, entry, [item.obj], entry.obj, None)
        elif prev_obj is not None and entry.prev is None:  # converted without it so far
            entry.prev = _future()
            self._start(key, entry, [prev_obj], None, entry.prev)
        obj_fut, prev_fut = entry.obj, entry.prev if prev_obj is not None else None
        # shield: a watcher ending while it waits must not cancel what the others wait on
        obj = await asyncio.shield(obj_fut)
        if prev_fut is None:
            if entry.made is None:
                entry.made = Converted(obj, None, entry.encoded)
            return entry.made
        prev = await asyncio.shield(prev_fut)
        if entry.made_prev is None:
            entry.made_prev = Converted(obj, prev, entry.encoded)
        return entry.made_prev

    def _start(self, key: tuple[bytes, int, str], entry: _Entry, objs: list[dict[str, Any]],
               obj_fut: asyncio.Future[dict[str, Any]] | None, prev_fut: asyncio.Future[dict[str, Any]] | None) -> None:
        task = asyncio.get_running_loop().create_task(self._run(key, entry, objs, obj_fut, prev_fut))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, key: tuple[bytes, int, str], entry: _Entry, objs: list[dict[str, Any]],
                   obj_fut: asyncio.Future[dict[str, Any]] | None,
                   prev_fut: asyncio.Future[dict[str, Any]] | None) -> None:
        futures = [f for f in (obj_fut, prev_fut) if f is not None]
        try:
            out = await self._convert(objs)
            if len(out) != len(futures):
                raise RuntimeError(f"conversion returned {len(out)} objects for {len(futures)}")
        except BaseException as err:
            if self._entries.get(key) is entry:
                del self._entries[key]  # forgotten: the next watcher to need it converts again
            for fut in futures:
                if fut.done():
                    continue
                if isinstance(err, asyncio.CancelledError):
                    fut.cancel()
                else:
                    fut.set_exception(err)
            if not isinstance(err, Exception):
                raise
            return
        for fut, obj in zip(futures, out, strict=True):  # the lengths are checked above
            if not fut.done():
                fut.set_result(obj)

    def stop(self) -> None:
        """The store stops: nothing is kept. A conversion under way finishes (within the webhook's
        timeout) for the watchers waiting on it, which end with the store's cache as usual."""
        self._entries.clear()
