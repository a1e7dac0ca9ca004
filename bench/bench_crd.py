"""Custom resource creates vs ConfigMap creates at equal JSON size, through the gateway.

    .venv/bin/python bench/bench_crd.py [--quick]

Target (issue 4): CR creates/s / ConfigMap creates/s >= 0.8. The CRD has a structural schema
(pruning, defaulting and validation run on every create), a status subresource and printer
columns, like a typical operator's CRD. The two kinds alternate in rounds so drift on this shared
machine affects both alike; the ratio is of the summed rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import CONCURRENCY, configmap, run_concurrently  # type: ignore[attr-defined]
from kubechain_cli.chain import Chain, free_port

GROUP = "bench.example.com"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"blobs.{GROUP}"},
    "spec": {
        "group": GROUP, "scope": "Namespaced",
        "names": {"plural": "blobs", "singular": "blob", "kind": "Blob", "shortNames": ["bl"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
            "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "required": ["v"], "properties": {
                    "v": {"type": "string", "maxLength": 100000},
                    "size": {"type": "integer", "minimum": 0, "default": 1},
                    "mode": {"type": "string", "enum": ["a", "b"], "default": "a"}}},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}},
        }],
    },
}


def blob(name: str, size: int) -> dict[str, Any]:
    """A Blob whose JSON is as long as ``configmap(name, size)``'s."""
    target = len(json.dumps(configmap(name, size)))
    obj: dict[str, Any] = {"apiVersion": f"{GROUP}/v1", "kind": "Blob", "metadata": {"name": name},
                           "spec": {"v": ""}}
    obj["spec"]["v"] = "x" * max(0, target - len(json.dumps(obj)))
    return obj


async def creates_per_s(session: aiohttp.ClientSession, url: str, make: Any, n: int, start: int) -> float:
    async def create(i: int) -> None:
        async with session.post(url, json=make(f"o{start + i:07d}")) as r:
            assert r.status == 201, await r.text()

    return n / await run_concurrently(n, create)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="kubechain-bench-crd-"))
    chain = Chain(data, port=free_port())
    chain.start()
    try:
        gateway = chain.server_url
        size = args.size
        connector = aiohttp.TCPConnector(ssl=chain.ssl_context(), limit=CONCURRENCY)
        async with aiohttp.ClientSession(connector=connector) as session:
            async with session.post(gateway + "/api/v1/namespaces", json={
                    "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}) as r:
                assert r.status == 201
            async with session.post(gateway + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                    json=CRD) as r:
                assert r.status == 201, await r.text()
            established = time.perf_counter()
            cr_url = gateway + f"/apis/{GROUP}/v1/namespaces/bench/blobs"
            while True:
                async with session.get(gateway + "/apis") as r:  # also teaches the gateway the route
                    await r.read()
                async with session.get(cr_url) as r:
                    if r.status == 200:
                        break
                assert time.perf_counter() - established < 10, "CRD not served"
                await asyncio.sleep(0.05)
            usable_s = time.perf_counter() - established
            cm_url = gateway + "/api/v1/namespaces/bench/configmaps"
            n = 500 if args.quick else 2000
            rounds = 2 if args.quick else 4
            await creates_per_s(session, cm_url, lambda name: configmap(name, size), 200, 9_000_000)
            await creates_per_s(session, cr_url, lambda name: blob(name, size), 200, 9_000_000)
            cm_times: list[float] = []
            cr_times: list[float] = []
            for k in range(rounds):
                cm_times.append(n / await creates_per_s(session, cm_url, lambda name: configmap(name, size), n, k * n))
                cr_times.append(n / await creates_per_s(session, cr_url, lambda name: blob(name, size), n, k * n))
        cm_rate = n * rounds / sum(cm_times)
        cr_rate = n * rounds / sum(cr_times)
        return {"configmap_creates_per_s": cm_rate, "cr_creates_per_s": cr_rate, "ratio": cr_rate / cm_rate,
                "json_bytes": len(json.dumps(configmap("o0000000", size))), "usable_after_create_s": usable_s}
    finally:
        chain.stop()
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    parser.add_argument("--size", type=int, default=200, help="payload characters of each object")
    args = parser.parse_args()
    r = asyncio.run(main_async(args))
    print(f"CR creates/s {r['cr_creates_per_s']:.0f} / ConfigMap creates/s {r['configmap_creates_per_s']:.0f}"
          f" = {r['ratio']:.2f} at {r['json_bytes']} JSON bytes (target >= 0.8);"
          f" CRD usable {r['usable_after_create_s'] * 1000:.0f} ms after its create")


if __name__ == "__main__":
    main()
