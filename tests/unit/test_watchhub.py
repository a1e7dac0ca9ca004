"""genericapi.server.watchhub over real sockets: identical client watches share one upstream watch.

The proxy (ReverseProxy, served by uvicorn with the lean protocol on TCP) relays to a raw asyncio
server on a Unix socket that counts the requests it gets and writes what the test tells it to; the
clients are raw sockets, so a test decides when each reads. What must hold: clients whose answers
would be identical share one upstream request (it counts them) and each gets every piece in order
with its own head; anything that could differ (another version, selector, Accept, a Table watch after
its first event, a stream inside a line) gets its own; each client's timeoutSeconds ends only it; a
client going away leaves the others, the last one gives the upstream up; a client that stops reading
is ended once it holds ``CUT_BYTES`` while the others keep receiving; the upstream ending, failing, or
the proxy ending streams ends every client's answer cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from genericapi.server import watchhub
from genericapi.server.leanhttp import LeanHttpProtocol
from genericapi.server.proxy import ReverseProxy

HEAD = (b"HTTP/1.1 200 OK\r\ncache-control: no-cache, private\r\ncontent-type: application/json\r\n"
        b"transfer-encoding: chunked\r\n\r\n")
WATCH = "/api/v1/namespaces/a/configmaps?watch=1&resourceVersion={rv}"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


class Upstream:
    """A backend answering every request with a chunked watch head, then what the test writes."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.writers: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()
        self.closed = 0
        #: Cleared: the first request's head waits for it (a replica slow to answer).
        self.first_head = asyncio.Event()
        self.first_head.set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.requests.append(head.split(b"\r\n", 1)[0])
        if len(self.requests) == 1:
            await self.first_head.wait()
        writer.write(HEAD)
        await self.writers.put(writer)
        with contextlib.suppress(ConnectionError):
            while await reader.read(1 << 16):
                pass
        self.closed += 1


def _event(rv: int, kind: str = "MODIFIED", pad: int = 0) -> bytes:
    return (b'{"type":"%s","object":{"kind":"ConfigMap","metadata":{"name":"x","resourceVersion":"%d"},'
            b'"data":{"p":"%s"}}}\n' % (kind.encode(), rv, b"x" * pad))


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[tuple[Upstream, ReverseProxy, int]]:
    upstream = Upstream()
    path = str(tmp_path / "up.sock")
    backend = await asyncio.start_unix_server(upstream.handle, path)
    proxy = ReverseProxy(lambda scope: ["unix:" + path], rotate=False)
    config = uvicorn.Config(proxy, host="127.0.0.1", port=0, lifespan="off", log_level="warning",
                            http=LeanHttpProtocol, loop="none")
    server = _Server(config)
    task = asyncio.ensure_future(server.serve())
    for _ in range(500):
        if server.started:
            break
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield upstream, proxy, port
    finally:
        proxy.end_streams()
        server.should_exit = True
        server.force_exit = True
        await asyncio.wait_for(task, 10)
        backend.close()
        await proxy.close()


class Client:
    """One raw client watch through the proxy."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        self.reader, self.writer, self.head = reader, writer, head

    @classmethod
    async def open(cls, port: int, target: str, accept: str = "application/json", rcvbuf: int = 0) -> Client:
        sock = None
        if rcvbuf:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
            reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 20)
        else:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
        writer.write(f"GET {target} HTTP/1.1\r\nhost: x\r\naccept: {accept}\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 200 ") and b"transfer-encoding: chunked" in head, head
        return cls(reader, writer, head)

    async def chunk(self) -> bytes:
        """The next body chunk; b"" is the answer's clean end."""
        size = int((await asyncio.wait_for(self.reader.readuntil(b"\r\n"), 10)).strip(), 16)
        data = await asyncio.wait_for(self.reader.readexactly(size + 2), 10)
        return data[:-2]

    async def body(self, size: int) -> bytes:
        """``size`` bytes of body, however they were chunked."""
        got = b""
        while len(got) < size:
            piece = await self.chunk()
            assert piece, f"the answer ended after {got!r}"
            got += piece
        assert len(got) == size
        return got

    def close(self) -> None:
        self.writer.transport.abort()


async def _writer(upstream: Upstream) -> asyncio.StreamWriter:
    return await asyncio.wait_for(upstream.writers.get(), 5)


def _no_date(head: bytes) -> bytes:
    return b"\r\n".join(line for line in head.split(b"\r\n") if not line.lower().startswith(b"date:"))


async def test_clients_at_one_version_share_one_upstream_and_get_every_piece(
        gateway: tuple[Upstream, ReverseProxy, int]) -> None:
    upstream, proxy, port = gateway
    clients = await asyncio.gather(*(Client.open(port, WATCH.format(rv=5)) for _ in range(6)))
    up = await _writer(upstream)
    await asyncio.sleep(0.1)
    assert len(upstream.requests) == 1, upstream.requests
    assert proxy.watch_hub is not None and proxy.watch_hub.live_streams() == 1
    heads = {_no_date(c.head) for c in clients}
    assert len(heads) == 1, heads  # same head for each (the app adds no per-request headers here)
    events = [_event(rv) for rv in range(6, 12)]
    for event in events:
        up.write(_frame(event))
        for c in clients:
            assert await c.body(len(event)) == event
    up.write(b"0\r\n\r\n")  # the upstream ends: every answer ends cleanly
    for c in clients:
        assert await c.chunk() == b""
        c.close()
    assert proxy.watch_hub.live_streams() == 0


async def test_the_upstream_is_asked_without_timeout_and_each_client_keeps_its_own(
        gateway: tuple[Upstream, ReverseProxy, int]) -> None:
    upstream, _proxy, port = gateway
    short = await Client.open(port, WATCH.format(rv=5) + "&timeoutSeconds=1")
    long = await Client.open(port, WATCH.format(rv=5) + "&timeoutSeconds=600")
    endless = await Client.open(port, WATCH.format(rv=5))
    up = await _writer(upstream)
    assert upstream.requests == [b"GET /api/v1/namespaces/a/configmaps?watch=1&resourceVersion=5 HTTP/1.1"]
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await short.chunk() == b""  # its own time is up: a clean end
    assert 0.8 < loop.time() - started < 5
    up.write(_frame(_event(6)))
    for c in (long, endless):
        assert await c.body(len(_event(6))) == _event(6)
    for c in (short, long, endless):
        c.close()


async def test_different_answers_get_their_own_upstream(gateway: tuple[Upstream, ReverseProxy, int]) -> None:
    upstream, _proxy, port = gateway
    first = await Client.open(port, WATCH.format(rv=5))
    await _writer(upstream)
    others = [
        await Client.open(port, WATCH.format(rv=4)),
        await Client.open(port, WATCH.format(rv=5) + "&labelSelector=a%3Db"),
        await Client.open(port, WATCH.format(rv=5), accept=TABLE),
        await Client.open(port, WATCH.format(rv=0)),
        await Client.open(port, WATCH.format(rv=5) + "&sendInitialEvents=true"),
        await Client.open(port, WATCH.format(rv=5) + "&resourceVersionMatch=NotOlderThan"),
        await Client.open(port, "/api/v1/namespaces/a/configmaps?watch=1"),
    ]
    assert len(upstream.requests) == 1 + len(others), upstream.requests
    for c in (first, *others):
        c.close()


async def test_joining_mid_stream_only_at_the_streams_position(gateway: tuple[Upstream, ReverseProxy, int]) -> None:
    upstream, _proxy, port = gateway
    first = await Client.open(port, WATCH.format(rv=5))
    up = await _writer(upstream)
    up.write(_frame(_event(6) + _event(7)))
    assert await first.body(2 * len(_event(6))) == _event(6) + _event(7)
    at7 = await Client.open(port, WATCH.format(rv=7))  # the stream's position: joins
    at6 = await Client.open(port, WATCH.format(rv=6))  # behind it: its own upstream
    table7 = await Client.open(port, WATCH.format(rv=7), accept=TABLE)  # a Table watch mid-stream: its own
    assert len(upstream.requests) == 3, upstream.requests
    bookmark = b'{"type":"BOOKMARK","object":{"kind":"ConfigMap","metadata":{"resourceVersion":"9"}}}\n'
    up.write(_frame(bookmark))
    for c in (first, at7):
        assert await c.body(len(bookmark)) == bookmark
    at9 = await Client.open(port, WATCH.format(rv=9))  # a bookmark's version is a position too
    assert len(upstream.requests) == 3
    up.write(_frame(_event(10)[:20]))  # inside a line: nobody joins
    for c in (first, at7, at9):
        assert await c.body(20) == _event(10)[:20]
    at9b = await Client.open(port, WATCH.format(rv=9))
    assert len(upstream.requests) == 4
    up.write(_frame(_event(10)[20:]))
    for c in (first, at7, at9):
        assert await c.body(len(_event(10)) - 20) == _event(10)[20:]
    for c in (first, at7, at6, table7, at9, at9b):
        c.close()


async def test_a_table_watch_joins_before_its_first_event(gateway: tuple[Upstream, ReverseProxy, int]) -> None:
    upstream, _proxy, port = gateway
    clients = [await Client.open(port, WATCH.format(rv=5), accept=TABLE) for _ in range(3)]
    up = await _writer(upstream)
    assert len(upstream.requests) == 1
    up.write(_frame(_event(6)))
    for c in clients:
        assert await c.body(len(_event(6))) == _event(6)
        c.close()


async def test_a_slow_upstream_head_holds_the_others_only_a_while(
        gateway: tuple[Upstream, ReverseProxy, int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watchhub, "OPENING_WAIT", 0.3)
    upstream, _proxy, port = gateway
    upstream.first_head.clear()
    first = asyncio.ensure_future(Client.open(port, WATCH.format(rv=5)))
    for _ in range(500):
        if upstream.requests:
            break
        await asyncio.sleep(0.01)
    second = await asyncio.wait_for(Client.open(port, WATCH.format(rv=5)), 5)  # asked on its own
    assert len(upstream.requests) == 2
    upstream.first_head.set()
    (await first).close()
    second.close()


async def test_watches_to_a_tcp_upstream_are_private_and_never_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A TCP upstream's watch is relayed privately (aiohttp): identical clients must not wait for it."""
    monkeypatch.setattr(watchhub, "OPENING_WAIT", 60.0)
    upstream = Upstream()
    backend = await asyncio.start_server(upstream.handle, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{backend.sockets[0].getsockname()[1]}"
    proxy = ReverseProxy(lambda scope: [base], rotate=False)
    config = uvicorn.Config(proxy, host="127.0.0.1", port=0, lifespan="off", log_level="warning",
                            http=LeanHttpProtocol, loop="none")
    server = _Server(config)
    task = asyncio.ensure_future(server.serve())
    for _ in range(500):
        if server.started:
            break
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        first = await Client.open(port, WATCH.format(rv=5))
        second = await asyncio.wait_for(Client.open(port, WATCH.format(rv=5)), 10)
        assert len(upstream.requests) == 2
        first.close()
        second.close()
    finally:
        proxy.end_streams()
        server.should_exit = True
        server.force_exit = True
        await asyncio.wait_for(task, 10)
        backend.close()
        await proxy.close()


async def test_one_client_leaving_leaves_the_others_and_the_last_gives_the_upstream_up(
        gateway: tuple[Upstream, ReverseProxy, int]) -> None:
    upstream, proxy, port = gateway
    a = await Client.open(port, WATCH.format(rv=5))
    b = await Client.open(port, WATCH.format(rv=5))
    up = await _writer(upstream)
    a.close()
    await asyncio.sleep(0.1)
    up.write(_frame(_event(6)))
    assert await b.body(len(_event(6))) == _event(6)
    assert upstream.closed == 0
    b.close()
    for _ in range(200):
        if upstream.closed:
            break
        await asyncio.sleep(0.01)
    assert upstream.closed == 1
    assert proxy.watch_hub is not None and proxy.watch_hub.live_streams() == 0


async def test_a_client_that_stops_reading_is_ended_and_never_stalls_the_others(
        gateway: tuple[Upstream, ReverseProxy, int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watchhub, "CUT_BYTES", 256 * 1024)
    upstream, _proxy, port = gateway
    slow = await Client.open(port, WATCH.format(rv=5), rcvbuf=4096)
    fast = await Client.open(port, WATCH.format(rv=5))
    up = await _writer(upstream)
    assert len(upstream.requests) == 1
    event = _event(6, pad=64 * 1024)
    loop = asyncio.get_running_loop()
    for _ in range(150):  # 9.6 MB: past the slow client's bound and the kernel's socket buffers (4 MiB at most)
        up.write(_frame(event))
        started = loop.time()
        assert await fast.body(len(event)) == event
        assert loop.time() - started < 5  # the fast one is never held up
    got = 0
    while (piece := await slow.chunk()):  # what it had been sent before it was ended, then a clean end
        got += len(piece)
    assert 0 < got < 150 * len(event)
    assert upstream.closed == 0  # the fast client still watches
    up.write(_frame(_event(7)))
    assert await fast.body(len(_event(7))) == _event(7)
    slow.close()
    fast.close()


async def test_an_upstream_failing_mid_stream_ends_every_answer(gateway: tuple[Upstream, ReverseProxy, int]) -> None:
    upstream, _proxy, port = gateway
    clients = [await Client.open(port, WATCH.format(rv=5)) for _ in range(3)]
    up = await _writer(upstream)
    up.write(_frame(_event(6)))
    for c in clients:
        assert await c.body(len(_event(6))) == _event(6)
    up.transport.abort()
    for c in clients:
        assert await c.chunk() == b""
        c.close()


async def test_ending_streams_ends_every_joined_answer(gateway: tuple[Upstream, ReverseProxy, int]) -> None:
    upstream, proxy, port = gateway
    clients = [await Client.open(port, WATCH.format(rv=5)) for _ in range(3)]
    await _writer(upstream)
    proxy.end_streams()
    for c in clients:
        assert await c.chunk() == b""
        c.close()
    for _ in range(200):
        if upstream.closed:
            break
        await asyncio.sleep(0.01)
    assert upstream.closed == 1


def test_what_qualifies_as_a_shared_watch() -> None:
    class Writer:
        def stream_write_framed(self, frame: bytes) -> None: ...

    def req(query: str, method: str = "GET") -> watchhub.WatchRequest | None:
        scope = {"method": method, "query_string": query.encode(), "headers": [(b"accept", b"application/json")],
                 "kubechain.direct_stream": Writer()}
        return watchhub.watch_request(scope, b"/api/v1/configmaps", b"accept: application/json\r\n"
                                      b"kubectl-session: 1234\r\nx-remote-user: admin\r\n")

    good = req("watch=true&resourceVersion=12&timeoutSeconds=30&labelSelector=a")
    assert good is not None and good.rv == b"12" and good.timeout == 30
    assert good.target == b"/api/v1/configmaps?watch=true&resourceVersion=12&labelSelector=a"
    assert good.key[1] == b"watch=true&labelSelector=a"
    assert b"kubectl-session" not in good.key[2] and b"x-remote-user: admin" in good.key[2]
    same = req("watch=true&resourceVersion=13&labelSelector=a")
    assert same is not None and same.key == good.key
    for bad in ("resourceVersion=12", "watch=false&resourceVersion=12", "watch=1", "watch=1&resourceVersion=0",
                "watch=1&resourceVersion=", "watch=1&resourceVersion=1&resourceVersion=2",
                "watch=1&resourceVersion=12&sendInitialEvents=false",
                "watch=1&resourceVersion=12&resourceVersionMatch=NotOlderThan",
                "watch=1&resourceVersion=12&timeoutSeconds=0", "watch=1&resourceVersion=12&timeoutSeconds=-1",
                "watch=1&resourceVersion=a1"):
        assert req(bad) is None, bad
    assert req("watch=1&resourceVersion=12", method="HEAD") is None


def test_a_streams_position_is_its_last_lines_version() -> None:
    assert watchhub._line_version(_event(6) + _event(17)) == b"17"
    assert watchhub._line_version(b'{"type":"ERROR","object":{"kind":"Status","code":410}}\n') == b""
    assert watchhub._line_version(b"not json\n") == b""
