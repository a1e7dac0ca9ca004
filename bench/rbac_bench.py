"""GET rps through a gateway with ``--authorization-mode=RBAC`` ÷ through one with ``AlwaysAllow``
(issue 12's bench line, target >= 0.9): what kube's authorizer costs per request at the gateway.

``bench.py`` calls ``bench_rbac`` on its running chain (``python bench/rbac_bench.py [--quick]`` starts
a chain of its own and prints the line): two more gateways join the chain's members, with the chain
gateway's flags except the authorization mode ("rbac": the chain's RBAC over the watch-cached roles
and bindings; "allow": AlwaysAllow, no authorization filter at all). Audit and API Priority and
Fairness are off in both, so the two differ in the authorizer alone. The reader is a plain user with
a client certificate, granted kube's ``view`` ClusterRole by a RoleBinding in the namespace: RBAC
walks the ClusterRoleBindings (kube 1.33's bootstrap policy's and the chain's) without a match, then
the namespace's RoleBindings, as kube's authorizer does. GETs of one ConfigMap go to each gateway
in alternating rounds (allow, rbac, allow, rbac, allow, rbac; the first two after a warm-up), so
the machine's load lands on both alike; each mode's rounds are summed. Each mode is proven on the
way: a user with no binding is refused (403) by "rbac" and served by "allow". The admin
(``system:masters``, allowed before RBAC is asked) is measured too.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchutil import CONCURRENCY, client_ssl, run_concurrently, without_flags
from proccpu import ProcCPU

from kubechain_cli.chain import Chain, free_port

#: Connections per client, as bench.py's.
#: Rounds per mode, and the GETs each mode gets first to open connections and fill caches.
ROUNDS = 3
WARM_UP = 300
NAMESPACE = "bench"
#: The object every GET reads (a 200-byte ConfigMap the bench makes).
CONFIGMAP = f"/api/v1/namespaces/{NAMESPACE}/configmaps/rbac-bench"
READER = "bench-rbac-reader"
STRANGER = "bench-rbac-stranger"
#: The chain gateway's flags that the bench sets per gateway or turns off (audit, APF, authorization).
_FLAGS_WITH_VALUE = ("--audit-policy-file", "--audit-log-path", "--audit-log-maxsize", "--audit-log-maxbackup",
                     "--audit-log-maxage", "--audit-log-format", "--audit-webhook-config-file",
                     "--authorization-mode")
_SWITCHES = ("--enable-priority-and-fairness",)

Runner = Callable[[int, Callable[[int], Awaitable[None]]], Awaitable[float]]


def gateway_argv(argv: list[str], port: int, mode: str) -> list[str]:
    """The chain gateway's command line on ``port`` with ``--authorization-mode mode``, audit and APF off."""
    out = without_flags(argv, _FLAGS_WITH_VALUE, _SWITCHES)
    out[out.index("--secure-port") + 1] = str(port)
    return [*out, "--authorization-mode", mode, "--enable-priority-and-fairness=false"]


async def _status(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(url) as r:
        await r.read()
        return r.status


async def _until(session: aiohttp.ClientSession, url: str, status: int, what: str) -> None:
    for _ in range(600):
        try:
            if await _status(session, url) == status:
                return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what}: {url} never answered {status}")


async def _setup(admin: aiohttp.ClientSession, gateway: str) -> None:
    """The namespace (if bench.py has not made it), the ConfigMap, and the reader's RoleBinding."""
    async with admin.post(gateway + "/api/v1/namespaces", json={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}) as r:
        assert r.status in (201, 409), await r.text()
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIGMAP.rsplit("/", 1)[1]},
          "data": {"payload": "x" * 200}}
    async with admin.post(gateway + CONFIGMAP.rsplit("/", 1)[0], json=cm) as r:
        assert r.status in (201, 409), await r.text()
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": READER, "namespace": NAMESPACE},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": READER}]}
    async with admin.post(f"{gateway}/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/rolebindings",
                          json=binding) as r:
        assert r.status in (201, 409), await r.text()


async def _measure(session: aiohttp.ClientSession, bases: dict[str, str], n: int, run: Runner, cpu: ProcCPU,
                   names: dict[str, str]) -> dict[str, Any]:
    """Seconds per mode over ROUNDS alternated rounds of ``n`` GETs each, and each mode's gateway CPU
    µs per GET (what the machine's load moves least)."""
    seconds = {"allow": 0.0, "rbac": 0.0}
    cpu_s = {"allow": 0.0, "rbac": 0.0}
    for k, mode in enumerate(("allow", "rbac") * ROUNDS):
        url = bases[mode] + CONFIGMAP

        async def get(_i: int, url: str = url) -> None:
            async with session.get(url) as r:
                await r.read()
                assert r.status == 200, (r.status, await r.text())
        if k < 2:
            await run(WARM_UP, get)
        before = cpu.snapshot()
        seconds[mode] += await run(n, get)
        cpu_s[mode] += cpu.snapshot()[names[mode]] - before[names[mode]]
    return {"rps_allow": ROUNDS * n / seconds["allow"], "rps_rbac": ROUNDS * n / seconds["rbac"],
            "ratio": seconds["allow"] / seconds["rbac"],
            "gateway_cpu_us_per_get": {mode: round(t / (ROUNDS * n) * 1e6) for mode, t in cpu_s.items()}}


async def bench_rbac(chain: Chain, session: aiohttp.ClientSession, n: int,
                     run: Runner = run_concurrently) -> dict[str, Any]:
    """RBAC ÷ AlwaysAllow GET throughput for a user bound by a RoleBinding, and for the admin
    (``session``: the chain's admin client certificate)."""
    ports = {"allow": free_port(), "rbac": free_port()}
    names = {"allow": "aggregator-authz-allow", "rbac": "aggregator-authz-rbac"}
    mode_flag = {"allow": "AlwaysAllow", "rbac": "RBAC"}
    bases = {mode: f"https://127.0.0.1:{port}" for mode, port in ports.items()}
    await _setup(session, chain.server_url)
    for mode, port in ports.items():
        chain.add_process(names[mode], gateway_argv(chain.commands["aggregator"], port, mode_flag[mode]))
    results: dict[str, Any] = {}
    try:
        for base in bases.values():
            await _until(session, base + "/readyz", 200, "gateway ready")
        reader_connector = aiohttp.TCPConnector(ssl=client_ssl(chain, READER), limit=CONCURRENCY)
        stranger_connector = aiohttp.TCPConnector(ssl=client_ssl(chain, STRANGER), limit=4)
        async with aiohttp.ClientSession(connector=reader_connector) as reader, \
                aiohttp.ClientSession(connector=stranger_connector) as stranger:
            await _until(reader, bases["rbac"] + CONFIGMAP, 200, f"{READER}'s RoleBinding in force")
            # Each gateway is the mode it stands for.
            assert await _status(stranger, bases["rbac"] + CONFIGMAP) == 403
            assert await _status(stranger, bases["allow"] + CONFIGMAP) == 200
            cpu = ProcCPU(chain.processes)
            for who, client in (("user", reader), ("admin", session)):
                results[who] = await _measure(client, bases, n, run, cpu, names)
    finally:
        for name in names.values():
            proc = chain.processes.pop(name)
            proc.terminate()
            proc.wait(timeout=15)
    return results


def line(r: dict[str, Any]) -> str:
    u, a = r["user"], r["admin"]
    uc = u["gateway_cpu_us_per_get"]
    return (f"GET rps with RBAC {u['rps_rbac']:.0f} / AlwaysAllow {u['rps_allow']:.0f} = {u['ratio']:.2f}"
            f"  (target >= 0.9; a user bound by a RoleBinding), gateway CPU per GET {uc['rbac']} / {uc['allow']} us;"
            f" as system:masters {a['rps_rbac']:.0f} / {a['rps_allow']:.0f} = {a['ratio']:.2f}")


async def _main(n: int) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="kubechain-rbac-bench-"))
    chain = Chain(data, port=free_port())
    chain.start()
    try:
        connector = aiohttp.TCPConnector(ssl=chain.ssl_context(), limit=CONCURRENCY)
        async with aiohttp.ClientSession(connector=connector) as session:
            return await bench_rbac(chain, session, n)
    finally:
        chain.stop()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 GETs per round instead of 10,000")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    result = asyncio.run(_main(2000 if args.quick else 10000))
    if args.json:
        import json
        print(json.dumps(result, indent=2))
    print(line(result))
