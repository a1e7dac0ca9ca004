"""CPU per LIST of each process, this working tree ÷ another tree, in one run (issue 15's streamed
LIST must not make the common small LIST dearer).

As bench/tree_ab.py: the other tree (``git archive <commit> libs services kubechain_cli proto | tar -x
-C DIR``, plus the generated code copied from ``libs/genericapi/genericapi/generated``) runs first on
``PYTHONPATH``; both chains run side by side and the rounds alternate between them. Each round
does N LISTs through the gateway at 32 concurrent of a namespace holding ITEMS ConfigMaps and its
``kube-root-ca.crt`` (ITEMS 1: the common small LIST), with each process's CPU read from /proc
around the burst.

    .venv/bin/python bench/list_tree_ab.py DIR [ROUNDS] [N] [ITEMS]
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchutil import run_concurrently
from gc_bench import configmap, start
from proccpu import ProcCPU

from kubechain_cli.chain import Chain

PROCS = ("aggregator", "core-api")


async def burst(chain: Chain, session: aiohttp.ClientSession, n: int, items: int) -> dict[str, float]:
    cpu = ProcCPU({k: p for k, p in chain.processes.items() if k in PROCS})
    url = chain.server_url + "/api/v1/namespaces/bench/configmaps"

    async def list_(_i: int) -> None:
        async with session.get(url) as r:
            body = await r.json()
            assert r.status == 200 and len(body["items"]) == items + 1

    before = cpu.snapshot()
    await run_concurrently(n, list_)
    return cpu.per_request(before, cpu.snapshot(), n)


async def main_async(old: Path, rounds: int, n: int, items: int) -> None:
    paths = [old / "libs" / "genericapi", *(p for p in sorted((old / "services").iterdir()) if p.is_dir()), old]
    modes = {"old": {"PYTHONPATH": os.pathsep.join(str(p) for p in paths)}, "new": {}}
    chains = {mode: start(mode, env) for mode, env in modes.items()}
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    try:
        sessions = {mode: aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=c.ssl_context(), limit=32))
                    for mode, c in chains.items()}
        for mode, chain in chains.items():
            s = sessions[mode]
            async with s.post(chain.server_url + "/api/v1/namespaces",
                              json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}) as r:
                assert r.status == 201, await r.text()

            async def create(i: int, s: aiohttp.ClientSession = s, chain: Chain = chain) -> None:
                async with s.post(chain.server_url + "/api/v1/namespaces/bench/configmaps",
                                  json=configmap(f"cm-{i:06d}")) as r:
                    assert r.status == 201, await r.text()

            await run_concurrently(items, create)
            for _ in range(100):  # the root CA controller's ConfigMap
                async with s.get(chain.server_url + "/api/v1/namespaces/bench/configmaps/kube-root-ca.crt") as r:
                    if r.status == 200:
                        break
                await asyncio.sleep(0.1)
            await burst(chain, s, 300, items)  # warm-up
        for round_ in range(rounds):
            for mode in (list(modes) if round_ % 2 == 0 else list(reversed(list(modes)))):
                got = await burst(chains[mode], sessions[mode], n, items)
                results[mode].append(got)
                print(f"round {round_} {mode} load {os.getloadavg()[0]:4.1f}  "
                      + ", ".join(f"{k} {v:.0f}" for k, v in sorted(got.items())), flush=True)
        for s in sessions.values():
            await s.close()
    finally:
        for chain in chains.values():
            chain.stop(timeout=5)
            shutil.rmtree(chain.data_dir, ignore_errors=True)
    print(f"medians (us of CPU per LIST of {items} item(s)):")
    for proc in PROCS:
        a = statistics.median(r[proc] for r in results["old"])
        b = statistics.median(r[proc] for r in results["new"])
        print(f"  {proc:10s} old {a:6.0f}  new {b:6.0f}  new/old {b / a:.2f}")


if __name__ == "__main__":
    asyncio.run(main_async(Path(sys.argv[1]).resolve(), int(sys.argv[2]) if len(sys.argv) > 2 else 6,
                           int(sys.argv[3]) if len(sys.argv) > 3 else 2000,
                           int(sys.argv[4]) if len(sys.argv) > 4 else 1))
