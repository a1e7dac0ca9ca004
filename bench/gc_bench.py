"""CPU per create and per GET of each process, GC tuning on ÷ off (genericapi.server.gctuning), one run.

Two chains run side by side, one started with ``KUBECHAIN_GC_THRESHOLD=0`` (CPython's defaults, no
freeze) and one with the default tuning; the rounds alternate between them (off, on, off, on, ...)
so load from other work on the machine falls on both alike. Each round does N ConfigMap creates
and then N GETs of one ConfigMap through the gateway at 32 concurrent, and reads each process's
CPU from /proc (bench/proccpu.py) around each burst.

    .venv/bin/python bench/gc_bench.py [ROUNDS] [N]
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchutil import run_concurrently
from proccpu import ProcCPU

from kubechain_cli.chain import Chain, free_port

MODES = {"off": {"KUBECHAIN_GC_THRESHOLD": "0"}, "on": {}}


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": "x" * 200}}


def start(mode: str, env: dict[str, str]) -> Chain:
    """A chain whose processes see ``env`` on top of this one's environment."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        chain = Chain(Path(tempfile.mkdtemp(prefix=f"kubechain-{mode}-")), port=free_port())
        chain.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return chain


async def burst(chain: Chain, session: aiohttp.ClientSession, round_: int, n: int) -> dict[str, dict[str, float]]:
    cpu = ProcCPU({k: p for k, p in chain.processes.items() if k != "etcd"})
    base = chain.server_url + "/api/v1/namespaces/bench/configmaps"

    async def create(i: int) -> None:
        async with session.post(base, json=configmap(f"r{round_}-{i:06d}")) as r:
            assert r.status == 201, await r.text()

    async def get(_i: int) -> None:
        async with session.get(base + "/warm") as r:
            await r.read()
            assert r.status == 200

    before = cpu.snapshot()
    await run_concurrently(n, create)
    creates = cpu.per_request(before, cpu.snapshot(), n)
    before = cpu.snapshot()
    await run_concurrently(n, get)
    gets = cpu.per_request(before, cpu.snapshot(), n)
    return {"create": creates, "get": gets}


async def main_async(rounds: int, n: int, modes: dict[str, dict[str, str]] = MODES) -> None:
    """Alternate rounds between a chain per mode (the first two modes; the ratio is second ÷ first)."""
    chains = {mode: start(mode, env) for mode, env in modes.items()}
    results: dict[str, list[dict[str, dict[str, float]]]] = {mode: [] for mode in modes}
    try:
        sessions = {mode: aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=c.ssl_context(), limit=32))
                    for mode, c in chains.items()}
        for mode, chain in chains.items():
            s = sessions[mode]
            async with s.post(chain.server_url + "/api/v1/namespaces",
                              json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}) as r:
                assert r.status == 201, await r.text()
            async with s.post(chain.server_url + "/api/v1/namespaces/bench/configmaps", json=configmap("warm")) as r:
                assert r.status == 201, await r.text()
            await burst(chain, s, -1, 500)  # warm-up
        for round_ in range(rounds):
            for mode in (list(modes) if round_ % 2 == 0 else list(reversed(list(modes)))):
                got = await burst(chains[mode], sessions[mode], round_, n)
                results[mode].append(got)
                print(f"round {round_} {mode:3s} load {os.getloadavg()[0]:4.1f}  "
                      f"create: {fmt(got['create'])}  get: {fmt(got['get'])}", flush=True)
        for s in sessions.values():
            await s.close()
    finally:
        for chain in chains.values():
            chain.stop(timeout=5)
            shutil.rmtree(chain.data_dir, ignore_errors=True)
    first, second = list(modes)[:2]
    print("medians (us of CPU per request):")
    for kind in ("create", "get"):
        for proc in ("aggregator", "core-api"):
            a = statistics.median(r[kind][proc] for r in results[first])
            b = statistics.median(r[kind][proc] for r in results[second])
            print(f"  {kind:6s} {proc:10s} {first} {a:6.0f}  {second} {b:6.0f}  {second}/{first} {b / a:.2f}")


def fmt(cpu: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.0f}" for k, v in sorted(cpu.items()) if v >= 1)


if __name__ == "__main__":
    asyncio.run(main_async(int(sys.argv[1]) if len(sys.argv) > 1 else 6,
                           int(sys.argv[2]) if len(sys.argv) > 2 else 3000))
