"""A write is sent to etcd at most once (clientv3's write-at-most-once), on real etcd: the member is
frozen after the create has gone out; the create fails as UnavailableError (a Kubernetes Status,
504 Timeout as kube's finisher answers, once the registry translates it) and the wire between client
and etcd carries it once.
Before, the client sent it again on a new connection, and a create etcd had applied was answered
AlreadyExists. A read in the same situation is still sent again (on the next member)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from genericapi.storage import errors as serrors
from genericapi.storage.etcd import EtcdClient

from tests.support.freeze import freeze, thaw
from tests.support.procs import EtcdServer

pytestmark = pytest.mark.integration


class CountingProxy:
    """A TCP relay in front of etcd that counts the gRPC requests going through it by method path
    (the client sends ``:path`` as an HPACK literal, so the path's bytes are on the wire as is)."""

    def __init__(self, upstream: str) -> None:
        url = urlparse(upstream)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 2379
        self.seen = bytearray()
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.endpoint = ""

    async def __aenter__(self) -> CountingProxy:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.endpoint = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def count(self, method: bytes) -> int:
        return self.seen.count(method)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        for task in (asyncio.ensure_future(self._pipe(reader, up_writer, True)),
                     asyncio.ensure_future(self._pipe(up_reader, writer, False))):
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, outgoing: bool) -> None:
        try:
            while data := await reader.read(65536):
                if outgoing:
                    self.seen += data
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


@pytest.fixture
def own_etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    server = EtcdServer.start(tmp_path)
    yield server
    try:
        os.kill(server.process.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    server.stop()


@pytest.fixture
async def proxy(own_etcd: EtcdServer) -> AsyncIterator[CountingProxy]:
    async with CountingProxy(own_etcd.endpoint) as p:
        yield p


TXN = b"/etcdserverpb.KV/Txn"
RANGE = b"/etcdserverpb.KV/Range"


async def test_a_create_sent_to_a_frozen_member_is_sent_once(own_etcd: EtcdServer, proxy: CountingProxy) -> None:
    c = EtcdClient([proxy.endpoint], timeout=1.0)
    try:
        prefix = f"/once-{uuid.uuid4().hex[:8]}/".encode()
        await c.create(prefix + b"a", b"1")
        assert proxy.count(TXN) == 1
        freeze(own_etcd.process.pid)
        started = time.monotonic()
        with pytest.raises(serrors.UnavailableError) as err:
            await c.create(prefix + b"b", b"2")
        took = time.monotonic() - started
        await asyncio.sleep(0.3)  # anything sent again would be through the relay by now
        assert proxy.count(TXN) == 2, "the create was sent again after it had gone out"
        assert "whether etcd applied it is unknown" in str(err.value)
        # One attempt: its 1 s deadline, then up to 5 s for the PING that finds the member gone.
        assert took < 12, f"one attempt and one PING, took {took:.1f}s"
        thaw(own_etcd.process.pid)
        # The member is back: the next write goes out (a new connection) and is answered.
        assert await c.create(prefix + b"c", b"3") > 0
        assert proxy.count(TXN) == 3
    finally:
        await c.close()


async def test_a_read_sent_to_a_frozen_member_is_sent_again(own_etcd: EtcdServer, proxy: CountingProxy) -> None:
    c = EtcdClient([proxy.endpoint], timeout=1.0)
    try:
        await c.put(b"/once-read", b"v")
        freeze(own_etcd.process.pid)
        with pytest.raises(serrors.UnavailableError, match=r"^etcd unavailable: "):
            await c.get(b"/once-read")  # every attempt times out
        assert proxy.count(RANGE) == 2  # one endpoint: two attempts
        thaw(own_etcd.process.pid)
        kv, _ = await c.get(b"/once-read")
        assert kv is not None and kv.value == b"v"
    finally:
        await c.close()
