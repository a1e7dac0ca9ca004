"""Issue 15's LIST and object-memory lines: a LIST of 50,000 ConfigMaps through the gateway (wall
time; extra RSS of the gateway and core-api during it ÷ the response's bytes) and core-api's RSS per
stored ConfigMap.

bench/bench.py's create phase leaves ConfigMaps ``c000000``... in namespace ``bench``; ``fill``
tops them up to the total with the bench's pooled session at its concurrency (bench.py does this
right after the create phase, ``--list-only`` from an empty namespace). A process's extra RSS
during a LIST is its peak (VmHWM, reset just before) minus its VmRSS just before. Memory a process
freed but kept resident is reused without growing: the first LIST after the fill shows the most
and the line reports the largest of the runs, and run late in bench.py (after the GET, audit and
RBAC phases) the same LIST grew the gateway by 0.25x of the response instead of 3.75x.

RSS per object is core-api's VmRSS after the fill and a LIST (the watch cache holds every object,
and whatever a LIST leaves resident counts) minus before the fill, ÷ the objects added, each read
after a short settle (the process cannot be asked to collect garbage first).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from genericapi.storage.etcd import EtcdClient
from procmem import ProcMem

from kubechain_cli.chain import Chain

Runner = Callable[[int, Callable[[int], Awaitable[None]]], Awaitable[float]]
#: Processes whose memory the LIST lines report (the others do not take part in a LIST).
LIST_PROCESSES = ("aggregator", "core-api")
URL = "/api/v1/namespaces/bench/configmaps"
SETTLE_S = 2.0


async def fill(session: aiohttp.ClientSession, gateway: str, start: int, total: int, run: Runner,
               make: Callable[[str, int], dict[str, Any]], size: int) -> float:
    """Create ConfigMaps ``c<start>`` ... ``c<total - 1>`` through the gateway; seconds taken."""

    async def create(i: int) -> None:
        async with session.post(gateway + URL, json=make(f"c{start + i:06d}", size)) as r:
            assert r.status == 201, await r.text()

    return await run(total - start, create)


async def object_bytes(chain: Chain, session: aiohttp.ClientSession, name: str) -> dict[str, int]:
    """One ConfigMap's size: its value in etcd (what the watch cache holds) and as a GET answers it."""
    etcd = EtcdClient([chain.etcd_endpoints], tls=chain.etcd_tls)
    try:
        kv, _ = await etcd.get(f"{chain.etcd_prefix}/configmaps/bench/{name}".encode())
    finally:
        await etcd.close()
    assert kv is not None, name
    async with session.get(f"{chain.server_url}{URL}/{name}") as r:
        assert r.status == 200, await r.text()
        return {"stored": len(kv.value), "served": len(await r.read())}


async def timed_lists(session: aiohttp.ClientSession, gateway: str, mem: ProcMem, runs: int) -> dict[str, Any]:
    """``runs`` LISTs of the namespace, each with the processes' peaks reset before it."""
    seconds: list[float] = []
    extra: dict[str, list[int]] = {name: [] for name in LIST_PROCESSES}
    items = size = 0
    for _ in range(runs):
        mem.reset_peaks()
        before = mem.rss()
        t = time.perf_counter()
        async with session.get(gateway + URL) as r:
            body = await r.read()
            assert r.status == 200, body[:500]
        seconds.append(time.perf_counter() - t)
        grown = ProcMem.growth(before, mem.peaks())
        for name in LIST_PROCESSES:
            extra[name].append(grown.get(name, 0))
        size = len(body)
        items = len(json.loads(body)["items"])
        await asyncio.sleep(0.5)
    return {"items": items, "response_bytes": size, "seconds": min(seconds), "all_seconds": seconds,
            "extra_rss_kib": extra,
            "extra_rss_ratio": {name: max(v) * 1024 / size for name, v in extra.items()}}


async def bench_list_memory(chain: Chain, session: aiohttp.ClientSession, existing: int, total: int, run: Runner,
                            make: Callable[[str, int], dict[str, Any]], size: int, runs: int = 3) -> dict[str, Any]:
    """Top the namespace up from ``existing`` to ``total`` ConfigMaps, then the LIST and memory figures."""
    gateway, mem = chain.server_url, ProcMem(chain.processes)
    await asyncio.sleep(SETTLE_S)
    before = mem.rss()
    fill_s = await fill(session, gateway, existing, total, run, make, size)
    await asyncio.sleep(SETTLE_S)
    filled = mem.rss()
    lists = await timed_lists(session, gateway, mem, runs)
    await asyncio.sleep(SETTLE_S)
    after = mem.rss()
    added = total - existing
    return {**lists, "added": added, "fill_creates_per_s": added / fill_s,
            "object_bytes": await object_bytes(chain, session, f"c{total - 1:06d}"),
            "core_rss_per_object_bytes": (after["core-api"] - before["core-api"]) * 1024 / added,
            "core_rss_per_object_bytes_before_list": (filled["core-api"] - before["core-api"]) * 1024 / added,
            "core_rss_mb": after["core-api"] / 1024}


def line(r: dict[str, Any]) -> str:
    extra = ", ".join(f"{name} {max(kib) / 1024:.0f} MB = {r['extra_rss_ratio'][name]:.2f}x"
                      for name, kib in r["extra_rss_kib"].items())
    runs = " ".join(f"{s:.3f}" for s in r["all_seconds"])
    return (f"LIST of {r['items']} ConfigMaps through the gateway: {r['seconds']:.3f} s, best of {runs}"
            f" (target <= 0.5 s); {r['response_bytes'] / 1e6:.1f} MB; extra RSS during it {extra}"
            f" of the response (target <= 1.5x)\n"
            f"core-api RSS per stored {r['object_bytes']['stored']}-byte ConfigMap"
            f" ({r['object_bytes']['served']} bytes as a GET answers it): "
            f"{r['core_rss_per_object_bytes'] / 1000:.2f} KB after a LIST"
            f" ({r['core_rss_per_object_bytes_before_list'] / 1000:.2f} KB before it), {r['added']} added,"
            f" core-api {r['core_rss_mb']:.0f} MB (target <= 3 KB); filled at {r['fill_creates_per_s']:.0f}"
            " creates/s")
