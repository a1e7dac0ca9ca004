"""One upstream watch for every client watch at the gateway that would receive the same bytes (issue 15).

With streamrelay.py each client watch holds its own upstream Unix connection, and every event costs,
per watcher, one upstream socket read and httptools parse in the gateway plus core-api's write to
that socket, and a watcher's state in core-api. Here the gateway opens ONE upstream watch for all
client watches that provably get identical answers, and writes each upstream piece, chunk-framed
once, to every joined client's ``DirectStream`` in one loop.

A client joins a live shared stream only when the result is what a private upstream watch would be:

- The key (``WatchRequest.key``) is the path, every query parameter but ``timeoutSeconds`` and
  ``resourceVersion`` in the client's order, and every header line the proxy forwards (Accept,
  Accept-Encoding, the user's X-Remote-* lines, User-Agent, a traceparent, ...) except kubectl's
  ``Kubectl-Session``/``Kubectl-Command``, which nothing behind the gateway reads.
- Only ``?watch=1|true`` GETs with a resourceVersion of digits other than "0", no
  ``sendInitialEvents``/``resourceVersionMatch``, no repeated parameter, a positive or absent
  ``timeoutSeconds`` and no body are candidates; anything else is relayed privately as before.
- Position: the stream must stand exactly at the client's resourceVersion: it has delivered nothing
  yet and was opened at that version, or its last complete line (an event or a bookmark, decoded
  only when a join is tried, once per line) carries that version. Mid-stream joins are refused for
  a Table watch (kube's first Table event carries the column definitions, later ones none), for an
  answer that is not ``application/json`` lines, and while the stream is inside a line.
- The upstream head must have only headers that are the same for every request (content type,
  Cache-Control, framing); otherwise the stream serves its first client alone.

Each client keeps its own ``timeoutSeconds``: the upstream is opened without one (so core-api picks
its 30-60 minute default, longer than any joined client's) and the gateway ends each client's answer
cleanly when its own time is up, as kube ends a watch. A client that goes away leaves; the last one
leaving gives the upstream connection up. A client whose connection holds more than ``CUT_BYTES``
unwritten is ended (kube's cacher terminates a watcher that cannot keep up; its client watches
again): nobody stalls the others, and the upstream is never paused for one client. When the upstream
ends (cleanly, or failing, or the proxy ending streams on shutdown) every joined client's answer
ends cleanly, as each private relay's did. Each client's head goes through its own ``send`` (the
gateway's chain adds its Audit-ID, APF headers and audit stages), so it is what a private relay
sends it. Clients arriving while the first one's upstream head is on its way wait for it (up to
``OPENING_WAIT``) and join at the start.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection, Iterator, MutableSet
from dataclasses import dataclass
from typing import Any, Protocol

import httptools
import orjson
from starlette.types import Scope, Send

from genericapi.handlers.directstream import DirectStream, direct_stream

from .streamrelay import UpstreamTakeover
from .unixhttp import UnixResponse, _Connection

#: Unwritten bytes on a client's connection past which it is ended (core-api's watcher queue holds up
#: to 10,000 events; this is about as many small events).
CUT_BYTES = 4 << 20

#: Seconds a client waits for a shareable watch's upstream head before asking on its own (a replica that
#: hangs must not hold every identical watch: privately, the next ones would go to another replica).
OPENING_WAIT = 2.0

#: Request header lines that take no part in the key: kubectl's per-invocation headers (read by nothing
#: behind the gateway).
_KEY_IGNORED = (b"kubectl-session:", b"kubectl-command:")

#: Response headers that are the same for every request: a head with any other is not shared.
_SHAREABLE_HEADERS = frozenset({b"content-type", b"cache-control", b"date", b"server", b"transfer-encoding",
                                b"connection", b"keep-alive"})

_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})
_END = {"type": "http.response.body", "body": b"", "more_body": False}


class SharedStream(DirectStream, Protocol):
    """A ``DirectStream`` that also takes a framed piece and tells its unwritten bytes (leanexchange)."""

    def stream_write_framed(self, frame: bytes) -> None: ...

    def stream_buffered(self) -> int: ...


@dataclass(slots=True, frozen=True)
class WatchRequest:
    """A client watch that may share an upstream (see ``watch_request``)."""

    key: tuple[bytes, bytes, bytes]
    #: The resourceVersion the client watches from.
    rv: bytes
    #: The upstream request target: the client's, without ``timeoutSeconds``.
    target: bytes
    #: The client's own timeoutSeconds (None: until the upstream ends).
    timeout: int | None
    #: Whether it may join a stream that has delivered events already (not a Table watch).
    midstream: bool


def watch_request(scope: Scope, raw_path: bytes, head: bytes) -> WatchRequest | None:
    """The request as a shareable watch, or None (see the module docstring for what qualifies).
    ``head``: the header lines the proxy forwards."""
    query: bytes = scope.get("query_string") or b""
    if b"watch=" not in query or scope["method"] != "GET":  # every GET with a query passes here
        return None
    writer = direct_stream(scope)
    if writer is None or not hasattr(writer, "stream_write_framed"):
        return None
    seen: set[bytes] = set()
    keep: list[bytes] = []
    upstream: list[bytes] = []
    watch = False
    rv = b""
    timeout: int | None = None
    for param in query.split(b"&"):
        name, _, value = param.partition(b"=")
        if name in seen:
            return None
        seen.add(name)
        if name == b"timeoutSeconds":
            if not value.isdigit() or int(value) <= 0:
                return None
            timeout = int(value)
            continue
        upstream.append(param)
        if name == b"resourceVersion":
            rv = value
            continue
        if name in (b"sendInitialEvents", b"resourceVersionMatch"):
            return None
        if name == b"watch":
            if value not in (b"1", b"true"):
                return None
            watch = True
        keep.append(param)
    if not watch or not rv.isdigit() or rv == b"0":
        return None
    lines = b"".join(line + b"\r\n" for line in head.split(b"\r\n")
                     if line and not line.lower().startswith(_KEY_IGNORED))
    accept = b""
    for k, v in scope["headers"]:
        if k.lower() == b"accept":
            accept += v.lower()
    return WatchRequest((raw_path, b"&".join(keep), lines), rv, raw_path + b"?" + b"&".join(upstream), timeout,
                        b"as=table" not in accept)


class Opening:
    """A shareable watch whose upstream head is on its way: clients at its version wait for it."""

    __slots__ = ("future", "key", "rv")

    def __init__(self, key: tuple[bytes, bytes, bytes], rv: bytes) -> None:
        self.key = key
        self.rv = rv
        self.future: asyncio.Future[_Shared | None] = asyncio.get_running_loop().create_future()


class WatchHub:
    """The gateway's shared watches by key (one per proxy)."""

    def __init__(self) -> None:
        self._live: dict[tuple[bytes, bytes, bytes], list[_Shared]] = {}
        self._opening: dict[tuple[bytes, bytes, bytes], list[Opening]] = {}

    def live_streams(self) -> int:
        """Shared upstream watches open now (tests, metrics)."""
        return sum(len(v) for v in self._live.values())

    async def join(self, watch: WatchRequest, upstreams: Collection[str], scope: Scope, send: Send) -> bool:
        """Serve the client from a shared stream standing at its version, if there is one (True once
        its answer has ended); False: nothing was sent, relay it privately (``open``)."""
        for opening in list(self._opening.get(watch.key, ())):
            if opening.rv == watch.rv:
                try:
                    shared = await asyncio.wait_for(asyncio.shield(opening.future), OPENING_WAIT)
                except TimeoutError:
                    continue  # its upstream is slow to answer (a hung replica?): this one may be sent elsewhere
                if shared is not None and shared.base in upstreams and shared.joinable_at(watch.rv):
                    await shared.serve(watch, scope, send)
                    return True
        for shared in list(self._live.get(watch.key, ())):
            if shared.base in upstreams and shared.joinable_at(watch.rv):
                await shared.serve(watch, scope, send)
                return True
        return False

    @contextlib.contextmanager
    def opening(self, watch: WatchRequest) -> Iterator[Opening]:
        """While the first client's upstream request is made: others at its version wait for ``open``
        to say what it opened (or for this to end: then they go their own way)."""
        opening = Opening(watch.key, watch.rv)
        self._opening.setdefault(watch.key, []).append(opening)
        try:
            yield opening
        finally:
            self._opened(watch.key, opening, None)

    def abandon(self, opening: Opening) -> None:
        """The first client's answer will not be shared (not a chunked 200, or not from a Unix upstream):
        those waiting for it ask on their own now."""
        self._opened(opening.key, opening, None)

    def _opened(self, key: tuple[bytes, bytes, bytes], opening: Opening, shared: _Shared | None) -> None:
        """Clients waiting for ``opening`` learn what to join (None: nothing)."""
        if opening.future.done():
            return
        waiting = self._opening.get(key)
        if waiting is not None and opening in waiting:
            waiting.remove(opening)
            if not waiting:
                del self._opening[key]
        opening.future.set_result(shared)

    def _add(self, shared: _Shared) -> None:
        self._live.setdefault(shared.key, []).append(shared)

    def _remove(self, shared: _Shared) -> None:
        streams = self._live.get(shared.key)
        if streams is not None and shared in streams:
            streams.remove(shared)
            if not streams:
                del self._live[shared.key]

    async def open(self, watch: WatchRequest, base: str, resp: UnixResponse, scope: Scope, send: Send,
                   streams: MutableSet[Any], ending: bool, drop: Collection[bytes], opening: Opening) -> None:
        """Relay the first client's upstream answer (a chunked 200) as a shared stream others may join."""
        headers = [(k, v) for k, v in resp.headers if k not in drop]
        shareable = all(k in _SHAREABLE_HEADERS for k, _ in resp.headers)
        content_type = next((v for k, v in resp.headers if k == b"content-type"), b"")
        resp.headers.clear()
        conn = resp._conn
        midstream = watch.midstream and content_type.startswith(b"application/json")
        shared = _Shared(self, watch, base, conn, headers, midstream)
        member = shared.add(watch, scope)
        if conn.chunks:  # what arrived with the head
            shared.deliver(conn.take_all())
        if ending or conn.complete or conn.closed or conn.transport is None:
            shared.end(conn.complete and not ending)
        else:
            conn.transport.set_protocol(shared)
            ender: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            ender.add_done_callback(lambda _f: shared.end(False))
            streams.add(ender)
            ender.add_done_callback(streams.discard)
            shared.ender = ender
            if shareable:
                self._add(shared)
                self._opened(watch.key, opening, shared)
        self._opened(watch.key, opening, None)
        await shared.run(member, send)


class _Member:
    """One client's answer from a shared stream."""

    __slots__ = ("done", "pending", "pending_bytes", "shared", "timer", "writer")

    def __init__(self, shared: _Shared, writer: SharedStream) -> None:
        self.shared = shared
        self.writer = writer
        #: Framed pieces that came before this client's head went out (None once it has).
        self.pending: list[bytes] | None = []
        self.pending_bytes = 0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.timer: asyncio.TimerHandle | None = None

    def leave(self) -> None:
        """End this client's answer (its time is up, it went away, it fell behind, or the stream ended)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not self.done.done():
            self.done.set_result(None)
        self.shared.left(self)


class _Shared(UpstreamTakeover):
    """One upstream watch answer and the clients it is written to (the upstream connection's protocol)."""

    __slots__ = ("base", "conn", "delivered", "ended", "ender", "headers", "hub", "key", "last", "members",
                 "midstream", "position", "rv", "tail")

    def __init__(self, hub: WatchHub, watch: WatchRequest, base: str, conn: _Connection,
                 headers: list[tuple[bytes, bytes]], midstream: bool) -> None:
        self.hub = hub
        self.key = watch.key
        self.rv = watch.rv
        self.base = base
        self.conn = conn
        self.headers = headers
        self.midstream = midstream
        self.members: dict[_Member, None] = {}
        self.ended = False
        self.ender: asyncio.Future[None] | None = None
        #: Whether any body has come; the pieces since the last line end; the piece(s) ending with the
        #: last complete line; that line's resourceVersion once decoded (b"": not an event's).
        self.delivered = False
        self.tail: list[bytes] = []
        self.last = b""
        self.position: bytes | None = None

    # -- joining ----------------------------------------------------------------------------------
    def joinable_at(self, rv: bytes) -> bool:
        if self.ended or self.tail:
            return False
        if not self.delivered:
            return rv == self.rv
        if not self.midstream:
            return False
        if self.position is None:
            self.position = _line_version(self.last)
        return self.position == rv

    def add(self, watch: WatchRequest, scope: Scope) -> _Member:
        writer: SharedStream = scope["kubechain.direct_stream"]
        member = _Member(self, writer)
        self.members[member] = None
        writer.stream_lost = member.leave
        if watch.timeout is not None:
            member.timer = asyncio.get_running_loop().call_later(watch.timeout, member.leave)
        return member

    async def serve(self, watch: WatchRequest, scope: Scope, send: Send) -> None:
        await self.run(self.add(watch, scope), send)

    async def run(self, member: _Member, send: Send) -> None:
        """The member's answer: its own head through its own ``send``, then what the stream delivers."""
        writer = member.writer
        try:
            await send({"type": "http.response.start", "status": 200, "headers": list(self.headers)})
            pending, member.pending = member.pending, None
            if pending and not writer.stream_gone():
                writer.stream_write_framed(b"".join(pending))
            if writer.stream_gone():
                member.leave()
            if not member.done.done():
                await member.done
        finally:
            writer.stream_lost = None
            member.leave()
        with contextlib.suppress(Exception):
            await send(_END)

    def left(self, member: _Member) -> None:
        members = self.members
        if members.pop(member, 0) is None:
            if not members and not self.ended:
                self.end(False)

    # -- the stream -------------------------------------------------------------------------------
    def deliver(self, body: bytes) -> None:
        """A piece of the upstream body: to every member, framed once."""
        self.delivered = True
        if body.endswith(b"\n"):
            self.last = b"".join((*self.tail, body)) if self.tail else body
            self.tail = []
            self.position = None
        else:
            self.tail.append(body)
        frame = b"%x\r\n%s\r\n" % (len(body), body)
        behind: list[_Member] | None = None
        for member in self.members:
            pending = member.pending
            if pending is None:
                writer = member.writer
                writer.stream_write_framed(frame)
                if not writer.stream_ready() and not writer.stream_gone() and writer.stream_buffered() > CUT_BYTES:
                    behind = [*(behind or ()), member]
            else:
                pending.append(frame)
                member.pending_bytes += len(frame)
                if member.pending_bytes > CUT_BYTES:
                    behind = [*(behind or ()), member]
        if behind:
            for member in behind:
                member.leave()

    def end(self, reusable: bool) -> None:
        """The upstream answer is over (``reusable``: it ended cleanly) or given up: every member's too."""
        if self.ended:
            return
        self.ended = True
        self.hub._remove(self)
        if self.ender is not None and not self.ender.done():
            self.ender.cancel()
        conn = self.conn
        transport = conn.transport
        if transport is not None and transport.get_protocol() is self:
            transport.set_protocol(conn)
        if reusable:
            conn.pool.release(conn)
        else:
            conn.abort()
        for member in list(self.members):
            member.leave()

    # -- asyncio.Protocol (the upstream connection) ----------------------------------------------
    def data_received(self, data: bytes) -> None:
        conn = self.conn
        try:
            conn.parser.feed_data(data)  # the connection's callbacks gather the body pieces
        except httptools.HttpParserError:
            self.end(False)
            return
        if conn.chunks:
            self.deliver(conn.take_all())
        if conn.complete:
            self.end(True)

    def upstream_lost(self) -> None:
        self.end(False)


def _line_version(data: bytes) -> bytes:
    """The resourceVersion of the last line in ``data`` (which ends with a line end) if it is an event's
    or a bookmark's; b"" otherwise (an ERROR, or not JSON)."""
    end = len(data) - 1
    start = data.rfind(b"\n", 0, end) + 1
    try:
        event = orjson.loads(data[start:end])
        if not isinstance(event, dict) or event.get("type") not in _EVENT_TYPES:
            return b""
        rv = event["object"]["metadata"]["resourceVersion"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return b""
    return rv.encode() if isinstance(rv, str) and rv.isdigit() else b""
