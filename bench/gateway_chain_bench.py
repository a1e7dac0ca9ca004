"""CPU per request of the gateway's handler chain alone, another tree's ÷ this one's, in one run.

The chain (``aggregator.filters.build_handler_chain``: request info, audit, authentication, impersonation,
in-flight, API Priority and Fairness, authorization) runs in-process around a mux that answers 200 at
once, so what is measured is the filters' own work per request, without TLS, sockets or the proxy
(bench/tree_ab.py measures the whole gateway). Real parts: the gateway's Authenticator (a bearer token),
APF with kube's mandatory configuration, the audit policy ``kubechain up`` writes (Metadata, one event
per request, rendered by the sink's writer thread to a backend that keeps nothing), and kube's
privileged-groups authorizer. Two users: ``system:masters`` (APF-exempt, as bench.py's admin) and a
plain user (APF's catch-all level: a seat per request). Each round is a fresh process of one tree;
rounds alternate between the trees, so load from other work falls on both alike.

    .venv/bin/python bench/gateway_chain_bench.py OLD_DIR [ROUNDS] [N]

``OLD_DIR`` as bench/tree_ab.py's (``git archive <commit> libs services kubechain_cli proto``).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

USERS = {"admin": ("system:masters",), "plain": ("devs",)}


def _round(n: int) -> dict[str, float]:
    """One round in this process: µs of CPU (all threads) per request, per user."""
    from aggregator import filters
    from aggregator.audit import policy, sink
    from aggregator.audit.filter import Auditor
    from aggregator.auth import Authenticator
    from aggregator.flowcontrol.wiring import PriorityAndFairness
    from genericapi.apimachinery.authorization import PrivilegedGroups
    from genericapi.apimachinery.user import UserInfo

    from kubechain_cli.auditpolicy import DEFAULT_POLICY

    class Discard:
        name = "discard"

        def write(self, docs: Any) -> None:
            pass

        def close(self) -> None:
            pass

    body = b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"warm"},"data":{"v":"x"}}'
    start = {"type": "http.response.start", "status": 200,
             "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)),
                         (b"audit-id", b"from-the-backend")]}

    async def mux(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send(dict(start))
        await send({"type": "http.response.body", "body": body, "more_body": False})

    tokens = {name: UserInfo(name, groups) for name, groups in USERS.items()}
    audit_sink = sink.AuditSink([Discard()])
    auditor = Auditor(policy.load_policy(DEFAULT_POLICY.encode()), audit_sink)
    apf = PriorityAndFairness.build(None, "/registry", 600, 60.0)
    apf.controller.refresh()
    app = filters.build_handler_chain(mux, Authenticator(tokens), PrivilegedGroups("system:masters", "devs"), apf,
                                      None, auditor)
    path = "/api/v1/namespaces/bench/configmaps/warm"

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(_message: Any) -> None:
        pass

    async def run(user: str, count: int) -> None:
        headers = [(b"host", b"127.0.0.1:6443"), (b"user-agent", b"kubectl/v1.33.1 (linux/amd64)"),
                   (b"accept", b"application/json"), (b"authorization", f"Bearer {user}".encode())]
        for _ in range(count):
            scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
                     "headers": list(headers), "client": ("127.0.0.1", 50000), "scheme": "https",
                     "http_version": "1.1", "server": ("127.0.0.1", 6443)}
            await app(scope, receive, send)

    out: dict[str, float] = {}
    audit_sink.start()
    try:
        for user in USERS:
            asyncio.run(run(user, 500))  # warm-up: policy decisions, metric children, APF series
            before = time.process_time()
            asyncio.run(run(user, n))
            out[user] = (time.process_time() - before) / n * 1e6
    finally:
        audit_sink.stop()
    return out


def _env(tree: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if tree is not None:
        paths = [tree / "libs" / "genericapi", *(p for p in sorted((tree / "services").iterdir()) if p.is_dir()), tree]
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    return env


def main() -> None:
    if sys.argv[1] == "--round":
        print(json.dumps(_round(int(sys.argv[2]))))
        return
    old = Path(sys.argv[1]).resolve()
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    results: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for i in range(rounds):
        for mode in (("old", "new") if i % 2 == 0 else ("new", "old")):
            tree = old if mode == "old" else None
            got = subprocess.run([sys.executable, __file__, "--round", str(n)], env=_env(tree), check=True,
                                 capture_output=True, text=True)
            results[mode].append(json.loads(got.stdout))
            print(f"round {i} {mode} load {os.getloadavg()[0]:4.1f}  " +
                  "  ".join(f"{u} {v:6.1f} us" for u, v in results[mode][-1].items()), flush=True)
    print("medians (us of CPU per request through the chain alone):")
    for user in USERS:
        a = statistics.median(r[user] for r in results["old"])
        b = statistics.median(r[user] for r in results["new"])
        print(f"  {user:6s} old {a:6.1f}  new {b:6.1f}  new/old {b / a:.2f}")


if __name__ == "__main__":
    main()
