"""Watch cache: one etcd watch per resource, fanned out in memory to every client watch.

Like kube-apiserver's Cacher: the cache lists the resource once, then follows one etcd watch.
It keeps the current state (for ``resourceVersion=0`` lists and for initial watch events) and a
window of recent events, so a client watch that starts at a revision inside the window is
replayed from memory. Older revisions raise ``TooOldRevisionError`` (the handler answers 410).
Objects are decoded once per change by the codec the registry provides; storage never looks
inside them beyond that callback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from genericapi.backoff import Backoff

from .errors import FutureRevisionError, StorageError, TooOldRevisionError, UnavailableError
from .etcd import EtcdClient, WatchBatch, prefix_end

log = logging.getLogger(__name__)


class Codec(Protocol):
    """Turns stored bytes into the served object (with its resourceVersion) and its JSON."""

    def decode(self, value: bytes, revision: int) -> tuple[dict[str, Any], bytes]: ...


Predicate = Callable[[dict[str, Any]], bool]


@dataclass(slots=True)
class CachedObject:
    key: bytes
    obj: dict[str, Any]
    raw: bytes
    revision: int


@dataclass(slots=True)
class CacheEvent:
    """A change as watchers see it. ``prev`` is the object before the change, if any."""

    type: str  # ADDED, MODIFIED, DELETED
    key: bytes
    obj: dict[str, Any]
    raw: bytes
    prev: dict[str, Any] | None
    revision: int


@dataclass(frozen=True, slots=True)
class Bookmark:
    """Every event up to ``revision`` has been delivered to this watcher."""

    revision: int
    initial_events_end: bool = False


@dataclass(frozen=True, slots=True)
class WatchClosed:
    """The cache ended this watch; ``error`` says why (TooOldRevisionError: client relists)."""

    error: StorageError | None


WatchItem = CacheEvent | Bookmark | WatchClosed


@dataclass(eq=False)
class CacheWatcher:
    """One client watch. Read with ``await next_item(wait)``; close with ``close()``.

    Items wait in a deque with one future to wake the reader: cheaper per event than an
    ``asyncio.Queue`` read through ``wait_for`` (a task and a timer per read), which matters
    when one change fans out to thousands of watchers.
    """

    cache: WatchCache
    predicate: Predicate | None
    max_queue: int = 10_000
    items: deque[WatchItem] = field(default_factory=deque)
    last_revision: int = 0
    closed: bool = False
    _waiter: asyncio.Future[None] | None = None

    def _push(self, item: WatchItem) -> None:
        self.items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def offer(self, event: CacheEvent) -> None:
        """Called by the cache for every change; filters and queues without blocking."""
        if self.closed:
            return
        item = self._filter(event)
        if item is None:
            return
        if len(self.items) >= self.max_queue:
            # A watcher that cannot keep up is ended, as kube-apiserver does; the client
            # re-establishes it from its last resourceVersion.
            self.terminate(None)
            return
        self._push(item)

    def _filter(self, event: CacheEvent) -> CacheEvent | None:
        pred = self.predicate
        if pred is None:
            return event
        cur = event.type != "DELETED" and pred(event.obj)
        old = event.prev is not None and pred(event.prev)
        if event.type == "DELETED":
            return event if old else None
        if cur and old:
            return event
        if cur:
            return CacheEvent("ADDED", event.key, event.obj, event.raw, None, event.revision)
        if old:
            # The object left the selection: the watcher sees it deleted.
            return CacheEvent("DELETED", event.key, event.obj, event.raw, event.prev, event.revision)
        return None

    def terminate(self, error: StorageError | None) -> None:
        if not self.closed:
            self.closed = True
            self._push(WatchClosed(error))

    def ready_item(self) -> WatchItem | None:
        """The next item if one is already waiting (no suspension)."""
        if not self.items:
            return None
        item = self.items.popleft()
        if isinstance(item, CacheEvent):
            self.last_revision = item.revision
        return item

    async def next_item(self, wait: float | None) -> WatchItem | None:
        """The next item, or None when ``wait`` seconds pass without one."""
        if not self.items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                if wait is None:
                    await waiter
                else:
                    async with asyncio.timeout(wait):
                        await waiter
            except TimeoutError:
                return None
            finally:
                self._waiter = None
        return self.ready_item()

    def bookmark(self) -> Bookmark:
        """A bookmark at the newest revision this watcher is known to have caught up with."""
        rev = max(self.last_revision, self.cache.revision if not self.items else 0)
        self.last_revision = rev
        return Bookmark(rev)

    def close(self) -> None:
        self.closed = True
        self.cache._watchers.discard(self)


class WatchCache:
    """State and recent history of one resource prefix, kept current by one etcd watch."""

    def __init__(self, client: EtcdClient, prefix: bytes, codec: Codec, window: int = 10_000,
                 future_wait: float = 3.0) -> None:
        self._client = client
        self._prefix = prefix
        self._codec = codec
        self._window = window
        self._future_wait = future_wait
        self._store: dict[bytes, CachedObject] = {}
        self._events: deque[CacheEvent] = deque()
        self._window_start = 0
        self.revision = 0
        self._watchers: set[CacheWatcher] = set()
        self._ready = asyncio.Event()
        self._progress = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def object_count(self) -> int:
        """How many objects the cache holds now (kube's ``apiserver_storage_objects``)."""
        return len(self._store)

    async def start(self) -> None:
        if self._task is None:
            # A restarted cache resumes its etcd watch from the last revision it saw.
            self._task = asyncio.create_task(self._run(resume=self._ready.is_set()),
                                             name=f"watchcache:{self._prefix.decode()}")
        await self._ready.wait()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.end_watchers()

    def end_watchers(self) -> None:
        """End every client watch cleanly (graceful shutdown); the cache keeps following etcd."""
        for w in list(self._watchers):
            w.terminate(None)
        self._watchers.clear()

    # -- following etcd ---------------------------------------------------------------
    async def _relist(self) -> None:
        items: dict[bytes, CachedObject] = {}
        start, end = self._prefix, prefix_end(self._prefix)
        revision = 0
        while True:
            kvs, header_rev, more = await self._client.range(start, end, revision=revision, limit=1000)
            revision = revision or header_rev
            for kv in kvs:
                obj, raw = self._codec.decode(kv.value, kv.mod_revision)
                items[kv.key] = CachedObject(kv.key, obj, raw, kv.mod_revision)
            if not more or not kvs:
                break
            start = kvs[-1].key + b"\0"
        self._store = items
        self._events.clear()
        self.revision = revision
        self._window_start = revision

    async def _run(self, resume: bool = False) -> None:
        backoff = Backoff(0.05, 2.0)
        need_list = not resume
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                    self._ready.set()
                    await self._notify_progress()
                async for batch in self._client.watch(self._prefix, self.revision + 1):
                    await self._apply(batch)
                    backoff.reset()
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is None or task.cancelling():
                    raise
                # Not our cancellation (a gRPC call cancelled under us): the cache must keep
                # following etcd, or it stays at this revision for good.
                log.warning("watch cache %s: etcd watch cancelled; retrying", self._prefix.decode())
            except TooOldRevisionError as err:
                log.warning("watch cache %s: %s; relisting", self._prefix.decode(), err)
                for w in list(self._watchers):
                    w.terminate(TooOldRevisionError(err.requested, self.revision))
                self._watchers.clear()
                need_list = True
            except (UnavailableError, StorageError) as err:
                log.warning("watch cache %s: %s; retrying", self._prefix.decode(), err)
            except Exception:
                log.exception("watch cache %s failed; retrying", self._prefix.decode())
            await asyncio.sleep(backoff.next())

    async def _apply(self, batch: WatchBatch) -> None:
        for ev in batch.events:
            if ev.kind == "DELETE":
                old = self._store.pop(ev.key, None)
                if old is None and ev.prev_value is None:
                    continue
                prev_obj = old.obj if old is not None else self._codec.decode(ev.prev_value or b"{}", 0)[0]
                obj, raw = self._codec.decode(ev.prev_value if ev.prev_value is not None
                                              else (old.raw if old else b"{}"), ev.mod_revision)
                event = CacheEvent("DELETED", ev.key, obj, raw, prev_obj, ev.mod_revision)
            else:
                obj, raw = self._codec.decode(ev.value, ev.mod_revision)
                old = self._store.get(ev.key)
                self._store[ev.key] = CachedObject(ev.key, obj, raw, ev.mod_revision)
                event = CacheEvent("MODIFIED" if old is not None else "ADDED", ev.key, obj, raw,
                                   old.obj if old is not None else None, ev.mod_revision)
            self._events.append(event)
            if len(self._events) > self._window:
                dropped = self._events.popleft()
                self._window_start = dropped.revision
            self.revision = ev.mod_revision
            for w in tuple(self._watchers):
                w.offer(event)
        await self._notify_progress()

    async def _notify_progress(self) -> None:
        async with self._progress:
            self._progress.notify_all()

    async def wait_for_revision(self, revision: int) -> None:
        """Wait (bounded) until the cache is as fresh as ``revision``; else FutureRevisionError.

        Other resources' writes move etcd's revision too, so waiting for an event of our own
        could take forever. Instead etcd is asked whether anything under our prefix changed
        after what the cache has seen, up to ``revision``: if nothing did (no key modified
        since, same number of keys), the cache already is the state at ``revision``.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._future_wait
        while self.revision < revision:
            seen, size = self.revision, len(self._store)
            try:
                changed = await self._client.count_modified_since(self._prefix, prefix_end(self._prefix),
                                                                  revision, seen + 1)
                total = await self._client.count(self._prefix, prefix_end(self._prefix), revision)
            except TooOldRevisionError:
                changed, total = 1, -1
            if self.revision >= revision:
                return
            if changed == 0 and total == size and self.revision == seen:
                self.revision = revision
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise FutureRevisionError(revision, self.revision)
            try:
                async with asyncio.timeout(min(remaining, 0.05)):
                    async with self._progress:
                        await self._progress.wait_for(lambda: self.revision >= revision)
            except TimeoutError:
                continue

    # -- serving ----------------------------------------------------------------------
    def get(self, key: bytes) -> CachedObject | None:
        return self._store.get(key)

    def list(self, key_prefix: bytes, predicate: Predicate | None = None) -> tuple[list[CachedObject], int]:
        """Current objects under ``key_prefix`` (sorted by key) and the cache revision."""
        items = [c for k, c in self._store.items()
                 if k.startswith(key_prefix) and (predicate is None or predicate(c.obj))]
        items.sort(key=lambda c: c.key)
        return items, self.revision

    async def watch(self, start_revision: int | None, predicate: Predicate | None,
                    initial_events: bool | None = None) -> CacheWatcher:
        """A watcher from ``start_revision`` (None or 0: current state as ADDED events first).

        ``initial_events`` overrides whether the current state is sent first (sendInitialEvents);
        with it the watcher ends the initial part with a Bookmark(initial_events_end=True).
        """
        pred = predicate
        if start_revision:
            await self.wait_for_revision(start_revision)
        watcher = CacheWatcher(self, pred)
        send_state = initial_events if initial_events is not None else not start_revision
        if send_state:
            if start_revision and start_revision > self.revision:
                raise FutureRevisionError(start_revision, self.revision)
            for c in sorted(self._store.values(), key=lambda c: c.key):
                if pred is None or pred(c.obj):
                    watcher.items.append(CacheEvent("ADDED", c.key, c.obj, c.raw, None, c.revision))
            if initial_events:
                watcher.items.append(Bookmark(self.revision, initial_events_end=True))
            watcher.last_revision = self.revision
        else:
            if not start_revision:
                start_revision = self.revision  # sendInitialEvents=false and no version: from now on
            if start_revision < self._window_start:
                raise TooOldRevisionError(start_revision, self._window_start)
            for ev in self._events:
                if ev.revision > start_revision:
                    watcher.offer(ev)
            watcher.last_revision = start_revision
        self._watchers.add(watcher)
        return watcher


__all__ = ["Bookmark", "CacheEvent", "CacheWatcher", "CachedObject", "Codec", "WatchCache",
           "WatchClosed", "WatchItem"]
