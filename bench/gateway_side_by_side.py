"""CPU per GET and per create of each process, another tree ÷ this one, both loaded *at the same time*.

bench/tree_ab.py alternates rounds between the two chains; on this shared 2-core machine the load
from other work changes within seconds, and one round's CPU per request can differ by 2x from the
next for a process whose code did not change at all. Here both chains get their requests in the same
seconds (two clients, each ``CONCURRENCY`` deep, started together and ending together), so whatever
else runs falls on both alike; the figure reported is the median over rounds of each round's ratio.

    .venv/bin/python bench/gateway_side_by_side.py DIR [ROUNDS] [N]

``DIR`` as bench/tree_ab.py's (``git archive <commit> libs services kubechain_cli proto | tar -x -C DIR``,
plus the generated code).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchutil import run_concurrently
from gc_bench import configmap, start
from proccpu import ProcCPU

from kubechain_cli.chain import Chain

CONCURRENCY = 32


async def _burst(kind: str, chain: Any, session: aiohttp.ClientSession, round_: int, n: int) -> None:
    base = chain.server_url + "/api/v1/namespaces/bench/configmaps"

    async def create(i: int) -> None:
        async with session.post(base, json=configmap(f"s{round_}-{i:06d}")) as r:
            assert r.status == 201, await r.text()

    async def get(_i: int) -> None:
        async with session.get(base + "/warm") as r:
            await r.read()
            assert r.status == 200, r.status

    await run_concurrently(n, create if kind == "create" else get)


async def main_async(old: Path, rounds: int, n: int) -> None:
    paths = [old / "libs" / "genericapi", *(p for p in sorted((old / "services").iterdir()) if p.is_dir()), old]
    chains: dict[str, Chain] = {}
    ratios: dict[tuple[str, str], list[float]] = {}
    try:  # a chain that fails to start must not leave the other one running
        chains["old"] = start("old", {"PYTHONPATH": os.pathsep.join(str(p) for p in paths)})
        chains["new"] = start("new", {})
        sessions = {k: aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=c.ssl_context(), limit=CONCURRENCY))
                    for k, c in chains.items()}
        for k, chain in chains.items():
            s = sessions[k]
            async with s.post(chain.server_url + "/api/v1/namespaces",
                              json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}) as r:
                assert r.status == 201, await r.text()
            async with s.post(chain.server_url + "/api/v1/namespaces/bench/configmaps", json=configmap("warm")) as r:
                assert r.status == 201, await r.text()
        for k in chains:  # warm-up
            await _burst("get", chains[k], sessions[k], -1, 300)
            await _burst("create", chains[k], sessions[k], -1, 300)
        cpu = {k: ProcCPU({p: proc for p, proc in c.processes.items() if p in ("aggregator", "core-api")})
               for k, c in chains.items()}
        for round_ in range(rounds):
            for kind in ("get", "create"):
                before = {k: cpu[k].snapshot() for k in chains}
                await asyncio.gather(*(_burst(kind, chains[k], sessions[k], round_, n) for k in chains))
                per = {k: cpu[k].per_request(before[k], cpu[k].snapshot(), n) for k in chains}
                line = []
                for proc in ("aggregator", "core-api"):
                    ratio = per["new"][proc] / per["old"][proc]
                    ratios.setdefault((kind, proc), []).append(ratio)
                    line.append(f"{proc} old {per['old'][proc]:5.0f} new {per['new'][proc]:5.0f} ({ratio:.2f})")
                print(f"round {round_} {kind:6s} load {os.getloadavg()[0]:4.1f}  " + "  ".join(line), flush=True)
        for s in sessions.values():
            await s.close()
    finally:
        for chain in chains.values():
            chain.stop(timeout=5)
            shutil.rmtree(chain.data_dir, ignore_errors=True)
    print(f"medians of the per-round ratios new/old ({rounds} rounds of {n}, both chains loaded together):")
    for (kind, proc), values in ratios.items():
        print(f"  {kind:6s} {proc:10s} {statistics.median(values):.2f}  (min {min(values):.2f}, max {max(values):.2f})")


def main() -> None:
    asyncio.run(main_async(Path(sys.argv[1]).resolve(), int(sys.argv[2]) if len(sys.argv) > 2 else 6,
                           int(sys.argv[3]) if len(sys.argv) > 3 else 2000))


if __name__ == "__main__":
    main()
