"""A small pooled HTTP/1.1 client over Unix sockets: the gateway's hop to a backend on one host.

aiohttp costs more per request than everything else the gateway does (measured in bench/), and
the hop to a local backend needs none of its features: no TLS, no redirects, no cookies, no
DNS. This client writes the request in one ``write`` and parses the response with httptools
(the parser uvicorn uses), handing body chunks to the caller as they arrive so watches stream.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import httptools

_EOF = b""


class UpstreamClosed(ConnectionError):
    """The backend closed the connection before a full response."""


@dataclass
class UnixResponse:
    status: int
    headers: list[tuple[bytes, bytes]]
    #: True when the body has a Content-Length (read it whole); False for chunked streams.
    sized: bool
    _conn: _Connection = field(repr=False)

    async def read(self) -> bytes:
        chunks = [chunk async for chunk in self.iter_chunks()]
        return b"".join(chunks)

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
    def __init__(self, pool: UnixHTTPPool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.headers: list[tuple[bytes, bytes]] = []
        self.head: asyncio.Future[None] | None = None
        self.chunks: collections.deque[bytes] = collections.deque()
        self.waiter: asyncio.Future[None] | None = None
        self.complete = False
        self.closed = False
        self.keep_alive = True

    # -- asyncio.Protocol -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's are not asyncio.Transport

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as err:
            self._fail(UpstreamClosed(f"bad response from backend: {err}"))
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.complete:
            self._fail(UpstreamClosed("backend closed the connection"))

    # -- httptools callbacks --------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()
        if self.head is not None and not self.head.done():
            self.head.set_result(None)

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
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

    async def next_chunk(self) -> bytes:
        while not self.chunks:
            if self.complete:
                self.pool.release(self)
                return _EOF
            if self.closed:
                raise UpstreamClosed("backend closed the connection mid-body")
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        return self.chunks.popleft()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    async def send(self, request: bytes) -> UnixResponse:
        assert self.transport is not None
        self.headers = []
        self.chunks.clear()
        self.complete = False
        self.head = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        await self.head
        sized = any(k == b"content-length" for k, _ in self.headers)
        return UnixResponse(self.parser.get_status_code(), self.headers, sized, self)


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
        self._idle.append(conn)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        transport, conn = await loop.create_unix_connection(lambda: _Connection(self), self.path)
        conn.transport = transport  # type: ignore[assignment]  # uvloop may call connection_made later
        return conn

    async def request(self, method: str, target: str, headers: Sequence[tuple[str, str]],
                      body: bytes) -> UnixResponse:
        head = [f"{method} {target} HTTP/1.1\r\nhost: localhost\r\n"]
        head.extend(f"{k}: {v}\r\n" for k, v in headers if k != "host")
        if body or method in ("POST", "PUT", "PATCH"):
            head.append(f"content-length: {len(body)}\r\n")
        head.append("\r\n")
        request = "".join(head).encode("latin-1") + body
        while self._idle:
            conn = self._idle.pop()
            if conn.closed:
                continue
            try:
                return await conn.send(request)
            except UpstreamClosed:
                conn.abort()  # a keep-alive connection the backend had closed: use another
        conn = await self._connect()
        return await conn.send(request)

    def close(self) -> None:
        for conn in self._idle:
            conn.abort()
        self._idle.clear()
