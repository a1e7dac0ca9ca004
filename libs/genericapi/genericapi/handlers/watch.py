"""Streaming watch responses: one JSON event per line, bookmarks, timeouts, 410 on expiry.

Serialize once (kube's KEP-1152): an event the cache dispatches carries a small dict of encodings
(``CacheEvent.encoded``); the first watcher asking for an output (plain JSON, a Table with its
includeObject, PartialObjectMetadata) makes the event's line and every other watcher asking for the
same one sends those bytes. Bookmarks, initial events and events replayed from the cache's window
are each watcher's own, as in kube's cacher.

Written directly where the server protocol allows it (directstream.py): the cache's dispatch hands
each event to ``deliver`` while the watcher's queue is empty and its connection writable, and the
shared bytes go onto the connection there, with no task wakeup, timer or ASGI message per watcher
per event. Otherwise (a busy or slow client, the initial events, bookmarks, the end) the watch's own
task sends from the queue as before; a watcher whose queue fills is ended by the cache, as kube's
cacher ends a watcher that cannot keep up.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from genericapi.apimachinery import deepjson, tables
from genericapi.apimachinery import errors as apierrors
from genericapi.registry.options import ListOptions
from genericapi.registry.store import Store
from genericapi.storage.cacher import Bookmark, CacheEvent, WatchClosed
from genericapi.storage.errors import StorageError

from .directstream import DirectStream, direct_stream
from .negotiation import Output
from .render import partial
from .watchmetrics import WatchEventMeter

#: How often an idle watch that allows bookmarks gets one (kube-apiserver: about a minute).
BOOKMARK_INTERVAL = 60.0
#: kube-apiserver ends watches after a random time between 30 and 60 minutes.
MIN_REQUEST_TIMEOUT = 1800
#: How often a watch waiting for its client to read looks whether the cache has ended it meanwhile.
DRAIN_CHECK = 1.0


def _event_line(event_type: str, raw: bytes) -> bytes:
    return b'{"type":"' + event_type.encode() + b'","object":' + raw + b"}\n"


def bookmark_object(store: Store, revision: int, initial_end: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": str(revision), "creationTimestamp": None}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"kind": store.info.kind, "apiVersion": store.info.api_version, "metadata": meta}


async def watch_response(store: Store, namespace: str, opts: ListOptions, out: Output,
                         request: Request) -> Response:
    try:
        watcher = await store.watch(namespace, opts)
    except apierrors.APIError as err:
        if err.code != 410:
            raise
        # As kube-apiserver's watch cache does: the stream opens, then says the version expired.
        line = _event_line("ERROR", orjson.dumps(err.status()))
        return Response(line, media_type="application/json")
    timeout = opts.timeout_seconds
    if timeout is None or timeout == 0:
        timeout = int(MIN_REQUEST_TIMEOUT * (1 + random.random()))
    elif timeout < 0:
        timeout = 0  # kube's timer for a negative timeout fires at once: the watch ends there
    info = store.info
    bookmarks = opts.allow_bookmarks
    interval = float(request.scope.get("kubechain.bookmark_interval", BOOKMARK_INTERVAL))

    meter = WatchEventMeter(info.group, info.version, info.kind)

    # kube's watchEmbeddedEncoder: a Table watch's first event carries the column definitions, every
    # later one none (TableOptions.NoHeaders, serialized as "columnDefinitions":null).
    headers_sent = False

    def render(event_type: str, obj: dict[str, Any] | None, raw: bytes | None) -> bytes:
        if out.mode == "table" and obj is not None and event_type != "BOOKMARK":
            table = tables.build_table(info.group, info.plural, [obj], include_object=out.include_object,
                                       printer=store.strategy.table_printer, no_headers=headers_sent)
            if headers_sent:
                table["columnDefinitions"] = None
            return _event_line(event_type, deepjson.dumps(table))
        if out.mode == "partial" and obj is not None and event_type != "BOOKMARK":
            return _event_line(event_type, deepjson.dumps(partial(obj)))
        if raw is None:
            raw = deepjson.dumps(obj)
        return _event_line(event_type, raw)

    def render_event(event: CacheEvent) -> bytes:
        """An event's line; plain JSON is the cache's bytes, so only a Table or
        PartialObjectMetadata watch decodes the object (once per event: the dispatched event keeps it)."""
        if out.mode == "table" or out.mode == "partial" or not event.raw:
            return render(event.type, event.obj, event.raw or None)
        return _event_line(event.type, event.raw)

    # What decides an event's bytes besides the event: selectors only filter, so they are not in it.
    # A Table's columns and rows come from the store's printer, includeObject and whether this is the
    # watch's first event (headers); a plain event's bytes are the view's (the same for every store
    # on it), PartialObjectMetadata's the object's.
    def output_key() -> object:
        return ("table", store, out.include_object, headers_sent) if out.mode == "table" else out.mode

    def encode(event_type: str, obj: dict[str, Any] | None, raw: bytes | None) -> bytes:
        nonlocal headers_sent
        line = render(event_type, obj, raw)
        headers_sent = True
        return meter.sent(line)

    def encode_event(event: CacheEvent) -> bytes:
        """The event's line, made once per (type, output) for every watcher it was dispatched to."""
        nonlocal headers_sent
        shared = event.encoded
        line: bytes | None
        if shared is None:  # replayed from the window or an initial event: this watcher's own
            line = render_event(event)
        else:
            key = (event.type, output_key())
            line = shared.get(key)
            if line is None:
                line = shared[key] = render_event(event)
        headers_sent = True
        return meter.sent_batched(line)

    # -- the direct path (directstream.py) ----------------------------------------------------
    #: True while the task holds items it took from the queue and has not written yet (waiting for
    #: the connection to drain): events meanwhile queue behind them.
    busy = False
    writer: DirectStream | None = None

    def deliver(event: CacheEvent) -> bool:
        """Called by the cache's dispatch while the queue is empty: write the event now if the
        connection takes it."""
        if busy or writer is None or not writer.stream_ready():
            return False
        writer.stream_write(encode_event(event))
        return True

    async def write(data: bytes) -> bool:
        """Write from the task once the connection has drained; False once the client has gone, or
        once the cache ended this watcher for falling behind (its queue filled while the client
        read nothing): what is queued is dropped and the answer ends, so a client that stopped
        reading holds no more than its connection's buffer (kube's cacher closes such a watcher;
        its client watches again from the last resourceVersion it saw)."""
        nonlocal busy
        assert writer is not None
        if not writer.stream_ready():
            busy = True
            try:
                while not writer.stream_ready():
                    if writer.stream_gone():
                        return False
                    if watcher.closed:
                        watcher.items.clear()
                        return False
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(writer.stream_drain(), DRAIN_CHECK)
            finally:
                busy = False
        writer.stream_write(data)
        return True

    async def run_direct(stream_writer: DirectStream, events: AsyncIterator[bytes]) -> None:
        """The answer's body: the task sends what the queue holds, ``deliver`` the rest."""
        nonlocal writer
        writer = stream_writer
        stream_writer.stream_lost = lambda: watcher.terminate(None)
        if stream_writer.stream_gone():
            watcher.terminate(None)
        watcher.direct = deliver
        try:
            async for data in events:
                if not await write(data):
                    break
        finally:
            watcher.direct = None
            stream_writer.stream_lost = None
            await events.aclose()  # type: ignore[attr-defined]
            watcher.close()

    async def stream() -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return
                wait = min(remaining, interval) if bookmarks else remaining
                item = await watcher.next_item(wait)
                if item is None:
                    if bookmarks and loop.time() < deadline:
                        bm = watcher.bookmark()
                        yield encode("BOOKMARK", bookmark_object(store, bm.revision, False), None)
                    continue
                if isinstance(item, CacheEvent):
                    # Send what is already waiting in one write (bursts of changes).
                    chunk = [encode_event(item)]
                    more = watcher.ready_item()
                    while isinstance(more, CacheEvent) and len(chunk) < 256:
                        chunk.append(encode_event(more))
                        more = watcher.ready_item()
                    yield b"".join(chunk)
                    if more is None:
                        continue
                    item = more
                if isinstance(item, CacheEvent):
                    yield encode_event(item)
                elif isinstance(item, Bookmark):
                    if bookmarks:
                        yield encode("BOOKMARK", bookmark_object(store, item.revision,
                                                                 item.initial_events_end), None)
                elif isinstance(item, WatchClosed):
                    if item.error is not None:
                        yield _event_line("ERROR", _status_bytes(store, item.error))
                    return
        finally:
            watcher.close()

    return _WatchResponse(stream(), run_direct, media_type="application/json",
                          headers={"Cache-Control": "no-cache, private"})


class _WatchResponse(StreamingResponse):
    """A watch's answer: written directly where the protocol offers a ``DirectStream``, else as a
    Starlette stream (every ASGI server; the same bytes)."""

    def __init__(self, content: AsyncIterator[bytes],
                 run_direct: Callable[[DirectStream, AsyncIterator[bytes]], Awaitable[None]],
                 media_type: str, headers: dict[str, str]) -> None:
        super().__init__(content, media_type=media_type, headers=headers)
        self._events = content
        self._run_direct = run_direct

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        writer = direct_stream(scope)
        if writer is None:
            await super().__call__(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await self._run_direct(writer, self._events)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _status_bytes(store: Store, err: StorageError) -> bytes:
    from genericapi.registry.translate import to_api_error
    api_err = to_api_error(err, store.info)
    return orjson.dumps(api_err.status())

