"""Watch cache: one etcd watch per stored resource, fanned out in memory to every client watch.

Like kube-apiserver's Cacher: the cache lists the resource once, then follows one etcd watch.
It keeps the current state (for ``resourceVersion=0`` lists and for initial watch events) and a
window of recent events, so a client watch that starts at a revision inside the window is
replayed from memory. Older revisions raise ``TooOldRevisionError`` (the handler answers 410).
Objects are decoded once per change by the codec the registry provides; storage never looks
inside them beyond that callback.

Every consumer in a process that caches the same key prefix (the stores of each served version of
a resource, e.g. core/v1 and events.k8s.io/v1 Events, autoscaling/v1 and v2 HPAs, every served
version of a custom resource; the admission policy source, the Service view and the RBAC view
beside the stores they read) shares one ``_Source``: one etcd list and one etcd watch per prefix
per etcd client. Each codec that decodes differently (a served version converted from the storage
version) gets its own ``CacheView`` of decoded objects fed by that source, as kube's cacher
converts per version on the way out; consumers whose codecs decode alike share one view.
``WatchCache`` is a consumer's handle on its view: starting and stopping it attaches and detaches,
and stopping ends only the client watches made through it.

The view keeps each object as its served JSON plus the attributes selectors read (kube's
storeElement with its GetAttrs labels and fields, computed once per change by the consumer's
``attrs`` function), not as a decoded dict: a decoded 800-byte ConfigMap is ~2.3 KB of Python
objects, its bytes ~0.9. ``obj`` decodes on demand (orjson, a few us; the last few hundred decoded
objects are remembered so repeated lookups of one object, RBAC roles or a namespace, parse it
once). A predicate with ``match_attrs`` (kube's SelectionPredicate) is evaluated on the attributes,
so a selected LIST or a selecting watcher decodes nothing; any other predicate gets the object.
A dispatched event carries the object its change decoded anyway, for the watchers that need it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from genericapi.backoff import Backoff

from .errors import FutureRevisionError, StorageError, TooOldRevisionError, UnavailableError
from .etcd import EtcdClient, WatchBatch, prefix_end

log = logging.getLogger(__name__)


class Codec(Protocol):
    """Turns stored bytes into the served object (with its resourceVersion) and its JSON."""

    def decode(self, value: bytes, revision: int) -> tuple[dict[str, Any], bytes]: ...


Predicate = Callable[[dict[str, Any]], bool]
#: Parses the served JSON the cache keeps back into the object (the codec's ``loads`` if it has one).
Loads = Callable[[bytes], dict[str, Any]]
#: kube's GetAttrs: an object's labels and the selectable fields its kind adds to metadata.name and
#: metadata.namespace (which the key holds), either None when there are none.
Attrs = tuple[Mapping[str, str] | None, Mapping[str, str] | None]
AttrsFunc = Callable[[dict[str, Any]], Attrs]
#: What most objects have: no labels, no kind-specific fields (one shared tuple).
NO_ATTRS: Attrs = (None, None)


class AttrsPredicate(Protocol):
    """A predicate the cache can evaluate without the object (kube's SelectionPredicate):
    ``match_attrs`` answers from the key and the attributes, or None when it needs the object."""

    def __call__(self, obj: dict[str, Any]) -> bool: ...

    def match_attrs(self, key: bytes, attrs: Attrs) -> bool | None: ...


_EMPTY = b""


def right_sized(raw: bytes) -> bytes:
    """``raw`` in an allocation of its own length, for bytes the cache keeps.

    orjson 3.12 and later never trim the buffer ``dumps`` writes into: a few hundred bytes of JSON
    come back in the whole 4 KiB-plus writer buffer (``sys.getsizeof`` shows the length, the
    allocation stays; ijl/orjson's byteswriter ``finish``). The cache keeps the served JSON of every
    object and recent event, so untrimmed it held ~8 KiB of RSS per 800-byte ConfigMap. Joining with
    an empty bytes copies into an exact-size object (~0.1 us; ``bytes(b)`` would return ``b`` itself).
    """
    return _EMPTY.join((raw, _EMPTY))


class _Memo:
    """The last ``size`` objects decoded through ``.obj``, by the entry they came from.

    Entries are replaced (never changed) when their object changes, so an entry is its own
    version: a remembered decode is valid as long as its entry is the one asked about."""

    __slots__ = ("_decoded", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self._decoded: dict[object, dict[str, Any]] = {}

    def get(self, entry: object, raw: bytes, loads: Loads) -> dict[str, Any]:
        decoded = self._decoded
        obj = decoded.pop(entry, None)
        if obj is None:
            obj = loads(raw)
            if len(decoded) >= self.size:
                del decoded[next(iter(decoded))]
        decoded[entry] = obj
        return obj

    def clear(self) -> None:
        self._decoded.clear()


#: Shared by every view of the process: RBAC's roles, a namespace looked up per request, a policy's
#: params are decoded once while they are in use; a long scan (a Table LIST) pushes them out.
_MEMO = _Memo(512)


class CachedObject:
    """One object of the view: its served JSON, revision and selector attributes; ``obj`` decodes.

    ``attrs`` is None when the view had no attributes function when the object was stored (a
    predicate then reads the decoded object)."""

    __slots__ = ("attrs", "key", "loads", "raw", "revision")

    def __init__(self, key: bytes, raw: bytes, revision: int, attrs: Attrs | None = None,
                 loads: Loads = orjson.loads) -> None:
        self.key = key
        self.raw = raw
        self.revision = revision
        self.attrs = attrs
        self.loads = loads

    @property
    def obj(self) -> dict[str, Any]:
        """The object, shared with other readers of this entry: never change it."""
        return _MEMO.get(self, self.raw, self.loads)

    def decode(self) -> dict[str, Any]:
        """A new copy of the object, the caller's to change."""
        return self.loads(self.raw)

    def __repr__(self) -> str:
        return f"CachedObject({self.key!r}, revision={self.revision})"


class CacheEvent:
    """A change as watchers see it. ``prev`` is the object before the change, if any.

    The object is either given (a dispatched event carries the one its change decoded; a converting
    store's events carry converted objects) or decoded from ``raw`` when asked for; ``prev``
    likewise from the previous entry (``prev_entry``). ``attrs`` are the object's selector
    attributes when the view computed them.

    ``encoded`` is kube's cachingObject (KEP-1152 serialize-once): on an event as it is dispatched
    to the watchers, a dict where whoever serves the event keeps the bytes it made of it, keyed by
    what decides those bytes (output kind, options), so the next watcher asking for the same thing
    reuses them. Storage never looks inside. Only dispatched events have one, and it goes with
    them once every watcher has read them; the window's copies and the initial events of a new
    watch have none (each watcher encodes those, as kube's cacher does), so no encoding outlives
    the dispatch of its event.

    ``prev_value`` is the previous object's stored bytes (etcd's prev_kv) on a change: what a
    watcher whose selector the object leaves is sent, decoded at this event's revision.
    """

    __slots__ = ("_obj", "_prev", "attrs", "encoded", "key", "loads", "prev_entry", "prev_value", "raw",
                 "revision", "type")

    def __init__(self, type: str, key: bytes, obj: dict[str, Any] | None, raw: bytes,
                 prev: dict[str, Any] | None, revision: int, encoded: dict[object, bytes] | None = None,
                 prev_value: bytes | None = None, *, attrs: Attrs | None = None,
                 prev_entry: CachedObject | None = None, loads: Loads = orjson.loads) -> None:
        self.type = type  # ADDED, MODIFIED, DELETED
        self.key = key
        self._obj = obj
        self.raw = raw
        self._prev = prev
        self.revision = revision
        self.encoded = encoded
        self.prev_value = prev_value
        self.attrs = attrs
        self.prev_entry = prev_entry
        self.loads = loads

    @property
    def obj(self) -> dict[str, Any]:
        obj = self._obj
        if obj is None:
            obj = self.loads(self.raw)
            if self.encoded is not None:  # a dispatched event: its watchers share one decode
                self._obj = obj
        return obj

    @property
    def prev(self) -> dict[str, Any] | None:
        prev = self._prev
        if prev is None and self.prev_entry is not None:
            prev = self.prev_entry.decode()
            if self.encoded is not None:
                self._prev = prev
        return prev

    @property
    def has_prev(self) -> bool:
        return self._prev is not None or self.prev_entry is not None

    @property
    def prev_attrs(self) -> Attrs | None:
        """The previous object's attributes (None: unknown, read the object)."""
        return self.prev_entry.attrs if self.prev_entry is not None else None

    def retyped(self, type: str, obj: dict[str, Any] | None, raw: bytes, attrs: Attrs | None,
                with_prev: bool) -> CacheEvent:
        """This change as another type for one watcher (its encodings stay shared: they are keyed
        by type)."""
        return CacheEvent(type, self.key, obj, raw, self._prev if with_prev else None, self.revision,
                          self.encoded, attrs=attrs, prev_entry=self.prev_entry if with_prev else None,
                          loads=self.loads)

    def __repr__(self) -> str:
        return f"CacheEvent({self.type}, {self.key!r}, revision={self.revision})"


def _selects(pred: Predicate, key: bytes, attrs: Attrs | None, obj: Callable[[], dict[str, Any] | None]) -> bool:
    """``pred`` over an object: on its attributes when the predicate can, else on the object."""
    if attrs is not None:
        match_attrs = getattr(pred, "match_attrs", None)
        if match_attrs is not None:
            answer = match_attrs(key, attrs)
            if answer is not None:
                return bool(answer)
    value = obj()
    return value is not None and pred(value)


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


#: Delivers one event to a watch's client at once (the handler's direct writer); False: not now
#: (its connection is busy or gone), queue it.
Deliver = Callable[[CacheEvent], bool]


@dataclass(eq=False)
class CacheWatcher:
    """One client watch. Read with ``await next_item(wait)``; close with ``close()``.

    Items wait in a deque with one future to wake the reader: cheaper per event than an
    ``asyncio.Queue`` read through ``wait_for`` (a task and a timer per read), which matters
    when one change fans out to thousands of watchers.

    ``direct`` (set by whoever serves the watch) takes an event while nothing waits in the queue:
    the dispatch then writes it to the client itself, with no wakeup of the reader (issue 15: a
    change to 1,000 watchers was 1,000 task wakeups and timers). It answers False when it cannot
    take the event now (the client's connection is not writable); the event is queued and the
    reader sends it, and everything after it, in order. Queue bounds and termination are the same
    either way: the queue is the watcher's buffer.
    """

    cache: CacheView
    predicate: Predicate | None
    max_queue: int = 10_000
    #: Only keys under this prefix (a namespace's) concern this watch.
    key_prefix: bytes = b""
    #: The predicate's ``match_attrs`` (kube's SelectionPredicate over GetAttrs), if it has one.
    _match: Callable[[bytes, Attrs], bool | None] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._match = getattr(self.predicate, "match_attrs", None)
    items: deque[WatchItem] = field(default_factory=deque)
    last_revision: int = 0
    closed: bool = False
    _waiter: asyncio.Future[None] | None = None
    direct: Deliver | None = None

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
        direct = self.direct
        if direct is not None and not self.items:
            try:
                delivered = direct(item)
            except Exception:  # the reader meets the same failure on its own path, for this watch only
                log.exception("watch delivery failed; queueing the event")
                delivered = False
            if delivered:
                self.last_revision = item.revision
                return
        if len(self.items) >= self.max_queue:
            # A watcher that cannot keep up is ended, as kube-apiserver does; the client
            # re-establishes it from its last resourceVersion.
            self.terminate(None)
            return
        self._push(item)

    def _filter(self, event: CacheEvent) -> CacheEvent | None:
        key = event.key
        if self.key_prefix and not key.startswith(self.key_prefix):
            return None
        pred = self.predicate
        if pred is None:
            return event
        # Inline (once per watcher per event): the attributes first, the object only when they cannot answer.
        match = self._match
        answer: bool | None
        prev_entry = event.prev_entry
        if prev_entry is not None or event._prev is not None:
            attrs = prev_entry.attrs if prev_entry is not None else None
            answer = match(key, attrs) if match is not None and attrs is not None else None
            if answer is None:
                prev = event.prev
                answer = prev is not None and pred(prev)
            old = answer
        else:
            old = False
        if event.type == "DELETED":
            return event if old else None
        attrs = event.attrs
        answer = match(key, attrs) if match is not None and attrs is not None else None
        cur = answer if answer is not None else pred(event.obj)
        if cur and old:
            return event
        # Same object, another type: the encodings (keyed by type too) are shared with the event's.
        if cur:
            return event.retyped("ADDED", event._obj, event.raw, event.attrs, with_prev=False)
        if old:
            # The object left the selection: the watcher sees it deleted, as kube's cacheWatcher
            # sends it: the previous object's content at this event's resourceVersion. (Every
            # DELETED of a change that is not a delete is this one object: the encodings, keyed by
            # type, stay shared.)
            obj, raw = self.cache.left_selection(event)
            return event.retyped("DELETED", obj, raw, event.prev_attrs, with_prev=True)
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
        """The next item, or None when ``wait`` seconds pass without one.

        The wait is a plain timer that resolves the waiter, not ``asyncio.timeout`` (which
        reschedules and cancels the task: about a tenth of core-api's CPU per delivery when one
        change goes to hundreds of watchers).
        """
        if not self.items:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = None if wait is None else loop.call_later(wait, _wake, waiter)
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
            if not self.items:
                return None  # the wait passed
        return self.ready_item()

    def bookmark(self) -> Bookmark:
        """A bookmark at the newest revision this watcher is known to have caught up with."""
        rev = max(self.last_revision, self.cache.revision if not self.items else 0)
        self.last_revision = rev
        return Bookmark(rev)

    def close(self) -> None:
        self.closed = True
        self.cache._watchers.discard(self)


def _by_key(c: CachedObject) -> bytes:
    return c.key


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _view_key(codec: Codec) -> object:
    """Codecs that decode stored bytes alike share one view: every ``JsonCodec`` without a read
    conversion decodes the same way, so they share by type; any other codec has a view of its own."""
    if not getattr(codec, "converts", True):
        return type(codec)
    return codec


class CacheView:
    """The decoded state and recent history of one prefix for one codec, fed by its ``_Source``."""

    def __init__(self, source: _Source, codec: Codec, window: int, attrs: AttrsFunc | None = None) -> None:
        self.source = source
        self._codec = codec
        #: Parses the JSON kept back into objects (any depth with the codec's ``loads``).
        self._loads: Loads = getattr(codec, "loads", None) or orjson.loads
        #: kube's GetAttrs for this view's objects (None: predicates read decoded objects).
        self._attrs = attrs
        self._window = window
        self._store: dict[bytes, CachedObject] = {}
        self._loading: dict[bytes, CachedObject] = {}
        self._events: deque[CacheEvent] = deque()
        self._window_start = 0
        #: Events at or below this revision are already in what the view listed.
        self._base = 0
        self.revision = 0
        self._watchers: set[CacheWatcher] = set()
        self._ready = asyncio.Event()
        self._progress = asyncio.Condition()
        #: Handles (consumers) attached to this view.
        self.handles = 0
        #: The last left_selection decode (stored bytes, revision, result): one per event dispatched.
        self._left: tuple[bytes, int, tuple[dict[str, Any], bytes]] | None = None

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    # -- fed by the source ----------------------------------------------------------------
    def begin_load(self) -> None:
        self._loading = {}

    def _attrs_of(self, obj: dict[str, Any]) -> Attrs | None:
        attrs = self._attrs
        return attrs(obj) if attrs is not None else None

    def set_attrs(self, attrs: AttrsFunc) -> None:
        """Compute selector attributes from now on, and for the objects already held."""
        self._attrs = attrs
        for c in self._store.values():
            c.attrs = attrs(c.decode())

    def load_page(self, kvs: list[Any]) -> None:
        decode, attrs_of, loads = self._codec.decode, self._attrs_of, self._loads
        items = self._loading
        for kv in kvs:
            obj, raw = decode(kv.value, kv.mod_revision)
            items[kv.key] = CachedObject(kv.key, right_sized(raw), kv.mod_revision, attrs_of(obj), loads)

    def end_load(self, revision: int) -> None:
        self._store, self._loading = self._loading, {}
        self._events.clear()
        self.revision = revision
        self._window_start = revision
        self._base = revision
        self._ready.set()

    def terminate_watchers(self, error: StorageError | None) -> None:
        for w in list(self._watchers):
            w.terminate(error)
        self._watchers.clear()

    def apply(self, batch: WatchBatch) -> None:
        codec, attrs_of, loads = self._codec, self._attrs_of, self._loads
        for ev in batch.events:
            if ev.mod_revision <= self._base:
                continue  # this view listed after the change
            old = self._store.get(ev.key)
            if ev.kind == "DELETE":
                if old is None and ev.prev_value is None:
                    continue
                del_old = self._store.pop(ev.key, None)
                prev_entry = del_old
                prev_obj = None
                if del_old is None:  # never seen (a view that listed after it): etcd's prev_kv
                    prev_obj = codec.decode(ev.prev_value or b"{}", 0)[0]
                obj, raw = codec.decode(ev.prev_value if ev.prev_value is not None
                                        else (del_old.raw if del_old else b"{}"), ev.mod_revision)
                raw = right_sized(raw)
                attrs = attrs_of(obj)
                event = CacheEvent("DELETED", ev.key, None, raw, prev_obj, ev.mod_revision, attrs=attrs,
                                   prev_entry=prev_entry, loads=loads)
            else:
                obj, raw = codec.decode(ev.value, ev.mod_revision)
                raw = right_sized(raw)
                attrs = attrs_of(obj)
                self._store[ev.key] = CachedObject(ev.key, raw, ev.mod_revision, attrs, loads)
                event = CacheEvent("MODIFIED" if old is not None else "ADDED", ev.key, None, raw, None,
                                   ev.mod_revision, prev_value=ev.prev_value if old is not None else None,
                                   attrs=attrs, prev_entry=old, loads=loads)
            self._events.append(event)
            if len(self._events) > self._window:
                dropped = self._events.popleft()
                self._window_start = dropped.revision
            self.revision = ev.mod_revision
            if self._watchers:
                # The dispatched copy carries the encodings cache and the object this change
                # decoded; the window's keeps neither.
                live = CacheEvent(event.type, event.key, obj, event.raw, event._prev, event.revision, {},
                                  event.prev_value, attrs=attrs, prev_entry=event.prev_entry, loads=loads)
                for w in tuple(self._watchers):
                    w.offer(live)

    def left_selection(self, event: CacheEvent) -> tuple[dict[str, Any], bytes]:
        """What a watcher whose selector ``event``'s object leaves is sent as DELETED: the previous
        object at the event's revision (kube's convertToWatchEvent), decoded once per event."""
        memo = self._left
        if memo is not None and memo[0] is event.prev_value and memo[1] == event.revision:
            return memo[2]
        if event.prev_value is None:  # no stored bytes of the previous object: the object as it is
            return event.obj, event.raw
        decoded = self._codec.decode(event.prev_value, event.revision)
        self._left = (event.prev_value, event.revision, decoded)
        return decoded

    async def notify_progress(self) -> None:
        async with self._progress:
            self._progress.notify_all()

    # -- serving ----------------------------------------------------------------------------
    async def wait_for_revision(self, revision: int, future_wait: float) -> None:
        """Wait (bounded) until the view is as fresh as ``revision``; else FutureRevisionError.

        Other resources' writes move etcd's revision too, so waiting for an event of our own
        could take forever. Instead etcd is asked whether anything under our prefix changed
        after what the view has seen, up to ``revision``: if nothing did (no key modified
        since, same number of keys), the view already is the state at ``revision``.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + future_wait
        client, prefix = self.source.client, self.source.prefix
        while self.revision < revision:
            seen, size = self.revision, len(self._store)
            try:
                changed = await client.count_modified_since(prefix, prefix_end(prefix), revision, seen + 1)
                total = await client.count(prefix, prefix_end(prefix), revision)
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

    def get(self, key: bytes) -> CachedObject | None:
        return self._store.get(key)

    def list(self, key_prefix: bytes, predicate: Predicate | None = None) -> tuple[list[CachedObject], int]:
        if predicate is None:
            items = [c for k, c in self._store.items() if k.startswith(key_prefix)]
        else:
            pred = predicate
            items = [c for k, c in self._store.items()
                     if k.startswith(key_prefix) and _selects(pred, k, c.attrs, c.decode)]
        items.sort(key=_by_key)
        return items, self.revision

    async def watch(self, start_revision: int | None, predicate: Predicate | None,
                    initial_events: bool | None, future_wait: float, key_prefix: bytes = b"") -> CacheWatcher:
        pred = predicate
        if start_revision:
            await self.wait_for_revision(start_revision, future_wait)
        watcher = CacheWatcher(self, pred, key_prefix=key_prefix)
        send_state = initial_events if initial_events is not None else not start_revision
        if send_state:
            if start_revision and start_revision > self.revision:
                raise FutureRevisionError(start_revision, self.revision)
            for c in sorted(self._store.values(), key=_by_key):
                if key_prefix and not c.key.startswith(key_prefix):
                    continue
                if pred is None or _selects(pred, c.key, c.attrs, c.decode):
                    watcher.items.append(CacheEvent("ADDED", c.key, None, c.raw, None, c.revision, attrs=c.attrs,
                                                    loads=c.loads))
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


class _Source:
    """One etcd list and watch of one prefix, feeding every view attached to it."""

    def __init__(self, client: EtcdClient, prefix: bytes) -> None:
        self.client = client
        self.prefix = prefix
        self.views: dict[object, CacheView] = {}
        #: The newest revision applied from etcd (where a resumed watch starts).
        self.revision = 0
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: Held while a batch is applied or a view lists, so a view attaches between batches.
        self._lock = asyncio.Lock()

    def ensure_running(self) -> None:
        if self._task is None:
            # A restarted source resumes its etcd watch from the last revision it saw.
            self._task = asyncio.create_task(self._run(resume=self._ready.is_set()),
                                             name=f"watchcache:{self.prefix.decode()}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def attach(self, key: object, codec: Codec, window: int, attrs: AttrsFunc | None = None) -> CacheView:
        view = self.views.get(key)
        if view is not None:
            view._window = max(view._window, window)
            view.handles += 1
            if attrs is not None and view._attrs is None:
                view.set_attrs(attrs)
            return view
        view = CacheView(self, codec, window, attrs)
        view.handles = 1
        self.views[key] = view
        backoff = Backoff(0.05, 2.0)
        while True:
            try:
                async with self._lock:
                    if self._ready.is_set() and not view.ready:
                        # The source is following etcd already: this view lists for itself, at
                        # etcd's newest revision, and skips the events at or below it still on
                        # their way.
                        view.begin_load()
                        revision = await self._range(view.load_page)
                        view.end_load(max(revision, self.revision))
                return view
            except asyncio.CancelledError:
                self.detach(view)
                raise
            except StorageError as err:  # etcd away: wait for it, as a first list does
                log.warning("watch cache %s: %s; retrying", self.prefix.decode(), err)
            await asyncio.sleep(backoff.next())

    def detach(self, view: CacheView) -> None:
        view.handles -= 1
        if view.handles <= 0:
            for key, v in list(self.views.items()):
                if v is view:
                    del self.views[key]

    async def _range(self, page: Callable[[list[Any]], None]) -> int:
        start, end = self.prefix, prefix_end(self.prefix)
        revision = 0
        while True:
            kvs, header_rev, more = await self.client.range(start, end, revision=revision, limit=1000)
            revision = revision or header_rev
            page(kvs)
            if not more or not kvs:
                return revision
            start = kvs[-1].key + b"\0"

    async def _relist(self) -> None:
        async with self._lock:
            views = list(self.views.values())
            for v in views:
                v.begin_load()

            def page(kvs: list[Any]) -> None:
                for v in views:
                    v.load_page(kvs)

            revision = await self._range(page)
            for v in views:
                v.end_load(revision)
            self.revision = revision
            # Set under the lock: a view that attached during this list finds the source ready
            # and lists for itself.
            self._ready.set()
        for v in views:
            await v.notify_progress()

    async def _run(self, resume: bool = False) -> None:
        backoff = Backoff(0.05, 2.0)
        need_list = not resume
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                async for batch in self.client.watch(self.prefix, self.revision + 1):
                    async with self._lock:
                        views = list(self.views.values())
                        for v in views:
                            v.apply(batch)
                        if batch.events:
                            self.revision = max(self.revision, batch.events[-1].mod_revision)
                    for v in views:
                        await v.notify_progress()
                    backoff.reset()
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is None or task.cancelling():
                    raise
                # Not our cancellation (a gRPC call cancelled under us): the cache must keep
                # following etcd, or it stays at this revision for good.
                log.warning("watch cache %s: etcd watch cancelled; retrying", self.prefix.decode())
            except TooOldRevisionError as err:
                log.warning("watch cache %s: %s; relisting", self.prefix.decode(), err)
                for v in list(self.views.values()):
                    v.terminate_watchers(TooOldRevisionError(err.requested, v.revision))
                need_list = True
            except (UnavailableError, StorageError) as err:
                log.warning("watch cache %s: %s; retrying", self.prefix.decode(), err)
            except Exception:
                log.exception("watch cache %s failed; retrying", self.prefix.decode())
            await asyncio.sleep(backoff.next())


#: Every etcd client's sources, by prefix: what makes one etcd watch per prefix per process.
_SOURCES: weakref.WeakKeyDictionary[EtcdClient, dict[bytes, _Source]] = weakref.WeakKeyDictionary()


def _source(client: EtcdClient, prefix: bytes) -> _Source:
    sources = _SOURCES.setdefault(client, {})
    source = sources.get(prefix)
    if source is None:
        source = sources[prefix] = _Source(client, prefix)
    return source


def open_sources(client: EtcdClient) -> dict[bytes, int]:
    """Views per shared source of ``client`` (a prefix listed once: one etcd watch)."""
    return {p: len(s.views) for p, s in _SOURCES.get(client, {}).items()}


class WatchCache:
    """One consumer's handle on the cached state of one resource prefix (see the module docstring)."""

    def __init__(self, client: EtcdClient, prefix: bytes, codec: Codec, window: int = 10_000,
                 future_wait: float = 3.0, attrs: AttrsFunc | None = None) -> None:
        self._client = client
        self._prefix = prefix
        self._codec = codec
        #: kube's GetAttrs for the objects (a store's; the view computes them once per change).
        self._attrs = attrs
        self._window = window
        self._future_wait = future_wait
        self._view: CacheView | None = None
        self._mine: weakref.WeakSet[CacheWatcher] = weakref.WeakSet()

    @property
    def ready(self) -> bool:
        return self._view is not None and self._view.ready

    @property
    def object_count(self) -> int:
        """How many objects the cache holds now (kube's ``apiserver_storage_objects``)."""
        return len(self._view._store) if self._view is not None else 0

    @property
    def revision(self) -> int:
        return self._view.revision if self._view is not None else 0

    @revision.setter
    def revision(self, value: int) -> None:
        """Move the cache back (tests simulating a cache that fell behind a compaction)."""
        if self._view is not None:
            self._view.revision = value
            self._view.source.revision = value

    @property
    def _window_start(self) -> int:
        return self._view._window_start if self._view is not None else 0

    @_window_start.setter
    def _window_start(self, value: int) -> None:
        if self._view is not None:
            self._view._window_start = value

    @property
    def _task(self) -> asyncio.Task[None] | None:
        """The shared source's task following etcd."""
        return self._view.source._task if self._view is not None else None

    @_task.setter
    def _task(self, value: asyncio.Task[None] | None) -> None:
        if self._view is not None:
            self._view.source._task = value

    async def start(self) -> None:
        source = _source(self._client, self._prefix)
        if self._view is None:
            self._view = await source.attach(_view_key(self._codec), self._codec, self._window, self._attrs)
        source.ensure_running()
        await self._view._ready.wait()

    async def stop(self) -> None:
        view, self._view = self._view, None
        self._end_mine()
        if view is None:
            return
        source = view.source
        source.detach(view)
        if not source.views:
            sources = _SOURCES.get(self._client, {})
            if sources.get(self._prefix) is source:
                del sources[self._prefix]
            await source.stop()

    def _end_mine(self) -> None:
        for w in list(self._mine):
            w.terminate(None)
            w.cache._watchers.discard(w)
        self._mine = weakref.WeakSet()

    def end_watchers(self) -> None:
        """End every client watch made through this handle cleanly (graceful shutdown); the
        cache keeps following etcd."""
        self._end_mine()

    def _live(self) -> CacheView:
        if self._view is None:
            raise UnavailableError(f"watch cache {self._prefix.decode()} is not started")
        return self._view

    async def wait_for_revision(self, revision: int) -> None:
        await self._live().wait_for_revision(revision, self._future_wait)

    # -- serving ----------------------------------------------------------------------
    def get(self, key: bytes) -> CachedObject | None:
        return self._view._store.get(key) if self._view is not None else None

    def list(self, key_prefix: bytes, predicate: Predicate | None = None) -> tuple[list[CachedObject], int]:
        """Current objects under ``key_prefix`` (sorted by key) and the cache revision."""
        if self._view is None:
            return [], 0
        return self._view.list(key_prefix, predicate)

    async def watch(self, start_revision: int | None, predicate: Predicate | None,
                    initial_events: bool | None = None, key_prefix: bytes = b"") -> CacheWatcher:
        """A watcher from ``start_revision`` (None or 0: current state as ADDED events first).

        ``initial_events`` overrides whether the current state is sent first (sendInitialEvents);
        with it the watcher ends the initial part with a Bookmark(initial_events_end=True).
        ``key_prefix`` limits the watch to the keys under it (a namespace's).
        """
        watcher = await self._live().watch(start_revision, predicate, initial_events, self._future_wait,
                                           key_prefix)
        self._mine.add(watcher)
        return watcher

__all__ = ["NO_ATTRS", "Attrs", "AttrsFunc", "AttrsPredicate", "Bookmark", "CacheEvent", "CacheView", "CacheWatcher",
           "CachedObject", "Codec", "Deliver", "WatchCache", "WatchClosed", "WatchItem", "open_sources"]
