"""A small pooled HTTP/1.1 client over Unix sockets: the gateway's hop to a backend on one host.

aiohttp costs more per request than everything else the gateway does (measured in bench/), and
the hop to a local backend needs none of its features: no TLS, no redirects, no cookies, no
DNS. This client writes the request in one ``write`` and parses the response with httptools
(the parser uvicorn uses), handing body chunks to the caller as they arrive so watches stream.

Buffers are bounded both ways (issue 15): a response body is read off the socket only while
less than ``BUFFER_BYTES`` of it waits for the caller (reading pauses, so a slow client slows
the backend instead of growing the gateway), and a streamed request body is written only as
fast as the backend's socket takes it (``pause_writing``/``resume_writing``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import httptools

_EOF = b""

#: Bytes of a body held in memory per connection before reading pauses: small enough that N
#: concurrent large answers cost N x 64 KiB, large enough that an ordinary answer arrives in one
#: piece (uvicorn's own request-body high-water mark has the same value).
BUFFER_BYTES = 64 * 1024


class UpstreamClosed(ConnectionError):
    """The backend closed the connection before a full response."""


class BodyStream(Protocol):
    """The rest of a request body, read from the client as the backend takes it."""

    #: Whether any of it has been read (from then on the request cannot be sent again).
    started: bool

    def __aiter__(self) -> AsyncIterator[bytes]: ...


@dataclass(slots=True)
class UnixResponse:
    status: int
    headers: list[tuple[bytes, bytes]]
    #: True when the body has a Content-Length (read it whole); False for chunked streams.
    sized: bool
    _conn: _Connection = field(repr=False)

    async def read(self) -> bytes:
        chunks = [chunk async for chunk in self.iter_chunks()]
        return b"".join(chunks)

    async def read_upto(self, limit: int = BUFFER_BYTES) -> tuple[bytes, bool]:
        """The body up to its end or until ``limit`` bytes have arrived, whichever is first, and
        whether that is the whole body (the rest then comes from ``iter_chunks``). An answer that
        arrived with its head costs no await."""
        conn = self._conn
        while not conn.complete and conn.buffered < limit:
            await conn.wait_body()
        data = conn.take_all()
        if conn.complete:
            conn.pool.release(conn)
            return data, True
        return data, False

    async def next_chunk(self) -> bytes:
        """The next piece of the body; b"" once it has ended (the connection is then back in the
        pool). UpstreamClosed if the backend closed or the connection was given up (``close``)."""
        return await self._conn.next_chunk()

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        conn = self._conn
        while True:
            chunk = await conn.next_chunk()
            if chunk is _EOF:
                return
            yield chunk

    def close(self) -> None:
        """Give up on the rest of the body: the connection cannot be reused."""
        self._conn.abort()


class _Connection(asyncio.Protocol):
    # Slots and a plain list for the body pieces: one of these lives as long as each open watch
    # (issue 15, memory per watcher; a deque starts with a 64-slot block).
    __slots__ = ("buffered", "chunks", "closed", "complete", "head", "head_only", "headers", "keep_alive", "parser",
                 "pool", "read_paused", "transport", "waiter", "writable", "writer")

    def __init__(self, pool: UnixHTTPPool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.headers: list[tuple[bytes, bytes]] = []
        self.head: asyncio.Future[None] | None = None
        self.chunks: list[bytes] = []
        #: Body bytes in ``chunks``; reading is paused while it is BUFFER_BYTES or more.
        self.buffered = 0
        self.read_paused = False
        self.waiter: asyncio.Future[None] | None = None
        #: Set while the backend's socket buffer is full (a streamed request body waits on it).
        self.writable: asyncio.Future[None] | None = None
        #: The task writing a streamed request body (None: the body went with the head).
        self.writer: asyncio.Task[None] | None = None
        self.complete = False
        self.closed = False
        self.keep_alive = True
        #: The request is a HEAD: its answer ends with its head, whatever length it announces.
        self.head_only = False

    # -- asyncio.Protocol -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's are not asyncio.Transport

    def data_received(self, data: bytes) -> None:
        if self.head_only and self.complete:
            return  # nothing may follow a HEAD's answer until the next request
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as err:
            self._fail(UpstreamClosed(f"bad response from backend: {err}"))
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.complete:
            self._fail(UpstreamClosed("backend closed the connection"))
        self.resume_writing()

    def pause_writing(self) -> None:
        if self.writable is None:
            self.writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.writable is not None:
            if not self.writable.done():
                self.writable.set_result(None)
            self.writable = None

    # -- httptools callbacks --------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()
        if self.head_only and self.parser.get_status_code() >= 200:
            # httptools does not know the request was a HEAD: it would wait for the body the
            # Content-Length announces. The answer is complete; the next one gets a fresh parser.
            self.complete = True
        if self.head is not None and not self.head.done():
            self.head.set_result(None)

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered >= BUFFER_BYTES and not self.read_paused and self.transport is not None:
            self.read_paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self.complete = True
        self._wake()

    # -- request cycle --------------------------------------------------------------------
    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _fail(self, err: Exception) -> None:
        if self.head is not None and not self.head.done():
            self.head.set_exception(err)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(err)

    def _taken(self, size: int) -> None:
        self.buffered -= size
        if self.read_paused and self.buffered < BUFFER_BYTES and not self.closed and self.transport is not None:
            self.read_paused = False
            self.transport.resume_reading()

    async def wait_body(self) -> None:
        """Until more of the body (or its end) has arrived; UpstreamClosed if it never will."""
        if self.closed:
            raise UpstreamClosed("backend closed the connection mid-body")
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

    def take_all(self) -> bytes:
        chunks = self.chunks
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self._taken(len(data))
        return data

    async def next_chunk(self) -> bytes:
        while not self.chunks:
            if self.complete:
                self.pool.release(self)
                return _EOF
            await self.wait_body()
        chunk = self.chunks.pop(0)  # a few pieces at most: reading pauses at BUFFER_BYTES
        self._taken(len(chunk))
        return chunk

    def abort(self) -> None:
        self.closed = True
        if not self.complete:
            # Whoever waits for the head or the body learns now, not when connection_lost comes.
            self._fail(UpstreamClosed("the connection to the backend was given up"))
        if self.writer is not None and not self.writer.done() and self.writer is not asyncio.current_task():
            self.writer.cancel()
        if self.transport is not None:
            # abort, not close: close would first wait to flush what is buffered, forever if the
            # backend has stopped reading (a streamed body given up on).
            self.transport.abort()

    async def _write_body(self, body: BodyStream, chunked: bool) -> None:
        """Write a streamed request body as the backend's socket takes it (chunk-framed when its
        length is not known); anything ``body`` raises aborts the request (the backend sees it
        cut off and acts on nothing)."""
        transport = self.transport
        assert transport is not None
        try:
            async for chunk in body:
                if not chunk:
                    continue
                if self.closed:
                    return
                transport.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                if self.writable is not None:
                    await self.writable
            if chunked and not self.closed:
                transport.write(b"0\r\n\r\n")
        except BaseException:
            self.abort()
            raise

    async def send(self, request: bytes, body: BodyStream | None = None,
                   chunked: bool = False) -> UnixResponse:
        """Send ``request`` and wait for the answer's head."""
        assert self.transport is not None
        self.headers = []
        self.chunks.clear()
        self.buffered = 0
        self.complete = False
        self.head_only = request.startswith(b"HEAD ")
        self.head = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        if body is None:
            await self.head
        else:
            self.writer = asyncio.ensure_future(self._write_body(body, chunked))
            self.writer.add_done_callback(_retrieve)
            try:
                await self.head
            except BaseException:
                self.abort()
                raise
            if not self.writer.done():
                # The backend answered before it had the whole body: the rest is not sent, and
                # this connection, its request unfinished, is not used again.
                self.keep_alive = False
                self.writer.cancel()
        sized = any(k == b"content-length" for k, _ in self.headers)
        return UnixResponse(self.parser.get_status_code(), self.headers, sized, self)


def _retrieve(task: asyncio.Task[None]) -> None:
    """A body writer's failure shows as the request's (the connection is aborted); its
    exception is read here so asyncio does not report it as never retrieved."""
    if not task.cancelled():
        task.exception()


class UnixHTTPPool:
    """Keep-alive connections to one Unix socket, reused in LIFO order."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._idle: list[_Connection] = []

    #: Idle connections kept for reuse; more (after a burst of watches ends) are closed.
    max_idle = 256

    def release(self, conn: _Connection) -> None:
        if conn.closed or not conn.keep_alive:
            conn.abort()
            return
        if len(self._idle) >= self.max_idle:
            self._idle = [c for c in self._idle if not c.closed]
            if len(self._idle) >= self.max_idle:
                conn.abort()
                return
        conn.parser = httptools.HttpResponseParser(conn)
        conn.writer = None
        self._idle.append(conn)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        transport, conn = await loop.create_unix_connection(lambda: _Connection(self), self.path)
        conn.transport = transport  # type: ignore[assignment]  # uvloop may call connection_made later
        return conn

    async def request(self, method: str, target: str | bytes, headers: Sequence[tuple[str, str]] | bytes,
                      body: bytes, stream: BodyStream | None = None,
                      length: int | None = None) -> UnixResponse:
        """Send a request and wait for the response head. ``headers``: name-value pairs, or the
        head's header lines already encoded (the proxy's hot path; no ``host``). ``stream``: the
        rest of the body after ``body``, written as the backend takes it, ``length`` bytes in all
        (None: chunked); an idle connection the backend had closed is replaced only while nothing
        of ``stream`` has been read (a stream cannot be replayed)."""
        if isinstance(headers, bytes):
            lines = headers
        else:
            lines = "".join(f"{k}: {v}\r\n" for k, v in headers if k != "host").encode("latin-1")
        if isinstance(target, str):
            target = target.encode("latin-1")
        framing = b""
        chunked = False
        if stream is not None:
            if length is None:
                chunked = True
                framing = b"transfer-encoding: chunked\r\n"
            else:
                framing = b"content-length: %d\r\n" % length
        elif body or method in ("POST", "PUT", "PATCH"):
            framing = b"content-length: %d\r\n" % len(body)
        if chunked and body:
            body = b"%x\r\n%s\r\n" % (len(body), body)
        request = b"%s %s HTTP/1.1\r\nhost: localhost\r\n%s%s\r\n%s" % (
            method.encode("latin-1"), target, lines, framing, body)
        while self._idle:
            conn = self._idle.pop()
            if conn.closed:
                continue
            try:
                return await conn.send(request, stream, chunked)
            except UpstreamClosed:
                conn.abort()  # a keep-alive connection the backend had closed: use another
                if stream is not None and stream.started:
                    raise  # part of the body is gone: it cannot be sent again
        conn = await self._connect()
        return await conn.send(request, stream, chunked)

    def close(self) -> None:
        for conn in self._idle:
            conn.abort()
        self._idle.clear()
