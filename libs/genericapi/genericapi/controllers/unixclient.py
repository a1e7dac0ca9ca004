"""A pooled HTTP/1.1 client over one Unix socket: the controllers' hop to another member on one host.

Why it exists (issue 15, cold start): on one host every link of the chain is a Unix socket, and the
controllers' transport reached it with aiohttp, whose import is ~0.25 s of CPU (its connector loads
the system's CA bundle twice at import). Both the gateway (its APIService layer's lease and CRD
informer over core-api's link) and core-api (its ClientSet's delegate link) made their first
request on the way to ``/readyz``, so the fork server preloaded aiohttp for all three services, on
the start's serial path. This client needs asyncio streams and httptools only (the parser uvicorn
already loads in every service); aiohttp is left to the TCP and TLS peers that need it.

The gateway's ``genericapi.server.unixhttp`` does the same job for the proxy's hot path, but the
controller runtime sits below the server layer (an import-linter contract) and cannot use it.
What the controllers need is smaller: a whole answer, or a streamed one read as the caller asks
(reading only when asked is the back-pressure), keep-alive connections reused, and an idle
connection the server had closed replaced before anything of the answer arrived (for the methods
Go's transport sends again).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import httptools

#: Bytes asked of the socket per read.
READ_BYTES = 64 * 1024
#: Requests sent again on a new connection when a kept one turns out closed before any answer
#: (Go's transport: idempotent methods only; a POST or PATCH the server may have acted on is not).
_REPLAYABLE = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


class UnixClosed(ConnectionError):
    """The server closed the connection (or sent what is not HTTP) before the answer ended."""


class _Stale(UnixClosed):
    """A connection ended before a single byte of its answer: the request may be sent again."""


class _Connection:
    """One keep-alive connection; the httptools parser calls its ``on_*`` methods."""

    __slots__ = ("chunks", "complete", "head_done", "headers", "keep_alive", "parser", "reader", "received",
                 "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.parser = httptools.HttpResponseParser(self)
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.head_done = False
        self.complete = False
        self.keep_alive = False
        self.received = 0

    # -- httptools callbacks --------------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text

    def on_headers_complete(self) -> None:
        self.head_done = True
        self.keep_alive = self.parser.should_keep_alive()  # read here: the parser resets it at the end

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        self.complete = True

    # -- the exchange ---------------------------------------------------------------------------
    def usable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing()

    async def feed(self) -> None:
        """Read what the server sent next into the parser; UnixClosed at the end of the stream."""
        data = await self.reader.read(READ_BYTES)
        if not data:
            raise (_Stale if self.received == 0 else UnixClosed)("the server closed the connection")
        self.received += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as err:
            raise UnixClosed(f"bad response from the server: {err}") from err

    async def exchange(self, request: bytes) -> None:
        """Send ``request`` and read until the answer's head has arrived."""
        self.headers, self.chunks = {}, []
        self.head_done = self.complete = self.keep_alive = False
        self.received = 0
        try:
            self.writer.write(request)
            while not self.head_done:
                await self.feed()
        except UnixClosed:
            raise
        except OSError as err:  # a reset or broken pipe: as a close, before or after a first byte
            raise (_Stale if self.received == 0 else UnixClosed)(str(err)) from err

    def close(self) -> None:
        self.writer.close()


class UnixAnswer:
    """An answer whose head has arrived; its body is read with ``read`` or ``chunks``, then the
    connection goes back to the pool (``release``) or is given up (``close``)."""

    def __init__(self, client: UnixClient, conn: _Connection, deadline: float | None) -> None:
        self.status = conn.parser.get_status_code()
        self.headers = conn.headers
        self._client = client
        self._conn: _Connection | None = conn
        self._deadline = deadline

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's pieces as they arrive; UnixClosed if the server cuts it."""
        conn = self._conn
        if conn is None:
            return
        while True:
            while conn.chunks:
                yield conn.chunks.pop(0)
            if conn.complete:
                self.release()
                return
            await conn.feed()

    async def read(self) -> bytes:
        """The whole body, within the request's deadline (TimeoutError after it)."""
        try:
            async with asyncio.timeout_at(self._deadline):
                return b"".join([chunk async for chunk in self.chunks()])
        except BaseException:
            self.close()
            raise

    def release(self) -> None:
        """Back to the pool when the answer was read to its end and the server keeps the
        connection; closed otherwise."""
        conn, self._conn = self._conn, None
        if conn is not None:
            if conn.complete and not conn.chunks and conn.keep_alive:
                self._client.keep(conn)
            else:
                conn.close()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class UnixClient:
    """Keep-alive connections to one Unix socket, reused last-in first-out."""

    #: Idle connections kept; more are closed.
    max_idle = 16

    def __init__(self, path: str, connect_timeout: float = 5.0) -> None:
        self.path = path
        self.connect_timeout = connect_timeout
        self._idle: list[_Connection] = []

    def keep(self, conn: _Connection) -> None:
        if len(self._idle) < self.max_idle and conn.usable():
            self._idle.append(conn)
        else:
            conn.close()

    async def _connect(self) -> _Connection:
        async with asyncio.timeout(self.connect_timeout):
            reader, writer = await asyncio.open_unix_connection(self.path, limit=READ_BYTES)
        return _Connection(reader, writer)

    async def request(self, method: str, target: str, headers: Sequence[tuple[str, str]], body: bytes | None,
                      total: float | None = None) -> UnixAnswer:
        """Send a request and wait for the answer's head. ``total``: seconds for the whole
        exchange, body included (None: none, for watches); TimeoutError after it. A connection
        failure raises OSError (UnixClosed is a ConnectionError)."""
        lines = "".join(f"{k}: {v}\r\n" for k, v in headers if k.lower() != "host")
        framing = f"content-length: {len(body)}\r\n" if body is not None else ""
        request = (f"{method} {target} HTTP/1.1\r\nhost: localhost\r\n{lines}{framing}\r\n".encode("latin-1")
                   + (body or b""))
        deadline = None if total is None else asyncio.get_running_loop().time() + total
        async with asyncio.timeout_at(deadline):
            while self._idle:
                conn = self._idle.pop()
                if not conn.usable():
                    conn.close()
                    continue
                try:
                    await conn.exchange(request)
                except _Stale:  # a kept connection the server had closed meanwhile: use another
                    conn.close()
                    if method not in _REPLAYABLE:
                        raise
                    continue
                except BaseException:
                    conn.close()
                    raise
                return UnixAnswer(self, conn, deadline)
            conn = await self._connect()
            try:
                await conn.exchange(request)
            except BaseException:
                conn.close()
                raise
            return UnixAnswer(self, conn, deadline)

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
