"""Memory per open watch, gateway and core-api (issue 15: per-watcher state small).

300 plain JSON watches of one ConfigMap are opened through the gateway, 50 at a time, each over
its own TLS connection with a client certificate (as bench/watchers_bench.py's watchers), and one
event reaches them all; each process's VmRSS growth from before they opened, ÷ 300, is bounded.
Memory, not time: the figures hold under load. What a watch costs (bench/watch_memory_probe.py,
bench/watch_memory_floor.py): in the gateway ~62-64 KiB, of which ~40 KiB is the TLS connection
itself (uvloop + OpenSSL 3 with a verified client certificate, measured apart with no HTTP on it),
~8 KiB uvicorn's per-connection objects and the rest the filters, the proxy and its upstream
connection; in core-api ~24 KiB. (Opened all at once, as the bench does, the gateway reads ~86:
the burst's freed memory stays resident, malloc_trim gives it back.) The bounds leave room for
noise but not for a per-watch buffer (a 64 KiB body buffer touched per stream, an event kept per
watcher): either alone would cross them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from support.procs import ChainHandle, start_chain

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration

WATCHERS = 300
NS = "watch-memory"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
#: KiB of VmRSS per open watch, opened 50 at a time (measured: gateway 62-64, core-api 23-24).
GATEWAY_MAX_KIB = 100
CORE_API_MAX_KIB = 40


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChainHandle]:
    """A chain of its own, as the bench starts it (audit and controllers on): 300 connections
    and what they leave resident would weigh on the session chain's other tests."""
    chain = Chain(tmp_path_factory.mktemp("watch-memory"), port=free_port())
    handle = start_chain(chain)
    try:
        yield handle
    finally:
        chain.stop()


async def _open_watches(chain: Chain, count: int) -> tuple[aiohttp.ClientSession, list[aiohttp.ClientResponse]]:
    """``count`` watches, each on its own connection, every one having received one event."""
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=chain.ssl_context(), limit=0),
                                    timeout=aiohttp.ClientTimeout(total=None, sock_read=300))
    url = chain.server_url
    name = f"watched-{count}"
    async with session.post(url + CMS, json={"apiVersion": "v1", "kind": "ConfigMap",
                                             "metadata": {"name": name}, "data": {"v": "0" * 200}}) as r:
        assert r.status == 201, await r.text()
        rv = (await r.json())["metadata"]["resourceVersion"]
    watch = f"{url}{CMS}?watch=1&resourceVersion={rv}&fieldSelector=metadata.name%3D{name}"
    responses: list[aiohttp.ClientResponse] = []
    for start in range(0, count, 50):
        batch = await asyncio.gather(*(session.get(watch) for _ in range(min(50, count - start))))
        for r in batch:
            assert r.status == 200, await r.text()
        responses.extend(batch)
    async with session.patch(url + CMS + "/" + name, json={"data": {"v": "1" * 200}},
                             headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 200, await r.text()
    lines = await asyncio.gather(*(r.content.readline() for r in responses))
    assert all(b'"MODIFIED"' in line for line in lines), lines[:3]
    return session, responses


async def _close(session: aiohttp.ClientSession, responses: list[aiohttp.ClientResponse]) -> None:
    for r in responses:
        r.close()
    await session.close()


def test_an_open_watch_costs_the_gateway_and_core_api_a_bounded_resident_memory(own: ChainHandle) -> None:
    chain = own.chain
    pids = {name: chain.processes[name].pid for name in ("aggregator", "core-api")}

    async def run() -> dict[str, float]:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=chain.ssl_context())) as s:
            async with s.post(chain.server_url + "/api/v1/namespaces", json={
                    "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}) as r:
                assert r.status == 201, await r.text()
        # one-time costs (first TLS connections, code paths, caches) before the baseline
        await _close(*await _open_watches(chain, 20))
        await asyncio.sleep(2)
        before = {name: _rss_kib(pid) for name, pid in pids.items()}
        session, responses = await _open_watches(chain, WATCHERS)
        try:
            await asyncio.sleep(2)
            after = {name: _rss_kib(pid) for name, pid in pids.items()}
        finally:
            await _close(session, responses)
        return {name: (after[name] - before[name]) / WATCHERS for name in pids}

    per_watch = asyncio.run(run())
    print(f"KiB of VmRSS per open watch: {per_watch}")
    assert per_watch["aggregator"] <= GATEWAY_MAX_KIB, per_watch
    assert per_watch["core-api"] <= CORE_API_MAX_KIB, per_watch
