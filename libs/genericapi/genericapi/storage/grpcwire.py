"""gRPC over one HTTP/2 connection, spoken on the event loop itself: the etcd client's transport.

Why not grpc.aio: bench/etcd_client_bench.py measured grpc.aio at ~300-400 µs of CPU per unary Txn
(a third of it in grpc's poller thread, the rest in the per-call machinery on the loop) and
~150-200 µs per watch event, where the bytes on the wire take a fraction of that; the ``h2``
library's state machine in its place cost more still (~580 µs per Txn). This is the part of HTTP/2
(RFC 9113) a gRPC client needs, framed by hand on an ``asyncio.Protocol``: a fixed request header
block per method (HPACK literals that never touch the dynamic table), DATA frames within the peer's
flow-control windows, response headers decoded with ``hpack`` (a block of indexed fields only, what
a server sends once its table holds them, is remembered), SETTINGS/PING acks, GOAWAY, RST_STREAM,
gRPC deadlines, status trailers, and keepalive pings that notice a member gone silent. Writes of one
loop turn go out as one TLS write. Bytes in and bytes out: protobuf is the caller's.

No thread, no completion queue, nothing outside the loop: a process forked after importing this is
unaffected (the fork server forks services after imports).
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import struct
from collections.abc import AsyncIterator
from urllib.parse import unquote

import hpack

__all__ = ["Connection", "RpcError", "StatusCode"]


class StatusCode:
    """The gRPC status codes this client tells apart (numbers as on the wire)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    RESOURCE_EXHAUSTED = 8
    OUT_OF_RANGE = 11
    INTERNAL = 13
    UNAVAILABLE = 14


class RpcError(Exception):
    """A call ended with a non-OK gRPC status (the server's, or the connection's end).

    ``unprocessed``: the server never saw the request, or said it did not process it (its bytes were
    never handed to the connection, a REFUSED_STREAM reset, a stream above a GOAWAY's last id, as
    RFC 9113 section 8.7 defines): sending it again cannot apply it twice. Otherwise a request may
    have been applied however the call ended."""

    def __init__(self, code: int, details: str, unprocessed: bool = False) -> None:
        super().__init__(f"gRPC status {code}: {details}")
        self.code = code
        self.details = details
        self.unprocessed = unprocessed


# Frame types and flags (RFC 9113 section 6).
_DATA, _HEADERS, _RST_STREAM, _SETTINGS, _PUSH_PROMISE, _PING, _GOAWAY, _WINDOW_UPDATE, _CONTINUATION = \
    0, 1, 3, 4, 5, 6, 7, 8, 9
_END_STREAM, _ACK, _END_HEADERS, _PADDED, _PRIORITY = 0x1, 0x1, 0x4, 0x8, 0x20
_S_HEADER_TABLE_SIZE, _S_ENABLE_PUSH, _S_MAX_CONCURRENT_STREAMS, _S_INITIAL_WINDOW_SIZE, _S_MAX_FRAME_SIZE = \
    1, 2, 3, 4, 5
_CANCEL, _REFUSED_STREAM = 0x8, 0x7
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

_HEAD = struct.Struct(">HBBBI")  # a frame's header: 24-bit length (16 + 8 bits), type, flags, stream id
_MAX_FRAME_IN = 16384  # SETTINGS_MAX_FRAME_SIZE we leave at its default
_U32 = struct.Struct(">I")
_MSG = struct.Struct(">BI")

#: Our receive window per stream and for the connection: large, so etcd's responses (a LIST page of
#: megabytes, a burst of watch events) are not held back waiting for WINDOW_UPDATEs.
_WINDOW = 16 * 1024 * 1024
_DEFAULT_WINDOW = 65535


def _frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    size = len(payload)
    return _HEAD.pack(size >> 8, size & 0xFF, kind, flags, stream_id) + payload


def _literal(name: bytes, value: bytes) -> bytes:
    """An HPACK "literal header field without indexing - new name" (no Huffman): the same bytes
    every time, and nothing in the server's dynamic table changes."""
    return b"\x00" + _hpack_int(len(name), 7) + name + _hpack_int(len(value), 7) + value


def _hpack_int(value: int, prefix: int) -> bytes:
    limit = (1 << prefix) - 1
    if value < limit:
        return bytes([value])
    out = bytearray([limit])
    value -= limit
    while value >= 128:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _grpc_timeout(millis: int) -> bytes:
    """gRPC's ``grpc-timeout`` value: at most 8 digits and a unit."""
    return b"%dm" % millis if millis < 10**8 else b"%dS" % min(millis // 1000, 10**8 - 1)


def _slot_expired(slot: asyncio.Future[None]) -> None:
    if not slot.done():
        slot.set_exception(RpcError(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", unprocessed=True))


#: A streaming call's messages not yet taken by its caller, past which no window is given back (the
#: server then stops at the stream's window instead of filling this process's memory).
_QUEUED_MAX = 1 << 20


class _Stream:
    __slots__ = ("buf", "details", "done", "future", "header_block", "id", "messages", "pending", "queued",
                 "send_window", "sent", "status", "timer", "unacked", "unprocessed", "waiter")

    def __init__(self, stream_id: int, send_window: int) -> None:
        self.id = stream_id
        self.buf = bytearray()
        #: Complete response messages not yet taken, and who waits for the next (streams).
        self.messages: collections.deque[bytes] = collections.deque()
        self.waiter: asyncio.Future[None] | None = None
        #: Unary calls: the response.
        self.future: asyncio.Future[bytes] | None = None
        #: The request's bytes from ``sent`` on are not out yet (the flow-control windows did not take
        #: them); END_STREAM after them for a unary call.
        self.pending = b""
        self.sent = 0
        self.done = False
        self.send_window = send_window
        self.unacked = 0  # received bytes not yet given back with a WINDOW_UPDATE
        self.queued = 0  # bytes of ``messages`` not yet taken by the caller
        self.header_block = b""  # a HEADERS block continued by CONTINUATION frames
        self.status: int | None = None
        self.details = ""
        self.unprocessed = False  # ended by a status that says the server never processed the request
        self.timer: asyncio.TimerHandle | None = None


class Connection(asyncio.Protocol):
    """One HTTP/2 connection to one gRPC server; calls fail with ``RpcError`` once it is gone."""

    def __init__(self, authority: str, scheme: str, max_message: int, keepalive: float,
                 keepalive_timeout: float) -> None:
        self._authority = authority.encode()
        self._scheme = scheme.encode()
        self._max_message = max_message
        self._keepalive = keepalive
        self._keepalive_timeout = keepalive_timeout
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._streams: dict[int, _Stream] = {}
        self._next_id = 1
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._inbuf = b""
        self._decoder = hpack.Decoder()
        self._decoder.max_header_list_size = 1 << 20
        self._indexed_blocks: dict[bytes, list[tuple[bytes, bytes]]] = {}
        self._headers_cache: dict[tuple[bytes, int], bytes] = {}
        self._continuing: _Stream | None = None  # the stream whose header block is being continued
        self._continuing_id = 0
        # The peer's settings and our send windows.
        self._peer_initial_window = _DEFAULT_WINDOW
        self._send_window = _DEFAULT_WINDOW
        self._max_frame = 16384
        self._max_streams = 2**31
        self._stream_slots: collections.deque[asyncio.Future[None]] = collections.deque()
        self._conn_unacked = 0
        self._ping_timer: asyncio.TimerHandle | None = None
        self._ping_deadline: asyncio.TimerHandle | None = None
        #: Who waits for the answer to the PING in flight (``alive``).
        self._ping_waiters: list[asyncio.Future[bool]] = []
        self._lost: RpcError | None = None
        self._draining = False  # GOAWAY received (or stream ids used up): no new streams
        #: The highest stream id whose request was handed to the transport: a stream above it that
        #: fails with the connection never reached the server.
        self._written_id = 0

    # -- opening and closing --------------------------------------------------------------------
    @classmethod
    async def open(cls, host: str, port: int, ssl_context: ssl.SSLContext | None, *, connect_timeout: float,
                   max_message: int = 2**31 - 1, keepalive: float = 10.0, keepalive_timeout: float = 5.0
                   ) -> Connection:
        """Connect (TLS with ALPN ``h2`` when ``ssl_context`` is given) and send HTTP/2's preface."""
        loop = asyncio.get_running_loop()
        authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        protocol = cls(authority, "https" if ssl_context is not None else "http", max_message, keepalive,
                       keepalive_timeout)
        await asyncio.wait_for(loop.create_connection(
            lambda: protocol, host, port, ssl=ssl_context,
            server_hostname=host if ssl_context is not None else None), connect_timeout)
        return protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's TLS transport is no subclass
        settings = b"".join(struct.pack(">HI", k, v) for k, v in (
            (_S_ENABLE_PUSH, 0), (_S_INITIAL_WINDOW_SIZE, _WINDOW)))
        self._write(_PREFACE + _frame(_SETTINGS, 0, 0, settings)
                    + _frame(_WINDOW_UPDATE, 0, 0, _U32.pack(_WINDOW - _DEFAULT_WINDOW)))
        self._ping_timer = self._loop.call_later(self._keepalive, self._ping)

    @property
    def usable(self) -> bool:
        """Whether a new call may start here (not lost, no GOAWAY)."""
        return self._lost is None and not self._draining

    def close(self) -> None:
        """End the connection; calls still open on it fail as UNAVAILABLE."""
        if self._transport is not None and self._lost is None:
            self._write(_frame(_GOAWAY, 0, 0, _U32.pack(0) + _U32.pack(0)))
            self._flush()
            self._transport.close()
        self._fail_all(RpcError(StatusCode.UNAVAILABLE, "connection closed"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail_all(RpcError(StatusCode.UNAVAILABLE, f"connection lost: {exc}" if exc else "connection closed"))

    def _fail_all(self, err: RpcError) -> None:
        if self._lost is None:
            self._lost = err
        for timer in (self._ping_timer, self._ping_deadline):
            if timer is not None:
                timer.cancel()
        self._answer_pings(False)
        streams, self._streams = self._streams, {}
        written = self._written_id
        for stream in streams.values():
            self._finish(stream, err.code, err.details, stream.id > written)
        while self._stream_slots:
            slot = self._stream_slots.popleft()
            if not slot.done():
                slot.set_result(None)

    def _protocol_error(self, what: str) -> None:
        if self._transport is not None and self._lost is None:
            self._write(_frame(_GOAWAY, 0, 0, _U32.pack(0) + _U32.pack(1)))  # PROTOCOL_ERROR
            self._flush()
            self._transport.close()
        self._fail_all(RpcError(StatusCode.UNAVAILABLE, f"HTTP/2 protocol error: {what}"))

    # -- keepalive ------------------------------------------------------------------------------
    def _ping(self) -> None:
        """A PING every ``keepalive`` seconds while calls are open (a server with no open stream
        may count unsolicited pings against us); no ACK within ``keepalive_timeout`` ends it."""
        self._ping_timer = self._loop.call_later(self._keepalive, self._ping)
        if not self._streams or self._ping_deadline is not None or self._lost is not None:
            return
        self._send_ping()

    def _send_ping(self) -> None:
        self._write(_frame(_PING, 0, 0, b"kchping\0"))
        self._ping_deadline = self._loop.call_later(self._keepalive_timeout, self._ping_expired)

    def _answer_pings(self, alive: bool) -> None:
        waiters, self._ping_waiters = self._ping_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(alive)

    async def alive(self) -> bool:
        """Whether the server still answers, asked after one of our calls timed out: a slow call says
        nothing about the others on the connection (watches), so it is ended alone (RST_STREAM) and the
        connection is kept unless the server no longer answers a PING within ``keepalive_timeout``,
        which ends it as keepalive does. Calls timing out together share one PING (the keepalive's,
        when one is in flight)."""
        if self._lost is not None:
            return False
        waiter = self._loop.create_future()
        self._ping_waiters.append(waiter)
        if self._ping_deadline is None:
            self._send_ping()
        return await waiter

    def _ping_expired(self) -> None:
        self._ping_deadline = None
        if self._transport is not None:
            self._transport.abort()
        self._fail_all(RpcError(StatusCode.UNAVAILABLE, "keepalive ping failed to receive ACK within timeout"))

    # -- calls ----------------------------------------------------------------------------------
    def _header_block(self, path: bytes, deadline: float | None) -> bytes:
        millis = -1 if deadline is None else max(int(deadline * 1000), 1)
        block = self._headers_cache.get((path, millis))
        if block is None:
            block = b"".join([
                b"\x83",  # :method POST (static index 3)
                b"\x87" if self._scheme == b"https" else b"\x86",  # :scheme (static 7 / 6)
                _literal(b":path", path), _literal(b":authority", self._authority),
                _literal(b"content-type", b"application/grpc"), _literal(b"te", b"trailers"),
                _literal(b"grpc-timeout", _grpc_timeout(millis)) if millis >= 0 else b""])
            if len(self._headers_cache) < 64:
                self._headers_cache[(path, millis)] = block
        return block

    async def _start(self, path: bytes, request: bytes, deadline: float | None, end: bool) -> _Stream:
        expires = None if deadline is None else self._loop.time() + deadline
        while len(self._streams) >= self._max_streams and self._lost is None and not self._draining:
            slot = self._loop.create_future()
            self._stream_slots.append(slot)
            timer = None if expires is None else self._loop.call_at(expires, _slot_expired, slot)
            try:
                await slot  # RpcError DEADLINE_EXCEEDED when the call's deadline passes first
            except asyncio.CancelledError:
                if slot.done() and not slot.cancelled() and slot.exception() is None:
                    self._release_slot()  # the slot handed to us goes to the next waiter
                raise
            finally:
                if timer is not None:
                    timer.cancel()
        if expires is not None:
            deadline = expires - self._loop.time()
            if deadline <= 0:
                raise RpcError(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", unprocessed=True)
        if self._lost is not None:
            raise RpcError(self._lost.code, self._lost.details, unprocessed=True)
        if self._draining:
            raise RpcError(StatusCode.UNAVAILABLE, "connection is going away", unprocessed=True)
        stream = _Stream(self._next_id, self._peer_initial_window)
        self._next_id += 2
        if self._next_id > 2**31 - 1:
            # Stream ids used up: this stream is the last; the next call opens a new connection,
            # and this one closes when its streams (this one, a watch) have ended.
            self._draining = True
        self._streams[stream.id] = stream
        block = self._header_block(path, deadline)
        if len(block) > self._max_frame:
            self._finish(stream, StatusCode.INTERNAL, "request headers larger than a frame")
            raise RpcError(StatusCode.INTERNAL, "request headers larger than a frame")
        self._write(_frame(_HEADERS, _END_HEADERS, stream.id, block))
        stream.pending = _MSG.pack(0, len(request)) + request
        stream.done = end
        self._send_pending(stream)
        return stream

    async def unary(self, path: bytes, request: bytes, deadline: float) -> bytes:
        """One request message, one response message (or ``RpcError``); ``deadline`` is in seconds
        from now, sent as ``grpc-timeout`` and kept here (DEADLINE_EXCEEDED when it passes)."""
        expires = self._loop.time() + deadline
        stream = await self._start(path, request, deadline, True)
        future = stream.future = self._loop.create_future()
        if stream.status is not None:  # failed while being sent
            self._settle(stream)
        stream.timer = self._loop.call_at(expires, self._expire, stream)
        try:
            return await future
        finally:
            if stream.timer is not None:
                stream.timer.cancel()
            if stream.status is None:  # cancelled by our caller: tell the server
                self._cancel(stream)

    async def stream(self, path: bytes, request: bytes) -> AsyncIterator[bytes]:
        """Send ``request`` and keep the request side open; yield each response message until the
        server ends the call (a non-OK status raises ``RpcError``). Leaving early cancels the call."""
        stream = await self._start(path, request, None, False)
        try:
            while True:
                while stream.messages:
                    message = stream.messages.popleft()
                    stream.queued -= len(message)
                    if stream.unacked >= _WINDOW // 2 and stream.queued < _QUEUED_MAX and stream.status is None:
                        self._write(_frame(_WINDOW_UPDATE, 0, stream.id, _U32.pack(stream.unacked)))
                        stream.unacked = 0
                    yield message
                if stream.status is not None:
                    if stream.status != StatusCode.OK:
                        raise RpcError(stream.status, stream.details, stream.unprocessed)
                    return
                stream.waiter = self._loop.create_future()
                await stream.waiter
        finally:
            if stream.status is None:
                self._cancel(stream)

    def _expire(self, stream: _Stream) -> None:
        stream.timer = None
        self._cancel(stream)
        self._finish(stream, StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")

    def _cancel(self, stream: _Stream, code: int = _CANCEL) -> None:
        """Reset a stream we no longer want (RST_STREAM CANCEL), or close our side of one the
        server ended (NO_ERROR)."""
        if self._streams.pop(stream.id, None) is None:
            return
        if self._lost is None:
            self._write(_frame(_RST_STREAM, 0, stream.id, _U32.pack(code)))
        self._release_slot()

    def _wake_slots(self) -> None:
        """Every call waiting for a stream slot looks again (the limit changed, or no new streams)."""
        while self._stream_slots:
            slot = self._stream_slots.popleft()
            if not slot.done():
                slot.set_result(None)

    def _release_slot(self) -> None:
        """A stream ended: wake a call waiting for a stream slot; a draining connection whose last
        stream this was closes now."""
        while self._stream_slots:
            slot = self._stream_slots.popleft()
            if not slot.done():
                slot.set_result(None)
                break
        if self._draining and not self._streams and self._lost is None and self._transport is not None:
            self._flush()
            self._transport.close()

    @property
    def lost(self) -> bool:
        """Whether the connection is gone (unlike a draining one, whose streams still run)."""
        return self._lost is not None

    def _finish(self, stream: _Stream, status: int, details: str, unprocessed: bool = False) -> None:
        if stream.status is not None:
            return
        stream.status, stream.details, stream.unprocessed = status, details, unprocessed
        if self._streams.pop(stream.id, None) is not None:
            self._release_slot()
        self._settle(stream)
        waiter = stream.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    @staticmethod
    def _settle(stream: _Stream) -> None:
        future = stream.future
        if future is None or future.done() or stream.status is None:
            return
        if stream.status != StatusCode.OK:
            future.set_exception(RpcError(stream.status, stream.details, stream.unprocessed))
        elif stream.messages:
            future.set_result(stream.messages.popleft())
        else:
            future.set_exception(RpcError(StatusCode.INTERNAL, "server sent no response message"))

    # -- writing --------------------------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        """Queue bytes; everything queued in one loop turn goes out as one write."""
        self._out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._out:
            return
        data = b"".join(self._out) if len(self._out) > 1 else self._out[0]
        self._out.clear()
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)
            self._written_id = self._next_id - 2  # every stream opened so far queued its HEADERS

    def _send_pending(self, stream: _Stream) -> None:
        """Send what the flow-control windows allow of the stream's request, END_STREAM after the
        last byte of a unary request."""
        pending, sent = stream.pending, stream.sent
        total = len(pending)
        while sent < total:
            size = min(total - sent, self._send_window, stream.send_window, self._max_frame)
            if size <= 0:
                break
            chunk = pending[sent:sent + size] if size < total else pending
            sent += size
            self._send_window -= size
            stream.send_window -= size
            self._write(_frame(_DATA, _END_STREAM if stream.done and sent == total else 0, stream.id, chunk))
        if sent == total:
            stream.pending, stream.sent = b"", 0
        else:
            stream.sent = sent

    # -- reading --------------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        buf = self._inbuf + data if self._inbuf else data
        pos, size = 0, len(buf)
        while size - pos >= 9:
            hi, lo, kind, flags, stream_id = _HEAD.unpack_from(buf, pos)
            length = hi << 8 | lo
            if length > _MAX_FRAME_IN:
                self._protocol_error("frame larger than SETTINGS_MAX_FRAME_SIZE")
                return
            end = pos + 9 + length
            if end > size:
                break
            payload = buf[pos + 9:end]
            pos = end
            stream_id &= 0x7FFFFFFF
            if self._continuing_id and kind != _CONTINUATION:
                self._protocol_error("header block not continued")
                return
            if kind == _DATA:
                self._on_data(stream_id, flags, payload)
            elif kind == _HEADERS:
                self._on_headers(stream_id, flags, payload)
            elif kind == _CONTINUATION:
                self._on_continuation(stream_id, flags, payload)
            elif kind == _SETTINGS:
                if not flags & _ACK:
                    self._on_settings(payload)
            elif kind == _WINDOW_UPDATE:
                self._on_window_update(stream_id, payload)
            elif kind == _PING:
                if flags & _ACK:
                    if self._ping_deadline is not None:
                        self._ping_deadline.cancel()
                        self._ping_deadline = None
                    self._answer_pings(True)
                else:
                    self._write(_frame(_PING, _ACK, 0, payload))
            elif kind == _RST_STREAM:
                self._on_rst(stream_id, payload)
            elif kind == _GOAWAY:
                self._on_goaway(payload)
            elif kind == _PUSH_PROMISE:
                self._protocol_error("PUSH_PROMISE though push is disabled")
                return
            if self._lost is not None:
                return
        self._inbuf = buf[pos:]

    def _on_data(self, stream_id: int, flags: int, payload: bytes) -> None:
        flow = len(payload)
        self._conn_unacked += flow
        if self._conn_unacked >= _WINDOW // 2:
            self._write(_frame(_WINDOW_UPDATE, 0, 0, _U32.pack(self._conn_unacked)))
            self._conn_unacked = 0
        if flags & _PADDED and payload:
            payload = payload[1:len(payload) - payload[0]]
        stream = self._streams.get(stream_id)
        if stream is None:
            return
        stream.unacked += flow
        if stream.unacked >= _WINDOW // 2 and not flags & _END_STREAM and stream.queued < _QUEUED_MAX:
            self._write(_frame(_WINDOW_UPDATE, 0, stream_id, _U32.pack(stream.unacked)))
            stream.unacked = 0
        if payload:
            # A message larger than a frame gathers in a bytearray (linear, however many frames);
            # frames holding whole messages, the usual case, are sliced as they came.
            if stream.buf:
                stream.buf += payload
                buf: bytes | bytearray = stream.buf
            else:
                buf = payload
            pos, size = 0, len(buf)
            while size - pos >= 5:
                compressed, length = _MSG.unpack_from(buf, pos)
                if compressed:
                    self._cancel(stream)
                    self._finish(stream, StatusCode.INTERNAL, "compressed message, but no compression was asked for")
                    return
                if length > self._max_message:
                    self._cancel(stream)
                    self._finish(stream, StatusCode.RESOURCE_EXHAUSTED,
                                 f"received message larger than max ({length} vs. {self._max_message})")
                    return
                if size - pos - 5 < length:
                    break
                stream.messages.append(bytes(buf[pos + 5:pos + 5 + length]))
                stream.queued += length
                pos += 5 + length
            if pos == size:
                stream.buf = bytearray()
            elif pos or buf is payload:
                stream.buf = bytearray(buf[pos:])
            if pos and stream.waiter is not None and not stream.waiter.done():
                stream.waiter.set_result(None)
        if flags & _END_STREAM:
            self._finish(stream, StatusCode.INTERNAL, "server closed the stream without sending trailers")

    def _on_headers(self, stream_id: int, flags: int, payload: bytes) -> None:
        if flags & _PADDED:
            pad = payload[0]
            payload = payload[1:len(payload) - pad]
        if flags & _PRIORITY:
            payload = payload[5:]
        stream = self._streams.get(stream_id)
        if not flags & _END_HEADERS:
            self._continuing_id = stream_id
            self._continuing = stream
            if stream is not None:
                stream.header_block = payload
            else:
                self._orphan_block = payload
            self._continuing_end = bool(flags & _END_STREAM)
            return
        self._header_block_done(stream_id, stream, payload, bool(flags & _END_STREAM))

    _orphan_block = b""
    _continuing_end = False

    def _on_continuation(self, stream_id: int, flags: int, payload: bytes) -> None:
        if stream_id != self._continuing_id:
            self._protocol_error("CONTINUATION of another stream")
            return
        stream = self._continuing
        if stream is not None:
            stream.header_block += payload
        else:
            self._orphan_block += payload
        if flags & _END_HEADERS:
            block = stream.header_block if stream is not None else self._orphan_block
            self._continuing_id, self._continuing, self._orphan_block = 0, None, b""
            if stream is not None:
                stream.header_block = b""
            self._header_block_done(stream_id, stream, block, self._continuing_end)

    def _decode(self, block: bytes) -> list[tuple[bytes, bytes]] | None:
        """The header list of ``block``. A block of one-byte indexed fields only changes nothing in
        the decoder's table, so its answer is remembered until a block that may change the table."""
        cached = self._indexed_blocks.get(block)
        if cached is not None:
            return cached
        try:
            headers = self._decoder.decode(block, raw=True)
        except hpack.HPACKError as err:
            self._protocol_error(f"bad header block: {err}")
            return None
        if block and all(0x80 <= b <= 0xFE for b in block):
            if len(self._indexed_blocks) < 256:
                self._indexed_blocks[block] = headers  # type: ignore[assignment]
        else:
            self._indexed_blocks.clear()
        return headers  # type: ignore[return-value]

    def _header_block_done(self, stream_id: int, stream: _Stream | None, block: bytes, end_stream: bool) -> None:
        headers = self._decode(block)  # always: the decoder's table must follow the server's
        if headers is None or stream is None:
            return
        status = None
        message = b""
        http_status = b""
        for name, value in headers:
            if name == b"grpc-status":
                status = int(value)
            elif name == b"grpc-message":
                message = value
            elif name == b":status":
                http_status = value
        if http_status and http_status != b"200":
            self._cancel(stream)
            self._finish(stream, StatusCode.UNAVAILABLE if http_status in (b"502", b"503", b"504")
                         else StatusCode.UNKNOWN, f"unexpected HTTP status {http_status.decode()}")
            return
        if status is not None:  # trailers (or a trailers-only answer)
            if not end_stream:
                self._cancel(stream)
            elif not stream.done or stream.pending:  # our side is still open: close it too
                self._cancel(stream, 0)
            self._finish(stream, status, unquote(message.decode("utf-8", "replace")))
        elif end_stream:
            self._finish(stream, StatusCode.INTERNAL, "server closed the stream without a grpc-status")

    def _on_settings(self, payload: bytes) -> None:
        for i in range(0, len(payload) - 5, 6):
            key, value = struct.unpack_from(">HI", payload, i)
            if key == _S_INITIAL_WINDOW_SIZE:
                delta = value - self._peer_initial_window
                self._peer_initial_window = value
                for stream in self._streams.values():
                    stream.send_window += delta
            elif key == _S_MAX_FRAME_SIZE:
                self._max_frame = value
            elif key == _S_MAX_CONCURRENT_STREAMS:
                self._max_streams = max(value, 1)
                self._wake_slots()
            elif key == _S_HEADER_TABLE_SIZE:
                pass  # the size of the server's table for what we send: we never index
        self._write(_frame(_SETTINGS, _ACK, 0))
        self._resume_sends()

    def _on_window_update(self, stream_id: int, payload: bytes) -> None:
        increment = _U32.unpack(payload[:4])[0] & 0x7FFFFFFF
        if not stream_id:
            self._send_window += increment
            self._resume_sends()
            return
        stream = self._streams.get(stream_id)
        if stream is not None:
            stream.send_window += increment
            if stream.pending:
                self._send_pending(stream)

    def _resume_sends(self) -> None:
        for stream in list(self._streams.values()):
            if stream.pending:
                self._send_pending(stream)

    def _on_rst(self, stream_id: int, payload: bytes) -> None:
        stream = self._streams.get(stream_id)
        if stream is None:
            return
        code = _U32.unpack(payload[:4])[0]
        status = StatusCode.UNAVAILABLE if code == _REFUSED_STREAM else \
            StatusCode.CANCELLED if code == _CANCEL else StatusCode.INTERNAL
        self._streams.pop(stream_id, None)
        self._release_slot()
        self._finish(stream, status, f"stream reset by the server (HTTP/2 error code {code})",
                     code == _REFUSED_STREAM)  # refused: not processed (RFC 9113 section 8.7)

    def _on_goaway(self, payload: bytes) -> None:
        """The server is going away: no new streams here; the streams it never took fail as
        UNAVAILABLE (safe to retry elsewhere), the others run to their end."""
        self._draining = True
        self._wake_slots()
        last = _U32.unpack(payload[:4])[0] & 0x7FFFFFFF
        code = _U32.unpack(payload[4:8])[0]
        for stream in [s for s in self._streams.values() if s.id > last]:
            self._finish(stream, StatusCode.UNAVAILABLE, f"server sent GOAWAY (HTTP/2 error code {code})", True)
        if not self._streams and self._transport is not None:
            self._transport.close()
