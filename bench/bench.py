"""kubechain benchmark: prints ratios measured in one run against a fresh local chain, and at the end
issue 15's table of targets with this run's figures, met or missed (bench/targets.py).

    .venv/bin/python bench/bench.py [--quick] [--list-only | --watch-only | --start-only | ...]

Issue 15's targets: creates/s through the gateway / raw etcd puts/s >= 0.30; CPU per create of all
services <= 350 us; GET through the gateway / direct to core-api p50 <= 1.30x; gateway CPU / core-api
CPU per GET <= 0.4; one event to 1,000 watchers p99 <= 50 ms, CPU per delivery <= 20 us, memory per
watcher <= 30 KiB (bench/watchers_bench.py); LIST of 50,000 ConfigMaps <= 0.5 s, extra RSS during it
/ response bytes <= 1.5x, core-api RSS per stored ConfigMap <= 3 KB (bench/list_bench.py); cold
start to /readyz median < 1.5 s (bench/chain_start.py, 3 starts after the main chain has stopped).
CPU is read from /proc (bench/proccpu.py), memory too (bench/procmem.py). ``--quick`` makes every
count smaller (10,000 ConfigMaps listed, 200 watchers, one cold start). All traffic stays on
loopback and every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit_bench import bench_audit
from audit_bench import line as audit_line
from benchutil import CONCURRENCY, percentile, python_speed_ms, run_concurrently
from chain_start import bytecode_case, cold_starts, compile_into
from genericapi.storage.etcd import EtcdClient
from list_bench import bench_list_memory
from list_bench import line as list_line
from proccpu import ProcCPU
from rbac_bench import bench_rbac
from rbac_bench import line as rbac_line
from targets import table
from watchers_bench import bench_fanout
from watchers_bench import line as watch_line
from webhook_bench import bench_webhook
from webhook_bench import line as webhook_line

from kubechain_cli.chain import Chain, free_port


@contextlib.asynccontextmanager
async def direct_session(base: str, ctx: ssl.SSLContext) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    """A session to a backend as the gateway reaches it: its Unix socket, or TLS."""
    if base.startswith("unix:"):
        connector: aiohttp.BaseConnector = aiohttp.UnixConnector(path="/" + base[5:].lstrip("/"),
                                                                 limit=CONCURRENCY)
        base = "http://localhost"
    else:
        connector = aiohttp.TCPConnector(ssl=ctx, limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as session:
        yield session, base


#: Characters in the data of the ConfigMaps the create phase makes and the LIST lists: issue 15's
#: "418-byte ConfigMap" (its stored JSON then; 564 bytes now that managedFields are stored too, +146).
CREATE_SIZE = 200


def configmap(name: str, size: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": "x" * size}}


async def bench_creates(session: aiohttp.ClientSession, gateway: str, etcd: EtcdClient, n: int,
                        cpu: ProcCPU) -> dict[str, Any]:
    value = json.dumps(configmap("x" * 10, 200)).encode()

    async def put(i: int) -> None:
        await etcd.put(f"/bench-raw/{i}".encode(), value)

    raw_s = await run_concurrently(n, put)
    await etcd.delete_prefix(b"/bench-raw/")
    url = gateway + "/api/v1/namespaces/bench/configmaps"

    async def create(i: int) -> None:
        async with session.post(url, json=configmap(f"c{i:06d}", CREATE_SIZE)) as r:
            assert r.status == 201, await r.text()

    before = cpu.snapshot()
    api_s = await run_concurrently(n, create)
    return {"etcd_puts_per_s": n / raw_s, "gateway_creates_per_s": n / api_s, "ratio": raw_s / api_s,
            "cpu_us": cpu.per_request(before, cpu.snapshot(), n)}


def deployment(name: str, rev: int) -> dict[str, Any]:
    """A Deployment of about 2 KiB of JSON; ``rev`` is the change each write makes."""
    env = [{"name": f"SETTING_{i:02d}", "value": f"value-{i:02d}-" + "v" * 24} for i in range(24)]
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": {"app": name}, "annotations": {"bench/rev": str(rev)}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.25", "env": env,
                                                           "ports": [{"containerPort": 80}]}]}}}}


async def bench_apply(session: aiohttp.ClientSession, gateway: str, n: int) -> dict[str, float]:
    """Server-side applies/s of a 2 KiB Deployment / merge patches/s of the same change."""
    base = gateway + "/apis/apps/v1/namespaces/bench/deployments"
    objects = CONCURRENCY
    apply_headers = {"Content-Type": "application/apply-patch+yaml"}
    for k in range(objects):
        async with session.patch(f"{base}/d{k}?fieldManager=bench", data=json.dumps(deployment(f"d{k}", 0)),
                                 headers=apply_headers) as r:
            assert r.status == 201, await r.text()

    async def apply(i: int) -> None:
        k = i % objects
        async with session.patch(f"{base}/d{k}?fieldManager=bench", data=json.dumps(deployment(f"d{k}", i + 1)),
                                 headers=apply_headers) as r:
            assert r.status == 200, await r.text()

    async def merge(i: int) -> None:
        k = i % objects
        patch = {"metadata": {"annotations": {"bench/rev": str(n + i + 1)}}}
        async with session.patch(f"{base}/d{k}?fieldManager=bench-merge", data=json.dumps(patch),
                                 headers={"Content-Type": "application/merge-patch+json"}) as r:
            assert r.status == 200, await r.text()

    apply_s = await run_concurrently(n, apply)
    merge_s = await run_concurrently(n, merge)
    return {"applies_per_s": n / apply_s, "merge_patches_per_s": n / merge_s, "ratio": merge_s / apply_s}


VAP_RULES = [  # three CEL rules of the kind clusters write, all passing for the bench's ConfigMaps
    {"expression": "object.metadata.name.size() < 64"},
    {"expression": "!has(object.metadata.labels) || !('forbidden' in object.metadata.labels)",
     "message": "forbidden label"},
    {"expression": "object.data.all(k, object.data[k].size() < 4096)",
     "messageExpression": "'a value is too large in ' + object.metadata.name"},
]


async def bench_vap(session: aiohttp.ClientSession, gateway: str, n: int, cpu: ProcCPU) -> dict[str, Any]:
    """ConfigMap creates/s with one ValidatingAdmissionPolicy of three CEL rules bound to their namespace
    / creates/s with none (issue 13: target >= 0.85), in balanced rounds (none, policy, policy, none:
    each mode's rounds sit alike with respect to the ConfigMaps already stored, which grow through the phase;
    the binding is created before and deleted after the policy rounds), with core-api's CPU per create in each
    mode. In-process counterpart: bench/vap_eval_bench.py."""
    ns = "bench-vap"
    async with session.post(gateway + "/api/v1/namespaces",
                            json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}) as r:
        assert r.status == 201, await r.text()
    url = gateway + f"/api/v1/namespaces/{ns}/configmaps"
    admission = gateway + "/apis/admissionregistration.k8s.io/v1"
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": "bench-three-rules"},
              "spec": {"failurePolicy": "Fail", "validations": VAP_RULES, "matchConstraints": {"resourceRules": [
                  {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                   "resources": ["configmaps"]}]}}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": "bench-three-rules"},
               "spec": {"policyName": "bench-three-rules", "validationActions": ["Deny"], "matchResources": {
                   "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}}}
    async with session.post(f"{admission}/validatingadmissionpolicies", json=policy) as r:
        assert r.status == 201, await r.text()
    probe = configmap("probe", 10)
    probe["metadata"]["labels"] = {"forbidden": "yes"}

    async def in_force(status: int) -> None:  # the watch caches follow: a dry-run create answers `status`
        for _ in range(300):
            async with session.post(url + "?dryRun=All", json=probe) as r:
                if r.status == status:
                    return
            await asyncio.sleep(0.05)
        raise AssertionError(f"the bench binding never answered {status}")

    seconds: dict[str, list[float]] = {"none": [], "vap": []}
    core_us: dict[str, list[float]] = {"none": [], "vap": []}
    modes = ("none", "vap", "vap", "none")
    for k, mode in enumerate(modes):
        if mode == "vap" and (k == 0 or modes[k - 1] != "vap"):
            async with session.post(f"{admission}/validatingadmissionpolicybindings", json=binding) as r:
                assert r.status == 201, await r.text()
            await in_force(422)

        async def create(i: int, k: int = k) -> None:
            async with session.post(url, json=configmap(f"v{k}-{i:06d}", 200)) as r:
                assert r.status == 201, await r.text()
        before = cpu.snapshot()
        seconds[mode].append(await run_concurrently(n, create))
        core_us[mode].append(cpu.per_request(before, cpu.snapshot(), n).get("core-api", 0.0))
        if mode == "vap" and (k + 1 == len(modes) or modes[k + 1] != "vap"):
            async with session.delete(f"{admission}/validatingadmissionpolicybindings/bench-three-rules") as r:
                assert r.status == 200, await r.text()
            await in_force(201)
    none_s, vap_s = sum(seconds["none"]), sum(seconds["vap"])
    return {"creates_per_s_none": 2 * n / none_s, "creates_per_s_vap": 2 * n / vap_s, "ratio": none_s / vap_s,
            "rounds_per_s": {m: [round(n / t) for t in ts] for m, ts in seconds.items()},
            "core_api_cpu_us_per_create": {m: sum(v) / len(v) for m, v in core_us.items()}}


async def bench_gets(session: aiohttp.ClientSession, base: str, n: int) -> dict[str, float]:
    latencies: list[float] = []
    url = base + "/api/v1/namespaces/bench/configmaps/c000001"

    async def get(_i: int) -> None:
        t = time.perf_counter()
        async with session.get(url) as r:
            await r.read()
            assert r.status == 200
        latencies.append(time.perf_counter() - t)

    elapsed = await run_concurrently(n, get)
    return {"rps": n / elapsed, "p50_ms": percentile(latencies, 0.5) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000}


async def bench_proxy_clients(base: str, ctx: ssl.SSLContext, n: int) -> dict[str, float]:
    """The same GETs through the gateway with each candidate proxy client (why it uses aiohttp)."""
    import httpx
    from httpx_aiohttp import AiohttpTransport

    url = base + "/api/v1/namespaces/bench/configmaps/c000001"
    out: dict[str, float] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=CONCURRENCY)) as s:
        async def aio_get(_i: int) -> None:
            async with s.get(url) as r:
                await r.read()
        out["aiohttp_rps"] = n / await run_concurrently(n, aio_get)
    limits = httpx.Limits(max_connections=CONCURRENCY)
    async with httpx.AsyncClient(verify=ctx, limits=limits) as c:
        async def httpx_get(_i: int) -> None:
            (await c.get(url)).read()
        out["httpx_rps"] = n / await run_concurrently(n, httpx_get)
    transport = AiohttpTransport(client=lambda: aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=ctx, limit=CONCURRENCY)))
    async with httpx.AsyncClient(transport=transport) as c:
        async def httpx_aio_get(_i: int) -> None:
            (await c.get(url)).read()
        out["httpx_aiohttp_rps"] = n / await run_concurrently(n, httpx_aio_get)
    return out


def counts(quick: bool) -> dict[str, int]:
    """Requests per measurement: the full run's, or a smoke run's."""
    full = {"creates": 10000, "writes": 4000, "gets": 10000, "listed": 50000, "watchers": 1000, "events": 10,
            "proxy_gets": 3000, "cold_starts": 3}
    small = {"creates": 2000, "writes": 1000, "gets": 2000, "listed": 10000, "watchers": 200, "events": 10,
             "proxy_gets": 1000, "cold_starts": 1}
    return small if quick else full


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    n = counts(args.quick)
    data = Path(tempfile.mkdtemp(prefix="kubechain-bench-"))
    chain = Chain(data, port=free_port())
    chain.start()
    try:
        ctx = chain.ssl_context()
        gateway = chain.server_url
        direct = chain.backend_urls["core-api"]
        results: dict[str, Any] = {}
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=CONCURRENCY)) as session:
            async with session.post(gateway + "/api/v1/namespaces",
                                    json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}) as r:
                assert r.status == 201
            if args.webhook_only:
                results["webhook"] = await bench_webhook(session, gateway, n["writes"], run_concurrently, configmap)
                return results
            if args.vap_only:
                results["vap"] = await bench_vap(session, gateway, n["writes"], ProcCPU(chain.processes))
                return results
            if args.audit_only:
                results["audit"] = await bench_audit(chain, session, n["gets"], run_concurrently)
                return results
            if args.rbac_only:
                results["rbac"] = await bench_rbac(chain, session, n["gets"], run_concurrently)
                return results
            if args.list_only:
                results["list"] = await bench_list_memory(chain, session, 0, n["listed"], run_concurrently, configmap,
                                                          CREATE_SIZE)
                return results
            if args.watch_only:
                results["watch"] = await bench_fanout(chain, n["watchers"], n["events"])
                return results
            etcd = EtcdClient([chain.etcd_endpoints], tls=chain.etcd_tls)
            cpu = ProcCPU(chain.processes)
            results["create"] = await bench_creates(session, gateway, etcd, n["creates"], cpu)
            await etcd.close()
            if not args.writes_only:  # before the other phases leave freed memory resident to hide a LIST's growth
                results["list"] = await bench_list_memory(chain, session, n["creates"], n["listed"],
                                                          run_concurrently, configmap, CREATE_SIZE)
            results["apply"] = await bench_apply(session, gateway, n["writes"])
            results["webhook"] = await bench_webhook(session, gateway, n["writes"], run_concurrently, configmap)
            results["vap"] = await bench_vap(session, gateway, n["writes"], cpu)
            if args.writes_only:
                return results
            async with direct_session(direct, ctx) as (dsession, dbase):
                await bench_gets(session, gateway, 500)  # warm up both paths
                await bench_gets(dsession, dbase, 500)
                before = cpu.snapshot()
                via = await bench_gets(session, gateway, n["gets"])
                via_cpu = cpu.per_request(before, cpu.snapshot(), n["gets"])
                dir_ = await bench_gets(dsession, dbase, n["gets"])
            results["get"] = {"gateway": via, "direct": dir_, "rps_ratio": via["rps"] / dir_["rps"],
                              "p50_ratio": via["p50_ms"] / dir_["p50_ms"],
                              "p99_ratio": via["p99_ms"] / dir_["p99_ms"], "cpu_us": via_cpu}
            results["audit"] = await bench_audit(chain, session, n["gets"], run_concurrently)
            results["rbac"] = await bench_rbac(chain, session, n["gets"], run_concurrently)
        results["watch"] = await bench_fanout(chain, n["watchers"], n["events"])
        results["proxy_clients"] = await bench_proxy_clients(gateway, ctx, n["proxy_gets"])
        return results
    finally:
        chain.stop()
        shutil.rmtree(data, ignore_errors=True)


def _cpu_line(cpu_us: dict[str, float]) -> str:
    return ", ".join(f"{name} {us:.0f} us" for name, us in sorted(cpu_us.items()) if us >= 1)


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _cold_starts(rounds: int) -> dict[str, Any]:
    """Cold starts with the project's bytecode compiled ahead, as an installed package or a checkout
    run once before has it (the target's figure); where the environment forbids writing bytecode
    (``PYTHONDONTWRITEBYTECODE``, as these machines set it), also as that environment starts: every
    project module compiled from source at every start."""
    out: dict[str, Any] = {}
    if sys.dont_write_bytecode:
        out["cold_start_source"] = cold_starts(rounds, ("controllers on",))["controllers on"]
    saved = os.environ.get("PYTHONPYCACHEPREFIX")
    with tempfile.TemporaryDirectory(prefix="kubechain-bench-pyc-") as prefix:
        try:
            if saved is None:
                compile_into(Path(prefix), [None])
            out["cold_start_bytecode"] = bytecode_case()
            out["cold_start"] = cold_starts(rounds, ("controllers on",))["controllers on"]
        finally:
            if saved is None:
                os.environ.pop("PYTHONPYCACHEPREFIX", None)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The measurements ``args`` asks for; the cold starts come after the main chain has stopped."""
    results: dict[str, Any] = {"load_start": _load(), "speed_ms_start": python_speed_ms()}
    if not args.start_only:
        results.update(asyncio.run(main_async(args)))
    only = (args.webhook_only, args.vap_only, args.audit_only, args.rbac_only, args.writes_only, args.list_only,
            args.watch_only)
    if args.start_only or not any(only):
        results.update(_cold_starts(counts(args.quick)["cold_starts"]))
    results["load_end"] = _load()
    results["speed_ms_end"] = python_speed_ms()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    parser.add_argument("--json", action="store_true", help="print the raw results as JSON")
    parser.add_argument("--writes-only", action="store_true", help="only the create and apply lines")
    parser.add_argument("--webhook-only", action="store_true", help="only the admission webhook line")
    parser.add_argument("--vap-only", action="store_true", help="only the ValidatingAdmissionPolicy line")
    parser.add_argument("--audit-only", action="store_true", help="only the audit line")
    parser.add_argument("--rbac-only", action="store_true", help="only the RBAC / AlwaysAllow GET line")
    parser.add_argument("--list-only", action="store_true",
                        help="only the LIST and memory-per-object lines (the namespace filled from empty)")
    parser.add_argument("--watch-only", action="store_true", help="only the watch fan-out lines")
    parser.add_argument("--start-only", action="store_true", help="only the cold start line")
    args = parser.parse_args()
    r = run(args)
    if args.json:
        print(json.dumps(r, indent=2))
    print(f"kubechain bench{' --quick' if args.quick else ''} on {os.cpu_count()} cores; load average"
          f" (1/5/15 min) at start {r['load_start']}, at end {r['load_end']}; a fixed Python loop took"
          f" {r['speed_ms_start']:.0f} ms of CPU at start, {r['speed_ms_end']:.0f} at end (CPU figures scale with it)")
    if args.audit_only:
        print(audit_line(r["audit"]))
        return
    if args.rbac_only:
        print(rbac_line(r["rbac"]))
        return
    if args.webhook_only:
        print(webhook_line(r["webhook"]))
        return
    if args.list_only or args.watch_only or args.start_only:
        for key, to_line in (("list", list_line), ("watch", watch_line)):
            if key in r:
                print(to_line(r[key]))
        if "cold_start" in r:
            print(cold_start_line(r))
        print(table(r))
        return
    v = r["vap"]
    vcpu = v["core_api_cpu_us_per_create"]
    vap_line = (f"creates/s with one VAP of three CEL rules {v['creates_per_s_vap']:.0f} / none "
                f"{v['creates_per_s_none']:.0f} = {v['ratio']:.2f}  (target >= 0.85); core-api CPU per create"
                f" {vcpu['vap']:.0f} / {vcpu['none']:.0f} us")
    if args.vap_only:
        print(vap_line)
        return
    c, a = r["create"], r["apply"]
    print(f"creates/s via gateway {c['gateway_creates_per_s']:.0f} / raw etcd puts/s {c['etcd_puts_per_s']:.0f}"
          f" = {c['ratio']:.2f}  (target >= 0.30)")
    services = sum(v for k, v in c["cpu_us"].items() if k != "etcd")
    print(f"CPU per create: {_cpu_line(c['cpu_us'])}; all services {services:.0f} us (target <= 350 us)")
    print(f"server-side applies/s of a 2 KiB Deployment {a['applies_per_s']:.0f} / merge patches/s of the same"
          f" change {a['merge_patches_per_s']:.0f} = {a['ratio']:.2f}  (target >= 0.7)")
    print(webhook_line(r["webhook"]))
    print(vap_line)
    if args.writes_only:
        print(table(r))
        return
    g, p = r["get"], r["proxy_clients"]
    print(f"GET via gateway / direct: p50 {g['gateway']['p50_ms']:.1f}/{g['direct']['p50_ms']:.1f} ms ="
          f" {g['p50_ratio']:.2f}x (target <= 1.30x), p99 {g['gateway']['p99_ms']:.1f}/{g['direct']['p99_ms']:.1f}"
          f" ms = {g['p99_ratio']:.2f}x (target <= 2x); rps {g['gateway']['rps']:.0f} / {g['direct']['rps']:.0f}"
          f" = {g['rps_ratio']:.2f} (target >= 0.6)")
    gcpu = g["cpu_us"]
    print(f"CPU per GET via the gateway: {_cpu_line(gcpu)}; gateway / core-api"
          f" {gcpu.get('aggregator', 0) / max(gcpu.get('core-api', 1), 1):.2f} (target <= 0.4)")
    print(audit_line(r["audit"]))
    print(rbac_line(r["rbac"]))
    print(list_line(r["list"]))
    print(watch_line(r["watch"]))
    print(f"proxy client GET rps: aiohttp {p['aiohttp_rps']:.0f}, httpx {p['httpx_rps']:.0f}, "
          f"httpx+aiohttp transport {p['httpx_aiohttp_rps']:.0f}")
    print(cold_start_line(r))
    print(table(r))


def cold_start_line(r: dict[str, Any]) -> str:
    runs = r["cold_start"]
    line = (f"cold start to /readyz (controllers on, fresh data dir, {r.get('cold_start_bytecode', '?')}):"
            f" median {statistics.median(runs):.2f} s of {' '.join(f'{t:.2f}' for t in runs)} (target < 1.5 s)")
    source = r.get("cold_start_source")
    if source:
        line += (f"; compiling every module from source at each start (PYTHONDONTWRITEBYTECODE):"
                 f" median {statistics.median(source):.2f} s of {' '.join(f'{t:.2f}' for t in source)}")
    return line


if __name__ == "__main__":
    main()
