"""GET rps through a gateway with audit at Metadata and API Priority and Fairness on ÷ through one with
both off (issue 17's bench line, target >= 0.85): what an operator pays for the two together.

``bench.py`` calls ``bench_audit`` on its running chain: two more gateways join the chain's members.
"on" has ``--audit-policy-file`` (Metadata for every request, the log written to a file in the data
dir, as ``kubechain up`` writes one) and ``--enable-priority-and-fairness=true`` (kube's 400 + 200
seats: every request is classified, takes a seat and gets the PF UID headers); "off" has no audit
flags and ``--enable-priority-and-fairness=false`` (kube's handler chain without either filter).
Every other flag is the chain's own gateway's. GETs of one ConfigMap go to each in alternating
rounds (off, on, off, on, off, on), the first two after a warm-up, so the machine's load lands
on both modes alike; each mode's rounds are summed. ``stages`` chooses the policy: "1" omits
RequestReceived (kubechain up's default: one event per request), "2" keeps it (kube's own
default: two events per request).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from benchutil import CONCURRENCY, client_ssl, without_flags
from proccpu import ProcCPU

from kubechain_cli.chain import Chain, free_port

#: Connections per client, as bench.py's.

ONE_EVENT = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
"""
TWO_EVENTS = """apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: Metadata
"""
#: The chain gateway's flags that are its audit configuration (dropped for both bench gateways).
AUDIT_FLAGS_WITH_VALUE = ("--audit-policy-file", "--audit-log-path", "--audit-log-maxsize", "--audit-log-maxbackup",
                          "--audit-log-maxage", "--audit-log-format", "--audit-webhook-config-file")
#: Flags that turn APF on or off, the bench sets it per mode (``--flag=value`` or a bare ``--flag``).
APF_SWITCH = "--enable-priority-and-fairness"

#: Rounds per mode, and the GETs each mode gets first to open connections and fill caches.
ROUNDS = 3
WARM_UP = 300
#: The object every GET reads (bench.py makes the namespace; the bench makes the ConfigMap, 200 bytes).
CONFIGMAP = "/api/v1/namespaces/bench/configmaps/audit-bench"
#: kube's response header naming the FlowSchema that classified a request.
FLOW_SCHEMA_UID_HEADER = "X-Kubernetes-PF-FlowSchema-UID"

Runner = Callable[[int, Callable[[int], Awaitable[None]]], Awaitable[float]]


def _without_audit_and_apf(argv: list[str]) -> list[str]:
    """The gateway's command line without its audit flags and APF switch (each mode sets its own)."""
    return without_flags(argv, AUDIT_FLAGS_WITH_VALUE, (APF_SWITCH,))


def _with_port(argv: list[str], port: int) -> list[str]:
    out = list(argv)
    out[out.index("--secure-port") + 1] = str(port)
    return out


async def _ready(session: aiohttp.ClientSession, base: str) -> None:
    for _ in range(600):
        try:
            async with session.get(base + "/readyz") as r:
                if r.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"the bench gateway at {base} never became ready")


#: A user who is no superuser: kube 1.33's global-default FlowSchema (priority level global-default,
#: 20 of 245 nominal shares: 48 of 600 seats, queues of 128 with hand size 6) classifies it, so its
#: GETs take seats and go through the fair queues; RBAC's view role lets it read ConfigMaps.
READER = "bench-reader"


async def _grant_view(admin: aiohttp.ClientSession, gateway: str, reader: aiohttp.ClientSession,
                      url: str) -> None:
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": READER},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": READER}]}
    async with admin.post(gateway + "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json=binding) as r:
        assert r.status in (201, 409), await r.text()
    for _ in range(300):  # the gateway's RBAC watch cache follows
        async with reader.get(url) as r:
            if r.status == 200:
                return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{READER} was never allowed to read {url}")


async def _measure(session: aiohttp.ClientSession, bases: dict[str, str], n: int, run_concurrently: Runner,
                   flow_schema_uid: str, cpu: ProcCPU, gateways: dict[str, str]) -> dict[str, Any]:
    """Seconds per mode over three alternated rounds of ``n`` GETs each (the first two after a warm-up
    of 300), and the CPU µs per GET of the mode's gateway and of core-api (what the machine's load
    does not move much). Every answer is checked for the mode it stands for: "on" classified into the
    FlowSchema ``flow_schema_uid`` (kube's X-Kubernetes-PF-FlowSchema-UID header), "off" not at all."""
    seconds: dict[str, float] = {"off": 0.0, "on": 0.0}
    cpu_s: dict[str, dict[str, float]] = {mode: {"gateway": 0.0, "core-api": 0.0} for mode in seconds}
    for k, mode in enumerate(("off", "on", "off", "on", "off", "on")):
        url = bases[mode] + CONFIGMAP
        seen: set[str] = set()

        async def get(_i: int, url: str = url, seen: set[str] = seen) -> None:
            async with session.get(url) as r:
                await r.read()
                assert r.status == 200, (r.status, await r.text())
                seen.add(r.headers.get(FLOW_SCHEMA_UID_HEADER, ""))
        if k < 2:
            await run_concurrently(WARM_UP, get)  # connections, caches
        before = cpu.snapshot()
        seconds[mode] += await run_concurrently(n, get)
        after = cpu.snapshot()
        cpu_s[mode]["gateway"] += after[gateways[mode]] - before[gateways[mode]]
        cpu_s[mode]["core-api"] += after["core-api"] - before["core-api"]
        want = {flow_schema_uid} if mode == "on" else {""}
        assert seen == want, f"the {mode} gateway's answers were classified as {seen}, not {want}"
    return {"rps_off": ROUNDS * n / seconds["off"], "rps_on": ROUNDS * n / seconds["on"],
            "ratio": seconds["off"] / seconds["on"],
            "cpu_us_per_get": {mode: {proc: round(t / (ROUNDS * n) * 1e6) for proc, t in by.items()}
                               for mode, by in cpu_s.items()}}


async def _flow_schema_uid(session: aiohttp.ClientSession, gateway: str, name: str) -> str:
    async with session.get(f"{gateway}/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/{name}") as r:
        assert r.status == 200, await r.text()
        return str((await r.json())["metadata"]["uid"])


async def bench_audit(chain: Chain, session: aiohttp.ClientSession, n: int, run_concurrently: Runner,
                      stages: str = "1") -> dict[str, Any]:
    """Both identities' ratios: a plain user (global-default: seats and fair queues) and the admin
    (system:masters: kube's exempt level, classified but never queued)."""
    base_argv = _without_audit_and_apf(chain.commands["aggregator"])
    policy = chain.data_dir / f"bench-audit-policy-{stages}.yaml"
    policy.write_text(ONE_EVENT if stages == "1" else TWO_EVENTS)
    log = chain.data_dir / "audit" / f"bench-{stages}.log"
    ports = {"off": free_port(), "on": free_port()}
    names = {"off": f"aggregator-audit-off-{stages}", "on": f"aggregator-audit-on-{stages}"}
    chain.add_process(names["off"], [*_with_port(base_argv, ports["off"]), f"{APF_SWITCH}=false"])
    chain.add_process(names["on"], [
        *_with_port(base_argv, ports["on"]), f"{APF_SWITCH}=true",
        "--audit-policy-file", str(policy), "--audit-log-path", str(log)])
    bases = {mode: f"https://127.0.0.1:{port}" for mode, port in ports.items()}
    results: dict[str, Any] = {}
    try:
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIGMAP.rsplit("/", 1)[1]},
              "data": {"payload": "x" * 200}}
        async with session.post(chain.server_url + CONFIGMAP.rsplit("/", 1)[0], json=cm) as r:
            assert r.status in (201, 409), await r.text()
        for base in bases.values():
            await _ready(session, base)
        connector = aiohttp.TCPConnector(ssl=client_ssl(chain, READER), limit=CONCURRENCY)
        async with aiohttp.ClientSession(connector=connector) as reader:
            await _grant_view(session, chain.server_url, reader,
                              bases["on"] + CONFIGMAP)
            expected = {"user": await _flow_schema_uid(session, chain.server_url, "global-default"),
                        "admin": await _flow_schema_uid(session, chain.server_url, "exempt")}
            cpu = ProcCPU(chain.processes)
            for who, client in (("user", reader), ("admin", session)):  # the admin's session: bench.py's
                results[who] = await _measure(client, bases, n, run_concurrently, expected[who], cpu, names)
        await asyncio.sleep(0.5)  # the writer thread finishes the last batch
    finally:
        for name in names.values():
            proc = chain.processes.pop(name)
            proc.terminate()
            proc.wait(timeout=15)
    results.update(events_written=_count_lines(log), gets_audited=2 * (ROUNDS * n + WARM_UP),
                   events_per_request=int(stages))
    return results


def _count_lines(path: Path) -> int:
    return sum(1 for _ in path.open("rb")) if path.exists() else 0


def line(r: dict[str, Any]) -> str:
    u, a = r["user"], r["admin"]
    uc = u["cpu_us_per_get"]
    return (f"GET rps with audit at Metadata and APF on {u['rps_on']:.0f} / both off {u['rps_off']:.0f}"
            f" = {u['ratio']:.2f}  (target >= 0.85; a user in global-default), gateway CPU per GET"
            f" {uc['on']['gateway']} / {uc['off']['gateway']} us (core-api {uc['on']['core-api']} /"
            f" {uc['off']['core-api']} us); as system:masters (exempt) {a['rps_on']:.0f} / {a['rps_off']:.0f}"
            f" = {a['ratio']:.2f}; {r['events_per_request']} event(s) per request,"
            f" {r['events_written']} written for {r['gets_audited']} GETs")
