"""Issue 15's watch lines: one event to W watchers through the gateway (p99 latency), the CPU each
process spends per delivery, and the memory each watcher costs each process.

The watchers are bench/watch_fanout_bench.py's ``Fanout`` (plain JSON watches of one ConfigMap in
namespace ``bench``, which bench/bench.py has made). Memory per watcher: each process's VmRSS
before the watches are opened and after E events have reached them all (steady state, read after
a short settle), ÷ W; also read just after they opened. A first event warms every watcher up
(its p99 is reported apart); then E updates, one at a time, each sent once every watcher has the
previous one. CPU per delivery: each process's CPU from /proc around those E rounds ÷ (E x W)
(the E updates themselves are in it: about 1 ms of CPU each against W deliveries). Latency: from
just before an update is sent to a watcher's reading of its line; each event's p99 over its W
deliveries, and the median and worst of those over the E events.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from benchutil import percentile
from proccpu import ProcCPU
from procmem import ProcMem
from watch_fanout_bench import Fanout

from kubechain_cli.chain import Chain

SETTLE_S = 1.0


class TimedFanout(Fanout):
    """``Fanout`` in a namespace that exists already, noting when each line arrives."""

    def __init__(self, chain: Chain, watchers: int) -> None:
        super().__init__(chain, watchers)
        self.arrivals: list[float] = []

    async def setup(self) -> None:
        watch_url = await self.create_watched()
        self.tasks = [asyncio.create_task(self._watch(i, watch_url)) for i in range(self.watchers)]
        await asyncio.wait_for(self.all_started.wait(), 300)

    def check(self, line: bytes) -> None:
        self.arrivals.append(time.perf_counter())

    async def timed_event(self) -> list[float]:
        """One update; each watcher's delay in ms once every watcher has it."""
        self.arrivals.clear()
        sent = time.perf_counter()
        await self.round(1)
        return [(t - sent) * 1000 for t in self.arrivals]


async def bench_fanout(chain: Chain, watchers: int, events: int) -> dict[str, Any]:
    mem, cpu = ProcMem(chain.processes), ProcCPU(chain.processes)
    await asyncio.sleep(SETTLE_S)
    rss_before = mem.rss()
    fanout = TimedFanout(chain, watchers)
    try:
        await fanout.setup()
        await asyncio.sleep(SETTLE_S)
        rss_opened = mem.rss()
        first = await fanout.timed_event()
        p99s: list[float] = []
        cpu_before = cpu.snapshot()
        for _ in range(events):
            p99s.append(percentile(await fanout.timed_event(), 0.99))
        cpu_us = cpu.per_request(cpu_before, cpu.snapshot(), events * watchers)
        await asyncio.sleep(SETTLE_S)
        rss_after = mem.rss()
    finally:
        await fanout.close()

    def per_watcher(after: dict[str, int]) -> dict[str, float]:
        grown = ProcMem.growth(rss_before, after)
        return {**{k: v / watchers for k, v in grown.items()}, "chain": sum(grown.values()) / watchers}

    return {"watchers": watchers, "events": events, "first_p99_ms": percentile(first, 0.99),
            "p99_ms": statistics.median(p99s), "worst_p99_ms": max(p99s),
            "cpu_us_per_delivery": {**cpu_us, "chain": sum(cpu_us.values())},
            "kib_per_watcher": per_watcher(rss_after), "kib_per_watcher_opened": per_watcher(rss_opened)}


def _per_process(values: dict[str, float], unit: str, digits: int = 1) -> str:
    named = {k: v for k, v in values.items() if k in ("aggregator", "core-api", "etcd", "extensions-api")}
    return ", ".join(f"{k} {v:.{digits}f}{unit}" for k, v in sorted(named.items()))


def line(r: dict[str, Any]) -> str:
    c, m, o = r["cpu_us_per_delivery"], r["kib_per_watcher"], r["kib_per_watcher_opened"]
    return (f"one event to {r['watchers']} watchers through the gateway: p99 {r['p99_ms']:.1f} ms (median of"
            f" {r['events']} events' p99; worst {r['worst_p99_ms']:.1f}, first event {r['first_p99_ms']:.1f}) "
            f"(target <= 50 ms)\n"
            f"CPU per delivery: {_per_process(c, ' us')}; chain {c['chain']:.1f} us (target <= 20 us)\n"
            f"memory per watcher: {_per_process(m, ' KiB')}; chain {m['chain']:.1f} KiB (target <= 30 KiB);"
            f" just after opening: chain {o['chain']:.1f} KiB")
