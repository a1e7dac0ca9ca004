"""etcd round trips per API request: core-api's ``etcd_requests_total`` before and after each verb.

Issue 15 asks for one etcd round trip per create/update where kube uses one, and no extra reads
when the watch cache is fresh. This starts a chain (``kubechain up``'s), lets it settle, then for
each verb on a ConfigMap reads core-api's /metrics (over its Unix socket, as the gateway reaches it)
around ``--n`` requests and prints the etcd calls per request by (operation, type). Controllers run
in the same process (namespace, GC, ServiceAccount): the settle wait and a quiet baseline interval
(printed first) show what they add on their own.

    .venv/bin/python bench/etcd_roundtrips.py [--n 20]

``--ab DIR`` instead measures CPU per update: another tree (``git archive <commit> libs services
kubechain_cli proto`` into DIR, plus the generated code, as bench/tree_ab.py takes it) and this one
run side by side, rounds alternating between them; each round merge-patches ``--n`` ConfigMaps (each
a changed value: one write) at benchutil's concurrency through the gateway, CPU of every process
(etcd included) read from /proc around it.

    .venv/bin/python bench/etcd_roundtrips.py --ab /tmp/old [--rounds 6] [--n 1000] [--cr]

The per-verb counts end with custom resources through extensions-api's metrics (``--no-cr`` skips
them): a CRD whose v2 is converted to the stored v1 by conversion ``None`` and one whose v2 goes
through the tests' conversion webhook (tests/support/conversion_webhook.py, its own process);
``--ab ... --cr`` patches such webhook-converted objects instead of ConfigMaps.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchutil import run_concurrently
from gc_bench import start
from proccpu import ProcCPU

from kubechain_cli.chain import Chain, free_port

_LINE = re.compile(r'^etcd_requests_total\{operation="([^"]*)",type="([^"]*)"\} ([0-9.e+]+)$', re.M)


class _Unix(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=30)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(self._path)
        self.sock = sock


def etcd_calls(chain: Chain, member: str = "core-api") -> Counter[tuple[str, str]]:
    url = chain.replica_urls[member][0]
    conn = _Unix(url.removeprefix("unix://"))
    conn.request("GET", "/metrics", headers={"X-Remote-User": "admin", "X-Remote-Group": "system:masters"})
    text = conn.getresponse().read().decode()
    conn.close()
    return Counter({(op, kind): int(float(v)) for op, kind, v in _LINE.findall(text)})


_HANDLED = re.compile(r'^grpc_server_handled_total\{grpc_code="[^"]*",grpc_method="([^"]*)",'
                      r'grpc_service="etcdserverpb\.(?:KV|Lease)",grpc_type="unary"\} ([0-9.e+]+)$', re.M)


def etcd_side(chain: Chain) -> Counter[str]:
    """Unary calls etcd itself answered, by method (every client: the controllers and the gateway's
    leases too; the list's consistency probe, which core-api's metric does not count, included)."""
    ctx = ssl.create_default_context(cafile=chain.etcd_tls.cafile)
    ctx.load_cert_chain(chain.etcd_tls.certfile, chain.etcd_tls.keyfile)
    with urllib.request.urlopen(chain.etcd_endpoints + "/metrics", context=ctx, timeout=30) as r:
        text = r.read().decode()
    out: Counter[str] = Counter()
    for method, v in _HANDLED.findall(text):
        out[method] += int(float(v))
    return out


async def _update_ab(old: Path, rounds: int, n: int, cr: bool = False) -> None:
    """CPU per update (merge PATCH changing a value), the tree in ``old`` vs this one, alternating:
    of ConfigMaps, or (``cr``) of custom resources patched through a version their conversion
    webhook converts (v2; v1 is stored)."""
    paths = [old / "libs" / "genericapi", *(p for p in sorted((old / "services").iterdir()) if p.is_dir()), old]
    trees = {"old": {"PYTHONPATH": os.pathsep.join(str(p) for p in paths)}, "new": {}}
    chains = {name: start(name, env) for name, env in trees.items()}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    merge = {"Content-Type": "application/merge-patch+json"}
    hook = _webhook(Path(tempfile.mkdtemp(prefix="kubechain-rt-hook-"))) if cr else None
    group = "rt-ab.example.com"
    path = f"/apis/{group}/v2/namespaces/bench/backends" if cr else "/api/v1/namespaces/bench/configmaps"

    def body(i: int) -> dict[str, Any]:
        if cr:
            return {"apiVersion": f"{group}/v2", "kind": "Backend", "metadata": {"name": f"u{i:05d}"},
                    "spec": {"address": f"u{i}.local:1", "v": "x" * 200}}
        return {"metadata": {"name": f"u{i:05d}"}, "data": {"v": "x" * 200}}

    def change(round_: int) -> dict[str, Any]:
        return {"spec": {"address": f"r.local:{round_ + 2}"}} if cr else {"data": {"k": str(round_)}}

    try:
        sessions = {name: aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=c.ssl_context(), limit=32))
                    for name, c in chains.items()}
        for name, chain in chains.items():
            s = sessions[name]
            async with s.post(chain.server_url + "/api/v1/namespaces", json={"metadata": {"name": "bench"}}) as r:
                assert r.status == 201, await r.text()
            if cr:
                async with s.post(chain.server_url + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                  json=_crd(group, "Webhook", hook)) as r:
                    assert r.status == 201, await r.text()
                for _ in range(150):
                    async with s.get(chain.server_url + path) as r:
                        if r.status == 200:
                            break
                    await asyncio.sleep(0.2)
            base = chain.server_url + path

            async def create(i: int, s: aiohttp.ClientSession = s, base: str = base) -> None:
                async with s.post(base, json=body(i)) as r:
                    assert r.status == 201, await r.text()

            await run_concurrently(n, create)
        await asyncio.sleep(2)
        for round_ in range(-1, rounds):
            for name in (list(trees) if round_ % 2 == 0 else list(reversed(list(trees)))):
                chain, s = chains[name], sessions[name]
                base = chain.server_url + path

                async def patch(i: int, s: aiohttp.ClientSession = s, base: str = base, r_: int = round_) -> None:
                    async with s.patch(f"{base}/u{i:05d}", data=json.dumps(change(r_)), headers=merge) as r:
                        assert r.status == 200, await r.text()

                cpu = ProcCPU(dict(chain.processes))
                before = cpu.snapshot()
                await run_concurrently(n, patch)
                got = cpu.per_request(before, cpu.snapshot(), n)
                if round_ >= 0:  # round -1 warms both up
                    results[name].append(got)
                print(f"round {round_} {name} load {os.getloadavg()[0]:4.1f}  "
                      + ", ".join(f"{k} {v:.0f}" for k, v in sorted(got.items()) if v >= 1), flush=True)
        for s in sessions.values():
            await s.close()
    finally:
        for chain in chains.values():
            chain.stop(timeout=5)
            shutil.rmtree(chain.data_dir, ignore_errors=True)
        if hook is not None:
            hook.stop()
    print("medians (us of CPU per update):")
    for proc in sorted(results["new"][0]):
        a = statistics.median(r[proc] for r in results["old"])
        b = statistics.median(r[proc] for r in results["new"])
        if a >= 1:
            print(f"  {proc:15s} old {a:6.0f}  new {b:6.0f}  new/old {b / a:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--ab", type=Path, default=None, help="another tree: CPU per update, it vs this one")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--no-cr", action="store_true", help="skip the custom resource lines")
    ap.add_argument("--cr", action="store_true", help="--ab: patch webhook-converted custom resources")
    args = ap.parse_args()
    n = args.n
    if args.ab is not None:
        asyncio.run(_update_ab(args.ab.resolve(), args.rounds, n, cr=args.cr))
        return
    chain = Chain(Path(tempfile.mkdtemp(prefix="kubechain-rt-")), port=free_port())
    chain.start()
    ctx = chain.ssl_context()
    hook = _webhook(chain.data_dir) if not args.no_cr else None

    def call(method: str, path: str, body: Any = None, ctype: str = "application/json") -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(chain.server_url + path, data=data, method=method,
                                     headers={"Content-Type": ctype} if data else {})
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as err:
            raise SystemExit(f"{method} {path}: {err.code} {err.read()[:300]!r}") from err

    try:
        call("POST", "/api/v1/namespaces", {"metadata": {"name": "rt"}})
        time.sleep(5)  # namespace controller, ServiceAccount, root CA: let them finish
        base = "/api/v1/namespaces/rt/configmaps"
        rv: dict[str, str] = {}

        def create(i: int) -> None:
            rv[f"c{i}"] = call("POST", base, {"metadata": {"name": f"c{i}"}, "data": {"k": "v"}})["metadata"][
                "resourceVersion"]

        def update(i: int) -> None:
            call("PUT", f"{base}/c{i}", {"metadata": {"name": f"c{i}", "resourceVersion": rv[f"c{i}"]},
                                         "data": {"k": "w"}})

        verbs = [
            ("quiet (no request)", lambda i: time.sleep(0.05)),
            ("create", create),
            ("get", lambda i: call("GET", f"{base}/c{i}")),
            ("get rv=0", lambda i: call("GET", f"{base}/c{i}?resourceVersion=0")),
            ("update (PUT with rv)", update),
            ("patch (merge)", lambda i: call("PATCH", f"{base}/c{i}", {"data": {"p": str(i)}},
                                              "application/merge-patch+json")),
            ("list", lambda i: call("GET", base)),
            ("list rv=0", lambda i: call("GET", f"{base}?resourceVersion=0")),
            ("list limit=5", lambda i: call("GET", f"{base}?limit=5")),
            ("delete", lambda i: call("DELETE", f"{base}/c{i}")),
        ]
        print(f"etcd calls per request from core-api's etcd_requests_total (n={n}; operation/type)")
        measure(chain, "core-api", verbs, n)
        if hook is not None:
            print(f"custom resources (extensions-api's etcd_requests_total), through the version not stored (n={n})")
            for conversion in ("None", "Webhook"):
                group = f"rt-{conversion.lower()}.example.com"
                call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", _crd(group, conversion, hook))
                established(call, f"/apis/{group}/v2/namespaces/rt/backends")
                measure(chain, "extensions-api", _cr_verbs(call, f"/apis/{group}/v2/namespaces/rt/backends"), n,
                        f"{conversion}: ")
    finally:
        chain.stop()
        if hook is not None:
            hook.stop()


def measure(chain: Chain, member: str, verbs: list[tuple[str, Callable[[int], Any]]], n: int, label: str = "") -> None:
    """Print ``member``'s etcd calls per request of each verb, and what etcd itself answered."""
    for name, fn in verbs:
        before, etcd_before = etcd_calls(chain, member), etcd_side(chain)
        for i in range(n):
            fn(i)
        time.sleep(0.2)
        after, etcd_after = etcd_calls(chain, member), etcd_side(chain)
        diff = {k: after[k] - before[k] for k in after if after[k] - before[k]}
        total = sum(diff.values()) / n
        detail = ", ".join(f"{op}/{kind or '-'} {v / n:.2f}" for (op, kind), v in sorted(diff.items()))
        seen = {m: etcd_after[m] - etcd_before[m] for m in etcd_after if etcd_after[m] - etcd_before[m]}
        side = ", ".join(f"{m} {v / n:.2f}" for m, v in sorted(seen.items()))
        print(f"  {label + name:22} {member} {total:5.2f} ({detail})")
        print(f"  {'':22} etcd saw {sum(seen.values()) / n:5.2f} ({side})")


def _webhook(data_dir: Path) -> Any:
    """The tests' conversion webhook (its own process; v1 host+port <-> v2 address)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from support.conversion_webhook import WebhookProcess, make_pki

    return WebhookProcess.start(make_pki(data_dir / "hook-pki", ["localhost"]))


def _crd(group: str, conversion: str, hook: Any) -> dict[str, Any]:
    """Backends of ``group``: v1 stored, v2 served too, converted by ``conversion``."""
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}
    how: dict[str, Any] = {"strategy": conversion}
    if conversion == "Webhook":
        how["webhook"] = {"conversionReviewVersions": ["v1"],
                          "clientConfig": {"url": f"{hook.url}/convert", "caBundle": hook.pki.ca_bundle}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"backends.{group}"},
            "spec": {"group": group, "scope": "Namespaced", "conversion": how,
                     "names": {"kind": "Backend", "plural": "backends"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema},
                                  {"name": "v2", "served": True, "storage": False, "schema": schema}]}}


def established(call: Callable[..., Any], path: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            call("GET", path)
            return
        except SystemExit:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _cr_verbs(call: Callable[..., Any], base: str) -> list[tuple[str, Callable[[int], Any]]]:
    rv: dict[str, str] = {}
    api_version = base.split("/")[2] + "/" + base.split("/")[3]

    def create(i: int) -> None:
        rv[f"b{i}"] = call("POST", base, {"apiVersion": api_version, "kind": "Backend", "metadata": {
            "name": f"b{i}"}, "spec": {"address": f"b{i}.local:1"}})["metadata"]["resourceVersion"]

    def update(i: int) -> None:
        call("PUT", f"{base}/b{i}", {"apiVersion": api_version, "kind": "Backend", "metadata": {
            "name": f"b{i}", "resourceVersion": rv[f"b{i}"]}, "spec": {"address": f"b{i}.local:2"}})

    return [
        ("create", create),
        ("get", lambda i: call("GET", f"{base}/b{i}")),
        ("update (PUT with rv)", update),
        ("patch (merge)", lambda i: call("PATCH", f"{base}/b{i}", {"spec": {"address": f"b{i}.local:3"}},
                                          "application/merge-patch+json")),
        ("delete", lambda i: call("DELETE", f"{base}/b{i}")),
    ]


if __name__ == "__main__":
    main()
