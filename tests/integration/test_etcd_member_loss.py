"""Watch caches keep following etcd when the member their client talks to dies or stops answering.

Runs a real 3-member etcd cluster. A client is pointed at the victim member first, watch caches are
started on it, the victim is killed (or frozen) while writes continue through another member, and
each cache must reach the last written revision within a few seconds, with a client watch that sees
every write exactly once, in order.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from genericapi.storage.cacher import CacheEvent, CacheWatcher, WatchCache, WatchClosed
from genericapi.storage.errors import FutureRevisionError, KeyExistsError, UnavailableError
from genericapi.storage.etcd import EtcdClient
from support.etcd_cluster import EtcdCluster
from support.freeze import freeze, thaw

pytestmark = pytest.mark.integration

PREFIXES = 4
CATCH_UP = 5.0


class JsonCodec:
    def decode(self, value: bytes, revision: int) -> tuple[dict[str, Any], bytes]:
        obj = json.loads(value)
        obj["rv"] = revision
        return obj, value


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    c = EtcdCluster.start(Path(tmp_path_factory.mktemp("etcd3")))
    try:
        yield c
    finally:
        c.stop()


def rotated(endpoints: list[str], first: int) -> list[str]:
    return endpoints[first:] + endpoints[:first]


class Scenario:
    """Caches on ``PREFIXES`` prefixes through a client connected to ``victim``; writes through another."""

    def __init__(self, cluster: EtcdCluster, victim: int, tag: str, timeout: float = 10.0) -> None:
        self.base = f"/loss/{tag}/"
        self.client = EtcdClient(rotated(cluster.endpoints, victim), timeout=timeout)
        self.writer = EtcdClient(rotated(cluster.endpoints, (victim + 1) % 3))
        self.caches = [WatchCache(self.client, f"{self.base}p{i}/".encode(), JsonCodec(), future_wait=CATCH_UP)
                       for i in range(PREFIXES)]
        self.written: list[list[int]] = [[] for _ in range(PREFIXES)]
        self.watcher: CacheWatcher | None = None
        self.n = 0

    async def start(self) -> None:
        for cache in self.caches:
            await cache.start()
        self.watcher = await self.caches[0].watch(self.caches[0].revision, None)

    async def write(self, rounds: int, pause: float = 0.0) -> None:
        for _ in range(rounds):
            for i in range(PREFIXES):
                self.written[i].append(await self.create(f"{self.base}p{i}/k{self.n}".encode()))
            self.n += 1
            if pause:
                await asyncio.sleep(pause)

    async def create(self, key: bytes) -> int:
        """Create ``key`` through the writer; its create revision. The client sends a write at most
        once: during the leader election a killed or frozen leader causes, etcd may answer "request
        timed out" for a write it may still apply, so, as a careful client of an apiserver does, the
        outcome is settled by creating again (a create cannot apply twice) and reading it back."""
        deadline = time.monotonic() + 30
        while True:
            try:
                try:
                    return await self.writer.create(key, b'{"n": 1}')
                except KeyExistsError:  # an earlier attempt whose answer was lost did apply
                    kv, _ = await self.writer.get(key)
                    assert kv is not None
                    return kv.create_revision
            except UnavailableError:
                assert time.monotonic() < deadline, f"etcd refused to create {key!r} for 30 s"
                await asyncio.sleep(0.1)

    async def assert_caught_up(self) -> None:
        started = time.monotonic()
        targets = [revs[-1] for revs in self.written]
        while any(c.revision < t for c, t in zip(self.caches, targets, strict=True)):
            assert time.monotonic() - started < CATCH_UP, (
                f"caches stuck at {[c.revision for c in self.caches]}, etcd wrote up to {targets}")
            await asyncio.sleep(0.05)
        for cache in self.caches:
            assert len(cache.list(b"")[0]) == self.n
        # A consistent read (the newest etcd revision) is answered by every cache.
        current = await self.writer.current_revision()
        for cache in self.caches:
            await cache.wait_for_revision(current)
            assert cache.revision >= current

    def assert_watch_complete(self) -> None:
        assert self.watcher is not None
        seen: list[int] = []
        while (item := self.watcher.ready_item()) is not None:
            if isinstance(item, WatchClosed):
                pytest.fail(f"watch ended: {item.error!r}")
            if isinstance(item, CacheEvent):
                assert item.type == "ADDED", item
                seen.append(item.revision)
        assert seen == self.written[0]

    async def close(self) -> None:
        for cache in self.caches:
            await cache.stop()
        await self.client.close()
        await self.writer.close()


async def reader(client: EtcdClient, stop: asyncio.Event) -> tuple[int, int]:
    """Keeps reads in flight on the caches' client, as a serving apiserver does: how many succeeded,
    and how many were cancelled under it (this task is never cancelled, so any is a storage bug)."""
    done = cancelled = 0
    while not stop.is_set():
        try:
            await client.get(b"/loss/none")
            done += 1
        except asyncio.CancelledError:
            cancelled += 1
        except Exception:  # an in-flight read may fail while the member dies; the caches must not
            await asyncio.sleep(0.01)
    return done, cancelled


@pytest.mark.parametrize("round_", range(6))
async def test_cache_survives_killed_member(cluster: EtcdCluster, round_: int) -> None:
    victim = round_ % 3
    s = Scenario(cluster, victim, f"kill{round_}")
    stop = asyncio.Event()
    readers: list[asyncio.Task[tuple[int, int]]] = []
    try:
        await s.start()
        await s.write(3)
        readers = [asyncio.create_task(reader(s.client, stop)) for _ in range(4)]
        await asyncio.sleep(0.1)
        cluster.kill(victim)
        await s.write(10, pause=0.02)
        stop.set()
        reads = await asyncio.gather(*readers)
        await s.assert_caught_up()
        s.assert_watch_complete()
        assert sum(r[0] for r in reads) > 0
        assert sum(r[1] for r in reads) == 0, "reads were cancelled when the client changed channels"
        # The caches' client still serves reads, now from a surviving member.
        assert (await s.client.get(f"{s.base}p0/k0".encode()))[0] is not None
    finally:
        stop.set()  # a failure above must not leave the readers looping on a closed client
        await asyncio.gather(*readers, return_exceptions=True)
        await s.close()
        cluster.restart(victim)


@pytest.mark.parametrize("victim", range(3))
async def test_cache_survives_channel_reset_by_a_failed_call(cluster: EtcdCluster, victim: int) -> None:
    """A frozen member: a read times out, the member answers no PING either, so the client ends the
    connection that still carries the caches' (silent, not failed) watches and moves on. They must
    resume on the next member, not end."""
    # The read timeout outlasts a leader election (when the frozen member led), so the read that
    # moves the client on does not also time out on the surviving members.
    s = Scenario(cluster, victim, f"freeze{victim}", timeout=3.0)
    proc = cluster.members[victim].process
    assert proc is not None
    try:
        await s.start()
        await s.write(3)
        freeze(proc.pid)  # stopped for good before the next call (see support/freeze.py)
        try:
            # Times out on the frozen member (3 s, then 5 s for the PING), then succeeds on the next one.
            kv, _ = await s.client.get(f"{s.base}p0/k0".encode())
            assert kv is not None
            await s.write(10)
            await s.assert_caught_up()
            s.assert_watch_complete()
        finally:
            thaw(proc.pid)
    finally:
        await s.close()
        cluster.wait_healthy()


async def test_silent_member_is_noticed_by_keepalive(cluster: EtcdCluster) -> None:
    """Watches on a member that stops answering without closing its connection end by keepalive
    (no other call on the channel to notice it) and resume elsewhere."""
    s = Scenario(cluster, 0, "silent")
    proc = cluster.members[0].process
    assert proc is not None
    try:
        await s.start()
        await s.write(2)
        freeze(proc.pid)  # stopped for good before the next call (see support/freeze.py)
        try:
            await s.write(5)
            started = time.monotonic()
            targets = [revs[-1] for revs in s.written]
            while any(c.revision < t for c, t in zip(s.caches, targets, strict=True)):
                assert time.monotonic() - started < 25, "keepalive never ended the watches on the frozen member"
                await asyncio.sleep(0.1)
            await s.assert_caught_up()
            s.assert_watch_complete()
        finally:
            thaw(proc.pid)
    finally:
        await s.close()
        cluster.wait_healthy()


async def test_consistent_wait_on_stale_cache_is_refused(cluster: EtcdCluster) -> None:
    """The bad case still answers: a revision the cache cannot reach in time is FutureRevisionError."""
    s = Scenario(cluster, 1, "future")
    try:
        await s.start()
        await s.write(1)
        with pytest.raises(FutureRevisionError):
            await s.caches[0].wait_for_revision(await s.writer.current_revision() + 1000)
    finally:
        await s.close()
