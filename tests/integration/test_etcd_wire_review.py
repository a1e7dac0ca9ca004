"""storage/grpcwire.py on real etcd, the review of issue 15's transport: 10,000 watches opened and
cancelled leave nothing behind in etcd or in the client, thousands of concurrent calls and watches
on one connection each get their own answer, and the connection after a watch storm still serves."""

from __future__ import annotations

import asyncio
import re
import urllib.request
import uuid
from collections.abc import AsyncIterator

import pytest
from genericapi.storage.etcd import EtcdClient, KeyValue, prefix_end

pytestmark = pytest.mark.integration


def _metrics(endpoint: str) -> dict[str, float]:
    with urllib.request.urlopen(endpoint + "/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for name in ("etcd_debugging_mvcc_watcher_total", "etcd_debugging_mvcc_watch_stream_total"):
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    for kind in ("started", "handled"):
        out[f"watch_{kind}"] = sum(float(v) for v in re.findall(
            rf'^grpc_server_{kind}_total{{[^}}]*grpc_method="Watch"[^}}]*}} (\S+)$', text, re.M))
    return out


@pytest.fixture
async def client(etcd_server) -> AsyncIterator[EtcdClient]:  # type: ignore[no-untyped-def]
    c = EtcdClient([etcd_server.endpoint])
    yield c
    await c.close()


async def test_ten_thousand_watch_opens_and_cancels_leave_nothing(client: EtcdClient, etcd_server) -> None:  # type: ignore[no-untyped-def]
    """Each cancelled watch is reset (RST_STREAM) and forgotten: etcd's watcher and stream gauges
    and its count of Watch calls still running come back to where they were, the client holds no
    stream, and the same connection still serves."""
    prefix = f"/wire-review-{uuid.uuid4().hex[:8]}/".encode()
    rev = await client.put(prefix + b"seed", b"v")
    conn = (await client._connect()).conn
    loop = asyncio.get_running_loop()
    before = await loop.run_in_executor(None, _metrics, etcd_server.endpoint)
    batch, rounds = 200, 50

    async def follow() -> None:
        async for _ in client.watch(prefix, rev + 1):
            pass

    for _ in range(rounds):
        tasks = [asyncio.ensure_future(follow()) for _ in range(batch)]
        await asyncio.sleep(0)
        # Wait until etcd has every watch of the batch (so each cancel resets a live server stream).
        for _ in range(200):
            now = await loop.run_in_executor(None, _metrics, etcd_server.endpoint)
            if now["etcd_debugging_mvcc_watcher_total"] >= before["etcd_debugging_mvcc_watcher_total"] + batch:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError(f"etcd did not see the batch's watches: {now}")
        assert len(conn._streams) == batch
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert not conn._streams
    assert client._client is not None and client._client.conn is conn and conn.usable
    after: dict[str, float] = {}
    for _ in range(100):
        after = await loop.run_in_executor(None, _metrics, etcd_server.endpoint)
        if after["etcd_debugging_mvcc_watcher_total"] == before["etcd_debugging_mvcc_watcher_total"] and \
                after["watch_started"] - after["watch_handled"] == before["watch_started"] - before["watch_handled"]:
            break
        await asyncio.sleep(0.1)
    assert after["watch_started"] - before["watch_started"] == batch * rounds
    assert after["etcd_debugging_mvcc_watcher_total"] == before["etcd_debugging_mvcc_watcher_total"], after
    assert after["etcd_debugging_mvcc_watch_stream_total"] == before["etcd_debugging_mvcc_watch_stream_total"], after
    assert after["watch_started"] - after["watch_handled"] == before["watch_started"] - before["watch_handled"], after
    assert not client.open_watches and not conn._streams and not conn._stream_slots
    kv, _ = await client.get(prefix + b"seed")
    assert kv is not None and kv.value == b"v"


async def test_thousands_of_concurrent_calls_and_watches_on_one_connection(etcd_server) -> None:  # type: ignore[no-untyped-def]
    """2,000 writes then 2,000 reads, 250 in flight at a time, beside 100 watches on one connection:
    every call gets its own answer (no response delivered to another stream), every watch sees every
    write. (The deadline is long: on this loaded machine a call past it would close the connection
    under the watches, EtcdClient's policy for a timed-out member, which is not what this checks.)"""
    client = EtcdClient([etcd_server.endpoint], timeout=60.0)
    try:
        await _many_calls_and_watches(client)
    finally:
        await client.close()


async def _many_calls_and_watches(client: EtcdClient) -> None:
    prefix = f"/wire-review-{uuid.uuid4().hex[:8]}/".encode()
    rev = await client.put(prefix + b"seed", b"v")
    conn = (await client._connect()).conn
    seen: list[set[bytes]] = [set() for _ in range(100)]
    n = 2000

    async def follow(i: int) -> None:
        watch = client.watch(prefix + b"k", rev + 1)
        async for batch in watch:
            seen[i].update(ev.key for ev in batch.events)
            if len(seen[i]) == n:
                break
        await watch.aclose()  # type: ignore[attr-defined]

    watches = [asyncio.ensure_future(follow(i)) for i in range(100)]
    values = {prefix + b"k%05d" % i: b"value-%d-" % i * (1 + i % 50) for i in range(n)}
    gate = asyncio.Semaphore(250)

    async def put(k: bytes, v: bytes) -> int:
        async with gate:
            return await client.put(k, v)

    async def get(k: bytes) -> tuple[KeyValue | None, int]:
        async with gate:
            return await client.get(k)

    revisions = await asyncio.gather(*(put(k, v) for k, v in values.items()))
    assert len(set(revisions)) == n
    reads = await asyncio.gather(*(get(k) for k in values))
    assert [kv.value for kv, _ in reads if kv is not None] == list(values.values())
    await asyncio.wait_for(asyncio.gather(*watches), 120)
    assert all(s == set(values) for s in seen)
    kvs, _rev, more = await client.range(prefix + b"k", prefix_end(prefix + b"k"))
    assert not more and {kv.key: kv.value for kv in kvs} == values
    assert client._client is not None and client._client.conn is conn and not conn._streams
