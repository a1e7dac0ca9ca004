"""CPU per watch event delivery with many Table (or metadata, or JSON) watchers: another tree ÷ this one.

Issue 15's serialize-once: each event is encoded once per output kind and the bytes go to every
watcher. This measures what a delivery costs each process when W clients watch one ConfigMap with
``kubectl get -w``'s Accept (``as=Table``), ``as=PartialObjectMetadata`` (metadata informers) or
plain JSON, through the gateway. Two chains run side by side, one on another tree (made as
bench/tree_ab.py says: ``git archive <commit> libs services kubechain_cli proto | tar -x -C DIR`` plus
``libs/genericapi/genericapi/generated`` copied in; it goes first on ``PYTHONPATH``) and one on this
working tree; rounds alternate between them so other load on the machine falls on both alike. A
round makes E updates of the watched ConfigMap one after the other and waits until every watcher
has every event; each process's CPU is read from /proc (bench/proccpu.py) around the round and
divided by E x W deliveries (the E updates themselves are included: about 1 ms each, against
E x W deliveries).

    .venv/bin/python bench/watch_fanout_bench.py DIR [--watchers 300] [--rounds 6] [--events 20]
                                                     [--output table|metadata|json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gc_bench import start
from proccpu import ProcCPU

from kubechain_cli.chain import Chain

ACCEPT = {
    "table": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
             "application/json",
    "metadata": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
    "json": "application/json",
}
BASE = "/api/v1/namespaces/bench/configmaps"


class Fanout:
    """W watchers of one object on one chain, counting the events each has received. This class
    watches a ConfigMap; a subclass names another object through ``create_watched``, ``update``
    and ``check`` (bench/crd_conversion_watch_bench.py)."""

    def __init__(self, chain: Chain, watchers: int, accept: str = "application/json") -> None:
        self.chain = chain
        self.watchers = watchers
        self.accept = accept
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=chain.ssl_context(), limit=0),
            timeout=aiohttp.ClientTimeout(total=None, sock_read=None))
        self.received = [0] * watchers
        self.target = 0
        self.reached = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.started = 0
        self.all_started = asyncio.Event()
        self.value = 0

    async def setup(self) -> None:
        async with self.session.post(self.chain.server_url + "/api/v1/namespaces", json={
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}) as r:
            assert r.status == 201, await r.text()
        watch_url = await self.create_watched()
        self.tasks = [asyncio.create_task(self._watch(i, watch_url)) for i in range(self.watchers)]
        await asyncio.wait_for(self.all_started.wait(), 300)
        await self.round(1)  # every watcher sees a change before anything is measured

    async def create_watched(self) -> str:
        """Make the watched object in namespace ``bench``; the URL of a watch from just after it."""
        url = self.chain.server_url
        async with self.session.post(url + BASE, json={"apiVersion": "v1", "kind": "ConfigMap",
                                                       "metadata": {"name": "watched"},
                                                       "data": {"v": "0" * 200}}) as r:
            assert r.status == 201, await r.text()
            rv = (await r.json())["metadata"]["resourceVersion"]
        return url + f"{BASE}?watch=1&resourceVersion={rv}&fieldSelector=metadata.name%3Dwatched"

    async def update(self) -> None:
        """One change of the watched object (``self.value`` is new each time)."""
        async with self.session.patch(self.chain.server_url + BASE + "/watched",
                                      json={"data": {"v": f"{self.value:0200d}"}},
                                      headers={"Content-Type": "application/merge-patch+json"}) as r:
            assert r.status == 200, await r.text()

    def check(self, line: bytes) -> None:
        """Assert what a watcher received is what this bench expects (nothing here)."""

    async def _watch(self, i: int, url: str) -> None:
        async with self.session.get(url, headers={"Accept": self.accept}) as r:
            assert r.status == 200, await r.text()
            self.started += 1
            if self.started == self.watchers:
                self.all_started.set()
            async for line in r.content:
                if not line.strip():
                    continue
                self.check(line)
                self.received[i] += 1
                if self.received[i] == self.target and all(n >= self.target for n in self.received):
                    self.reached.set()

    async def round(self, events: int) -> None:
        """``events`` updates, one after the other; returns once every watcher has every one."""
        self.reached.clear()
        self.target += events
        for _ in range(events):
            self.value += 1
            await self.update()
        await asyncio.wait_for(self.reached.wait(), 600)

    async def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.session.close()


async def main_async(old: Path, watchers: int, rounds: int, events: int, output: str) -> None:
    paths = [old / "libs" / "genericapi", *(p for p in sorted((old / "services").iterdir()) if p.is_dir()), old]
    modes = {"old": {"PYTHONPATH": os.pathsep.join(str(p) for p in paths)}, "new": {}}
    chains = {mode: start(mode, env) for mode, env in modes.items()}
    fanouts: dict[str, Fanout] = {}
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    try:
        for mode, chain in chains.items():
            fanouts[mode] = Fanout(chain, watchers, ACCEPT[output])
            await fanouts[mode].setup()
        for round_ in range(rounds):
            for mode in (list(modes) if round_ % 2 == 0 else list(reversed(list(modes)))):
                chain = chains[mode]
                cpu = ProcCPU({k: p for k, p in chain.processes.items()})
                before = cpu.snapshot()
                await fanouts[mode].round(events)
                per = cpu.per_request(before, cpu.snapshot(), events * watchers)
                results[mode].append(per)
                print(f"round {round_} {mode} load {os.getloadavg()[0]:4.1f}  µs of CPU per delivery: "
                      + ", ".join(f"{k} {v:.1f}" for k, v in sorted(per.items())), flush=True)
    finally:
        for f in fanouts.values():
            await f.close()
        for chain in chains.values():
            chain.stop(timeout=5)
            shutil.rmtree(chain.data_dir, ignore_errors=True)
    print(f"{watchers} {output} watchers, {events} events a round, {rounds} rounds; "
          "medians (µs of CPU per delivery):")
    for proc in ("core-api", "aggregator", "etcd"):
        a = statistics.median(r[proc] for r in results["old"])
        b = statistics.median(r[proc] for r in results["new"])
        print(f"  {proc:10s} old {a:6.1f}  new {b:6.1f}  new/old {b / a:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path, help="the other tree (see above)")
    parser.add_argument("--watchers", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--output", choices=list(ACCEPT), default="table")
    args = parser.parse_args()
    asyncio.run(main_async(args.old.resolve(), args.watchers, args.rounds, args.events, args.output))


if __name__ == "__main__":
    main()
