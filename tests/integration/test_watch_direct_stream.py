"""Watches written straight to their connection (issue 15: handlers/directstream.py), over real sockets.

core-api is built in process on real etcd and served by uvicorn on a Unix socket with each protocol
that offers a ``DirectStream`` (uvicorn's httptools protocol corked, and the lean protocol). Clients
are raw sockets, so a test decides when the client reads. What must hold: every watcher gets every
event in order through the direct path (the cache's dispatch writes them, the watch's task does not
wake per event), the event is encoded once whatever the number of watchers, a client that stops
reading is ended by the cache as kube's cacher ends a watcher that cannot keep up and then holds no
queue, and a client that goes away frees its watcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import uvicorn
from coreapi.server import build_server
from genericapi.handlers import watch as watch_handler
from genericapi.server.apiserver import GenericAPIServer, ServerConfig
from genericapi.server.corking import CorkedHttpToolsProtocol, _CycleStream
from genericapi.server.leanexchange import Exchange
from genericapi.server.leanhttp import LeanHttpProtocol
from genericapi.storage.cacher import CacheView, CacheWatcher

pytestmark = pytest.mark.integration

PROTOCOLS = {"corked": CorkedHttpToolsProtocol, "lean": LeanHttpProtocol}


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


@pytest.fixture
async def core(etcd_server: Any) -> AsyncIterator[GenericAPIServer]:
    config = ServerConfig("core-api", [etcd_server.endpoint], etcd_prefix=f"/direct-{uuid.uuid4().hex[:8]}",
                          watch_cache_size=200)
    server = build_server(config, controllers=None)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture(params=list(PROTOCOLS))
async def served(request: pytest.FixtureRequest, core: GenericAPIServer,
                 tmp_path: Path) -> AsyncIterator[tuple[GenericAPIServer, str]]:
    """core-api's app on a Unix socket, served with the protocol named by the parameter."""
    path = str(tmp_path / "core.sock")
    config = uvicorn.Config(core.app(), uds=path, lifespan="off", log_level="warning", access_log=False,
                            http=PROTOCOLS[request.param], loop="none")
    server = _Server(config)
    task = asyncio.ensure_future(server.serve())
    for _ in range(500):
        if server.started:
            break
        await asyncio.sleep(0.01)
    assert server.started
    try:
        yield core, path
    finally:
        server.should_exit = True
        server.force_exit = True
        await asyncio.wait_for(task, 15)


class RawWatch:
    """A watch over a raw Unix socket: the test decides when (and whether) it reads."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, path: str, target: str, accept: str = "application/json",
                   rcvbuf: int | None = None) -> RawWatch:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, path)
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=1 << 24)
        writer.write(f"GET {target} HTTP/1.1\r\nhost: core\r\naccept: {accept}\r\n\r\n".encode())
        await writer.drain()
        return cls(reader, writer)

    async def head(self) -> bytes:
        return await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 30)

    async def events(self, n: int) -> list[dict[str, Any]]:
        """The next ``n`` watch events (chunk framing undone)."""
        out: list[dict[str, Any]] = []
        buf = b""
        while len(out) < n:
            size = int((await asyncio.wait_for(self.reader.readuntil(b"\r\n"), 30)).strip(), 16)
            assert size, "the stream ended"
            buf += (await asyncio.wait_for(self.reader.readexactly(size + 2), 30))[:-2]
            *lines, buf = buf.split(b"\n")
            out += [orjson.loads(line) for line in lines if line]
        return out

    async def rest(self) -> bytes:
        """Everything until the server closes the chunked body (its last chunk)."""
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            piece = await asyncio.wait_for(self.reader.read(1 << 20), 30)
            assert piece, "the connection closed before the body ended"
            data += piece
        return data

    def close(self) -> None:
        self.writer.transport.abort()


def _view(server: GenericAPIServer) -> CacheView:
    return server.by_resource[("", "configmaps")].cache._live()


async def _registered(view: CacheView, count: int) -> list[CacheWatcher]:
    for _ in range(1500):
        if len(view._watchers) >= count:
            return list(view._watchers)
        await asyncio.sleep(0.02)
    raise AssertionError(f"{len(view._watchers)} watchers registered, not {count}")


async def test_events_go_out_directly_once_encoded(served: tuple[GenericAPIServer, str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """12 watchers get 10 changes each, in order, written by the dispatch (the direct writer took
    every one), and each change's line was made once."""
    server, path = served
    name = f"direct-{uuid.uuid4().hex[:8]}"
    lines_made = 0
    real_line = watch_handler._event_line

    def counted(event_type: str, raw: bytes) -> bytes:
        nonlocal lines_made
        if name.encode() in raw:
            lines_made += 1
        return real_line(event_type, raw)

    monkeypatch.setattr(watch_handler, "_event_line", counted)
    direct_writes = 0
    for cls in (Exchange, _CycleStream):
        real_write = cls.stream_write

        def write(self: Any, data: bytes, real: Any = real_write) -> None:
            nonlocal direct_writes
            if name.encode() in data:
                direct_writes += 1
            real(self, data)
        monkeypatch.setattr(cls, "stream_write", write)

    view = _view(server)
    before = len(view._watchers)
    rv = view.revision
    target = f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"
    clients = [await RawWatch.open(path, target) for _ in range(12)]
    try:
        for c in clients:
            assert (await c.head()).startswith(b"HTTP/1.1 200 ")
        await _registered(view, before + len(clients))
        store = server.by_resource[("", "configmaps")]
        obj = await store.create("default", {"apiVersion": "v1", "kind": "ConfigMap",
                                             "metadata": {"name": name}, "data": {"n": "0"}})
        for i in range(1, 10):
            obj["data"] = {"n": str(i)}
            obj = await store.update("default", name, obj)
        for c in clients:
            events = await c.events(10)
            assert [e["type"] for e in events] == ["ADDED"] + ["MODIFIED"] * 9
            assert [e["object"]["data"]["n"] for e in events] == [str(i) for i in range(10)]
        assert lines_made == 10, f"{lines_made} lines made for 10 changes to 12 watchers"
        assert direct_writes == 10 * len(clients), f"{direct_writes} direct writes, not {10 * len(clients)}"
    finally:
        for c in clients:
            c.close()


async def test_a_client_that_goes_frees_its_watcher(served: tuple[GenericAPIServer, str]) -> None:
    server, path = served
    view = _view(server)
    before = len(view._watchers)
    target = f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={view.revision}"
    clients = [await RawWatch.open(path, target) for _ in range(5)]
    for c in clients:
        await c.head()
    await _registered(view, before + 5)
    for c in clients:
        c.close()
    for _ in range(500):
        if len(view._watchers) == before:
            break
        await asyncio.sleep(0.01)
    assert len(view._watchers) == before, "a watcher outlived its client"


async def test_a_client_that_stops_reading_is_ended_and_holds_no_queue(
        served: tuple[GenericAPIServer, str]) -> None:
    """A client that reads nothing: its connection fills, events queue (bounded by the watcher's
    queue), the cache ends the watcher when the queue is full, as kube's cacher ends a watcher that
    cannot keep up; the queue is dropped then (core-api keeps only the connection's buffer), and
    the client, reading at last, sees the events it had and then the answer end cleanly."""
    server, path = served
    view = _view(server)
    others = set(view._watchers)
    before = len(others)
    name = f"slow-{uuid.uuid4().hex[:8]}"
    slow = await RawWatch.open(path, f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={view.revision}",
                               rcvbuf=4096)
    await slow.head()
    watchers = [w for w in await _registered(view, before + 1) if w not in others]
    for w in watchers:
        w.max_queue = 20
    store = server.by_resource[("", "configmaps")]
    obj = await store.create("default", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                                         "data": {"v": "x" * 200_000}})
    most_queued = 0
    ended = False
    for i in range(200):
        obj["data"] = {"v": str(i % 10) * 200_000}
        obj = await store.update("default", name, obj)
        most_queued = max(most_queued, max(len(w.items) for w in watchers))
        if all(w.closed for w in watchers):
            ended = True
            break
    assert ended, "the slow watcher was never ended"
    assert most_queued <= 20 + 1  # the queue's bound, and the end of the watch queued after it
    for _ in range(500):  # the watch's task sees the end within its drain check
        if len(view._watchers) == before and all(not w.items for w in watchers):
            break
        await asyncio.sleep(0.01)
    assert len(view._watchers) == before, "the ended watcher is still registered"
    assert all(not w.items for w in watchers), "an ended slow watcher still holds its queue"
    body = await slow.rest()
    assert body.endswith(b"\r\n0\r\n\r\n")
    slow.close()
