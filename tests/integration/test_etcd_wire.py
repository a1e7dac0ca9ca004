"""The etcd client's own gRPC transport (storage/grpcwire.py) on real etcd: flow control both ways,
refused sizes answered as before, a member stopped or killed mid-request, a cancelled call, lease
expiry reaching a watch, the server's stream limit, and the HPACK shortcut against a real encoder."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import hpack
import pytest
from genericapi.storage import errors as serrors
from genericapi.storage.etcd import EtcdClient, WatchBatch, prefix_end
from genericapi.storage.grpcwire import Connection

from tests.support.freeze import freeze, thaw
from tests.support.procs import EtcdServer

pytestmark = pytest.mark.integration


@pytest.fixture
async def client(etcd_server) -> AsyncIterator[EtcdClient]:  # type: ignore[no-untyped-def]
    c = EtcdClient([etcd_server.endpoint])
    yield c
    await c.close()


@pytest.fixture
def own_etcd(tmp_path: Path) -> AsyncIterator[EtcdServer]:  # type: ignore[misc]
    """An etcd of this test's own, to stop, freeze and restart."""
    server = EtcdServer.start(tmp_path)
    yield server  # type: ignore[misc]
    try:
        os.kill(server.process.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    server.stop()


def _prefix() -> bytes:
    return f"/wire-{uuid.uuid4().hex[:8]}/".encode()


async def test_values_past_both_flow_control_windows(client: EtcdClient) -> None:
    """A request larger than etcd's stream window (64 KiB to 1 MiB) goes out in pieces as windows
    open; a range answer larger than this client's 16 MiB window comes in with WINDOW_UPDATEs."""
    prefix = _prefix()
    values = {prefix + b"%02d" % i: bytes([65 + i]) * 1_400_000 for i in range(13)}
    for k, v in values.items():
        await client.put(k, v)
    kvs, _rev, more = await client.range(prefix, prefix_end(prefix))
    assert not more and {kv.key: kv.value for kv in kvs} == values
    assert sum(len(v) for v in values.values()) > 16 * 1024 * 1024
    for _ in range(2):  # the connection's windows are still right afterwards
        kvs, _rev, _more = await client.range(prefix, prefix_end(prefix))
        assert len(kvs) == 13


async def test_refused_sizes_are_answered_as_grpc_aio_answered_them(client: EtcdClient) -> None:
    """etcd refuses a request past --max-request-bytes (1.5 MiB) itself, and one past that plus
    512 KiB in its gRPC server: both are etcd's own words in an UnavailableError, as before."""
    prefix = _prefix()
    with pytest.raises(serrors.UnavailableError) as err:
        await client.create(prefix + b"a", b"x" * 1_600_000)
    assert str(err.value) == "etcd Txn: etcdserver: request is too large"
    with pytest.raises(serrors.UnavailableError) as err:
        await client.create(prefix + b"b", b"x" * 2_200_000)
    assert re.fullmatch(r"etcd Txn: grpc: received message larger than max \(22000\d\d vs\. 2097152\)", str(err.value))
    assert await client.create(prefix + b"c", b"small") > 0  # the connection is fine afterwards
    with pytest.raises(serrors.FutureRevisionRefusedError):
        await client.get(prefix + b"c", revision=10**12)


async def test_a_frozen_member_times_out_then_serves_again(own_etcd: EtcdServer) -> None:
    c = EtcdClient([own_etcd.endpoint], timeout=1.0)
    try:
        prefix = _prefix()
        await c.create(prefix + b"a", b"1")
        freeze(own_etcd.process.pid)
        started = time.monotonic()
        with pytest.raises(serrors.UnavailableError):
            await c.create(prefix + b"b", b"2")
        assert time.monotonic() - started < 15  # the attempt ends at its deadline, the PING 5 s later
        thaw(own_etcd.process.pid)
        # (The timed-out create may still be applied now: etcd had it when it froze, as with any client.)
        await c.create(prefix + b"c", b"3")
        kv, _ = await c.get(prefix + b"c")
        assert kv is not None and kv.value == b"3"
    finally:
        await c.close()


async def test_a_killed_member_is_unavailable_until_it_is_back(own_etcd: EtcdServer, tmp_path: Path) -> None:
    c = EtcdClient([own_etcd.endpoint], timeout=2.0)
    try:
        prefix = _prefix()
        await c.create(prefix + b"a", b"1")
        own_etcd.process.kill()
        own_etcd.process.wait()
        with pytest.raises(serrors.UnavailableError, match=r"^etcd unavailable: "):
            await c.get(prefix + b"a")
        # Back on the same port and data: the next call reconnects by itself.
        port = int(own_etcd.endpoint.rsplit(":", 1)[1])
        restarted = _restart_on(own_etcd, port, tmp_path)
        own_etcd.process = restarted
        kv, _ = await c.get(prefix + b"a")
        assert kv is not None and kv.value == b"1"
    finally:
        await c.close()


def _restart_on(server: EtcdServer, port: int, data_dir: Path) -> object:
    """etcd again with the same client URL and data directory (the peer port is new)."""
    import subprocess
    import urllib.request

    from kubechain_cli.chain import etcd_binary, free_ports
    (peer,) = free_ports(1)
    endpoint = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([
        etcd_binary(), "--name", "test", "--data-dir", str(data_dir / "etcd"),
        "--listen-client-urls", endpoint, "--advertise-client-urls", endpoint,
        "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
        "--initial-cluster", f"test=http://127.0.0.1:{peer}", "--log-level", "error",
    ], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(endpoint + "/health", timeout=1) as r:
                if b'"true"' in r.read():
                    return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("etcd did not come back")


async def test_a_cancelled_call_leaves_the_connection_usable(own_etcd: EtcdServer) -> None:
    c = EtcdClient([own_etcd.endpoint], timeout=30.0)
    try:
        prefix = _prefix()
        await c.create(prefix + b"a", b"1")
        channel = c._client
        freeze(own_etcd.process.pid)
        task = asyncio.ensure_future(c.get(prefix + b"a"))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        thaw(own_etcd.process.pid)
        kv, _ = await c.get(prefix + b"a")
        assert kv is not None and c._client is channel  # the same connection, the stream was reset
    finally:
        await c.close()


async def test_lease_expiry_reaches_the_watch(client: EtcdClient) -> None:
    """kube's TTL keys: etcd deletes the key when its lease runs out, and the watch sees it."""
    prefix = _prefix()
    rev = await client.current_revision()
    seen: list[tuple[str, bytes]] = []

    async def follow() -> None:
        batch: WatchBatch
        async for batch in client.watch(prefix, rev + 1):
            seen.extend((ev.kind, ev.key) for ev in batch.events)
            if any(kind == "DELETE" for kind, _ in seen):
                return

    watcher = asyncio.ensure_future(follow())
    await client.put_with_ttl(prefix + b"lease", b"v", 2)
    await asyncio.wait_for(watcher, 20)
    assert seen == [("PUT", prefix + b"lease"), ("DELETE", prefix + b"lease")]
    assert client.open_watches[prefix] == 0


async def test_a_compacted_start_revision_is_too_old(client: EtcdClient) -> None:
    prefix = _prefix()
    first = await client.put(prefix + b"a", b"1")
    last = await client.put(prefix + b"a", b"2")
    await client.compact(last)
    with pytest.raises(serrors.TooOldRevisionError):
        async for _ in client.watch(prefix, first):
            pass
    with pytest.raises(serrors.TooOldRevisionError):
        await client.get(prefix + b"a", revision=first)


async def test_calls_past_the_servers_stream_limit_wait_for_a_slot(client: EtcdClient) -> None:
    """A server's SETTINGS_MAX_CONCURRENT_STREAMS: calls beyond it wait for a stream to end instead
    of being refused (the limit is set here as if etcd had sent 2)."""
    prefix = _prefix()
    await client.put(prefix + b"a", b"1")
    channel = await client._connect()
    conn = channel.conn
    conn._max_streams = 2
    most = 0
    stop = False

    def sample() -> None:
        nonlocal most
        most = max(most, len(conn._streams))
        if not stop:
            asyncio.get_running_loop().call_soon(sample)

    sample()
    try:
        results = await asyncio.gather(*(client.get(prefix + b"a") for _ in range(20)))
    finally:
        stop = True
    assert all(kv is not None and kv.value == b"1" for kv, _ in results)
    assert 1 <= most <= 2 and not conn._streams


async def test_indexed_header_blocks_decode_as_a_fresh_decoder_does() -> None:
    """The remembered answers for all-indexed header blocks, against hpack's own encoder (which
    indexes what it sends, and evicts as its table fills): every block decodes as a decoder that
    remembers nothing decodes it."""
    conn = Connection("etcd:2379", "http", 2**31 - 1, 10.0, 5.0)
    encoder, reference = hpack.Encoder(), hpack.Decoder()
    lists = []
    for i in range(400):
        lists.append([(b":status", b"200"), (b"content-type", b"application/grpc")])
        lists.append([(b"grpc-status", b"0" if i % 7 else b"14"), (b"grpc-message", b"" if i % 7 else b"x%d" % i)])
        if i % 50 == 0:  # new names fill and evict the dynamic table
            lists.append([(b"x-filler-%d" % j, b"v" * 200) for j in range(25)])
    cached = 0
    for headers in lists:
        block = encoder.encode(headers)
        cached += block in conn._indexed_blocks
        assert conn._decode(block) == reference.decode(block, raw=True)
    assert cached > 300  # the shortcut was taken for most of them


async def test_a_conflict_carries_the_key_as_the_transaction_read_it(client: EtcdClient) -> None:
    """update/delete compare the mod revision and read the key in the same transaction when the
    compare fails: the conflict carries it (a retry needs no read), a missing key is not found."""
    prefix = _prefix()
    first = await client.create(prefix + b"a", b"1")
    second = await client.update(prefix + b"a", b"2", first)
    for write in (lambda: client.update(prefix + b"a", b"3", first), lambda: client.delete(prefix + b"a", first)):
        with pytest.raises(serrors.RevisionConflictError) as err:
            await write()
        current = err.value.current
        assert (err.value.expected, err.value.actual) == (first, second)
        assert (current.key, current.value, current.mod_revision) == (prefix + b"a", b"2", second)
    assert await client.delete(prefix + b"a", second) > second
    with pytest.raises(serrors.KeyNotFoundError):
        await client.update(prefix + b"a", b"4", second)
    await client.create(prefix + b"b", b"1")
    with pytest.raises(serrors.KeyExistsError):
        await client.create(prefix + b"b", b"1")


async def test_a_counted_page_says_how_many_keys_the_range_holds(client: EtcdClient) -> None:
    prefix = _prefix()
    for i in range(7):
        await client.put(prefix + b"%d" % i, b"v")
    kvs, rev, more, count = await client.range_counted(prefix, prefix_end(prefix), limit=3)
    assert ([kv.key for kv in kvs], more, count) == ([prefix + b"0", prefix + b"1", prefix + b"2"], True, 7)
    await client.put(prefix + b"9", b"v")  # a later write: the page at ``rev`` does not see it
    kvs, _rev, more, count = await client.range_counted(kvs[-1].key + b"\0", prefix_end(prefix), revision=rev,
                                                        limit=3)
    assert (len(kvs), more, count) == (3, True, 4)  # remainingItemCount of this page: 4 - 3 = 1


async def test_a_draining_connection_keeps_its_streams_while_new_calls_go_elsewhere(own_etcd: EtcdServer) -> None:
    """Stream ids used up (after ~1 billion calls; GOAWAY does the same): the connection drains. The
    call on its last id and the watch on it run to their end, the next call opens a new connection,
    and a create in flight is answered once (never sent again: no AlreadyExists for a create that
    succeeded), and the drained connection closes once its last stream has ended."""
    c = EtcdClient([own_etcd.endpoint], timeout=10.0)
    try:
        prefix = _prefix()
        rev = await c.put(prefix + b"seed", b"v")
        old = (await c._connect()).conn
        seen: list[bytes] = []

        async def follow() -> None:
            async for batch in c.watch(prefix, rev + 1):
                seen.extend(ev.key for ev in batch.events)
                if len(seen) >= 2:
                    return

        watcher = asyncio.ensure_future(follow())
        await asyncio.sleep(0.3)
        old._next_id = 2**31 - 1  # the last stream id: the next call takes it
        freeze(own_etcd.process.pid)
        create = asyncio.ensure_future(c.create(prefix + b"a", b"1"))  # the last id of ``old``
        await asyncio.sleep(0.2)
        assert not old.usable and not old.lost
        later = asyncio.ensure_future(c.put(prefix + b"b", b"2"))  # opens a new connection
        await asyncio.sleep(0.3)
        thaw(own_etcd.process.pid)
        assert await asyncio.wait_for(create, 15) > rev  # created once, not KeyExistsError
        await asyncio.wait_for(later, 15)
        await asyncio.wait_for(watcher, 15)
        assert sorted(seen) == [prefix + b"a", prefix + b"b"]
        assert c._client is not None and c._client.conn is not old
        for _ in range(50):  # the watch's stream ended: the drained connection closes itself
            if old.lost:
                break
            await asyncio.sleep(0.05)
        assert old.lost
    finally:
        await c.close()
