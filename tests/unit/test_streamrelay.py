"""genericapi.server.streamrelay over real sockets: a chunked upstream answer on a Unix socket relayed to
a client of the lean protocol (uvicorn, TCP) with no ASGI message per piece.

The upstream is a raw asyncio server the test drives piece by piece; the client a raw socket. What
must hold is what proxy._relay_unix gave: pieces in order and at once, a clean end with the upstream
connection back in the pool, the upstream given up when the client goes or streams are ended, a
clean end for the client when the upstream fails, and bounded buffers when the client stops reading.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from genericapi.handlers.directstream import SCOPE_KEY
from genericapi.server import streamrelay
from genericapi.server.leanhttp import LeanHttpProtocol
from genericapi.server.unixhttp import UnixHTTPPool
from starlette.types import Receive, Scope, Send

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


class Upstream:
    """A backend answering every request with a chunked head, then what the test writes."""

    def __init__(self) -> None:
        self.writers: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()
        self.closed = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(HEAD)
        await self.writers.put(writer)
        with contextlib.suppress(ConnectionError):
            while await reader.read(1 << 16):
                pass
        self.closed.set()


class RelayApp:
    """The proxy's part: ask the upstream, relay its chunked answer directly."""

    def __init__(self, pool: UnixHTTPPool) -> None:
        self.pool = pool
        self.streams: set[Any] = set()
        self.direct: list[bool] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        resp = await self.pool.request("GET", "/watch", b"", b"")
        self.direct.append(await streamrelay.relay_direct(scope, resp, send, self.streams, False,
                                                          frozenset({b"transfer-encoding"})))


@pytest.fixture
async def relay(tmp_path: Path) -> AsyncIterator[tuple[Upstream, RelayApp, int]]:
    upstream = Upstream()
    path = str(tmp_path / "up.sock")
    backend = await asyncio.start_unix_server(upstream.handle, path)
    app = RelayApp(UnixHTTPPool(path))
    config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="warning",
                            http=LeanHttpProtocol, loop="none")
    server = _Server(config)
    task = asyncio.ensure_future(server.serve())
    for _ in range(500):
        if server.started:
            break
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield upstream, app, port
    finally:
        server.should_exit = True
        server.force_exit = True
        await asyncio.wait_for(task, 10)
        backend.close()
        app.pool.close()


async def _client(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /watch HTTP/1.1\r\nhost: x\r\n\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200 ") and b"transfer-encoding: chunked" in head
    return reader, writer


async def _chunk(reader: asyncio.StreamReader) -> bytes:
    size = int((await asyncio.wait_for(reader.readuntil(b"\r\n"), 5)).strip(), 16)
    data = await asyncio.wait_for(reader.readexactly(size + 2), 5)
    return data[:-2]


async def test_pieces_go_through_in_order_and_the_end_returns_the_connection(
        relay: tuple[Upstream, RelayApp, int]) -> None:
    upstream, app, port = relay
    reader, writer = await _client(port)
    up = await asyncio.wait_for(upstream.writers.get(), 5)
    for i in range(5):
        up.write(b"%x\r\n%s\r\n" % (len(b'{"n":%d}\n' % i), b'{"n":%d}\n' % i))
        assert await _chunk(reader) == b'{"n":%d}\n' % i  # each piece arrives before the next is sent
    up.write(b"0\r\n\r\n")
    assert await _chunk(reader) == b""  # the client's answer ends cleanly
    for _ in range(200):
        if app.pool._idle:
            break
        await asyncio.sleep(0.01)
    assert app.direct == [True]
    assert len(app.pool._idle) == 1 and not app.pool._idle[0].closed, "the upstream connection was not reused"
    writer.close()


async def test_the_client_going_gives_the_upstream_up(relay: tuple[Upstream, RelayApp, int]) -> None:
    upstream, app, port = relay
    reader, writer = await _client(port)
    up = await asyncio.wait_for(upstream.writers.get(), 5)
    up.write(b"3\r\nab\n\r\n")
    assert await _chunk(reader) == b"ab\n"
    writer.transport.abort()
    await asyncio.wait_for(upstream.closed.wait(), 5)
    assert not app.pool._idle


async def test_ending_streams_ends_the_answer_cleanly(relay: tuple[Upstream, RelayApp, int]) -> None:
    upstream, app, port = relay
    reader, writer = await _client(port)
    await asyncio.wait_for(upstream.writers.get(), 5)
    for _ in range(200):
        if app.streams:
            break
        await asyncio.sleep(0.01)
    for ender in list(app.streams):
        ender.cancel()  # the proxy's end_streams
    assert await _chunk(reader) == b""
    await asyncio.wait_for(upstream.closed.wait(), 5)
    writer.close()


async def test_an_upstream_failing_mid_stream_ends_the_answer(relay: tuple[Upstream, RelayApp, int]) -> None:
    upstream, _app, port = relay
    reader, writer = await _client(port)
    up = await asyncio.wait_for(upstream.writers.get(), 5)
    up.write(b"3\r\nab\n\r\n")
    assert await _chunk(reader) == b"ab\n"
    up.transport.abort()
    assert await _chunk(reader) == b""
    writer.close()


async def test_a_client_that_stops_reading_pauses_the_upstream(relay: tuple[Upstream, RelayApp, int]) -> None:
    """The client reads nothing: the gateway stops reading the upstream once the client's connection
    is full, so the data waits in the upstream's buffer, not the gateway's; reading resumes it all."""
    upstream, _app, port = relay
    reader, writer = await _client(port)
    up = await asyncio.wait_for(upstream.writers.get(), 5)
    piece = b"x" * 65536
    sent = 0
    for _ in range(400):  # up to 26 MB, until the upstream's own buffer holds some
        up.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        sent += len(piece)
        await asyncio.sleep(0)
        if up.transport.get_write_buffer_size() > 4 * len(piece):
            break
    await asyncio.sleep(0.2)
    assert up.transport.get_write_buffer_size() > 0, "the gateway kept reading for a client that does not"
    got = 0
    while got < sent:
        got += len(await _chunk(reader))
    assert got == sent
    up.write(b"0\r\n\r\n")
    assert await _chunk(reader) == b""
    writer.close()


async def test_without_a_direct_stream_the_proxy_relays_through_send(tmp_path: Path) -> None:
    scope: dict[str, Any] = {"type": "http"}
    assert SCOPE_KEY not in scope
    pool = UnixHTTPPool(str(tmp_path / "none.sock"))
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    resp: Any = object()
    assert await streamrelay.relay_direct(scope, resp, send, set(), False, frozenset()) is False
    assert sent == []
    pool.close()
