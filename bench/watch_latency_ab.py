"""One event to W watchers through the gateway, p99 latency and CPU per delivery: another tree ÷ this one.

bench/watchers_bench.py's measurement (each update's p99 over its W deliveries, one update at a time,
each sent once every watcher has the previous one), but on two chains side by side, one on another
tree (made as bench/tree_ab.py says; it goes first on ``PYTHONPATH``) and one on this working tree, the
updates alternating between them (old, new, new, old, ...) so other load on the machine falls on both
alike: on this shared 2-core machine a single run's p99 moves by several times with the load. CPU per
delivery is each process's CPU from /proc around each mode's updates ÷ (updates x W).

    .venv/bin/python bench/watch_latency_ab.py DIR [--watchers 1000] [--events 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchutil import percentile
from gc_bench import start
from proccpu import ProcCPU
from watchers_bench import TimedFanout

from kubechain_cli.chain import Chain


async def _namespace(fanout: TimedFanout) -> None:
    async with fanout.session.post(fanout.chain.server_url + "/api/v1/namespaces", json={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}) as r:
        assert r.status == 201, await r.text()


async def main_async(old: Path, watchers: int, events: int) -> None:
    paths = [old / "libs" / "genericapi", *(p for p in sorted((old / "services").iterdir()) if p.is_dir()), old]
    modes = {"old": {"PYTHONPATH": os.pathsep.join(str(p) for p in paths)}, "new": {}}
    chains: dict[str, Chain] = {mode: start(mode, env) for mode, env in modes.items()}
    fanouts: dict[str, TimedFanout] = {}
    p99s: dict[str, list[float]] = {mode: [] for mode in modes}
    cpu_us: dict[str, dict[str, float]] = {mode: {} for mode in modes}
    try:
        for mode, chain in chains.items():
            fanouts[mode] = TimedFanout(chain, watchers)
            await _namespace(fanouts[mode])
            await fanouts[mode].setup()
            await fanouts[mode].timed_event()  # warm-up
        cpus = {mode: ProcCPU(chain.processes) for mode, chain in chains.items()}
        for i in range(events):
            order = list(modes) if i % 2 == 0 else list(reversed(list(modes)))
            for mode in order:
                before = cpus[mode].snapshot()
                p99s[mode].append(percentile(await fanouts[mode].timed_event(), 0.99))
                per = cpus[mode].per_request(before, cpus[mode].snapshot(), watchers)
                for k, v in per.items():
                    cpu_us[mode][k] = cpu_us[mode].get(k, 0.0) + v / events
            print(f"event {i} load {os.getloadavg()[0]:4.1f}  p99 ms: "
                  + ", ".join(f"{m} {p99s[m][-1]:.1f}" for m in modes), flush=True)
    finally:
        for f in fanouts.values():
            await f.close()
        for chain in chains.values():
            chain.stop(timeout=5)
            shutil.rmtree(chain.data_dir, ignore_errors=True)
    a, b = statistics.median(p99s["old"]), statistics.median(p99s["new"])
    print(f"{watchers} JSON watchers, {events} events each: median p99 old {a:.1f} ms, new {b:.1f} ms, "
          f"new/old {b / a:.2f}")
    for proc in ("aggregator", "core-api", "etcd"):
        a, b = cpu_us["old"].get(proc, 0.0), cpu_us["new"].get(proc, 0.0)
        ratio = f"  new/old {b / a:.2f}" if a else ""
        print(f"  CPU per delivery {proc:10s} old {a:6.1f} us  new {b:6.1f} us{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path, help="the other tree (see above)")
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--events", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main_async(args.old.resolve(), args.watchers, args.events))


if __name__ == "__main__":
    main()
