"""Every verb on a custom resource nested N levels deep: wall time and CPU per process.

    .venv/bin/python bench/deep_bench.py [LEVELS ...]      (default: 1000 2000 4000 8000 10000)

kube's decoder takes JSON 10,000 levels deep, so a CRD whose spec preserves unknown fields may hold
an object that deep; issue 14 wants every verb on it to answer in seconds, and the cost to grow
linearly with depth. One chain (controllers off, AlwaysAllow), one object per depth: create, get,
list, watch (replayed from the cache), a JSON patch at the deepest point, a merge patch and an
apply as deep as the object, a strategic merge patch (kube's 415 for custom resources) and a
delete. Wall time moves with whatever else runs on the machine; the CPU each process spent on the
request (``/proc/<pid>/stat``, 10 ms ticks; ``ext`` is extensions-api) does not (much).
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from proccpu import cpu_seconds

from kubechain_cli.chain import Chain, free_port

GROUP = "deep.example.com"
NS = "deep-bench"
BASE = f"/apis/{GROUP}/v1/namespaces/{NS}/deeps"
CRD = f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: deeps.{GROUP}}}
spec:
  group: {GROUP}
  scope: Namespaced
  names: {{plural: deeps, singular: deep, kind: Deep}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


def nested(levels: int, leaf: str) -> bytes:
    """``levels`` objects {"a": ...} around {"v": leaf}, built as bytes (no deep encoder needed)."""
    return b'{"a":' * levels + b'{"v":"' + leaf.encode() + b'"}' + b"}" * levels


def deep_object(name: str, levels: int, leaf: str) -> bytes:
    """A Deep whose document nests exactly ``levels`` deep (root, spec and x take three)."""
    return (f'{{"apiVersion":"{GROUP}/v1","kind":"Deep","metadata":{{"name":"{name}","namespace":"{NS}"}},'
            '"spec":{"x":').encode() + nested(levels - 3, leaf) + b"}}"


class Bench:
    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self.context: ssl.SSLContext = chain.ssl_context()

    def kubectl(self, *args: str, stdin: str | None = None) -> None:
        env = dict(os.environ, KUBECONFIG=str(self.chain.kubeconfig))
        subprocess.run(["kubectl", *args], input=stdin, text=True, env=env, check=True, capture_output=True)

    def request(self, method: str, path: str, body: bytes | None, ctype: str) -> int:
        req = urllib.request.Request(self.chain.server_url + path, data=body, method=method,
                                     headers={"Content-Type": ctype} if body is not None else {})
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=120) as resp:
                resp.read()
                return int(resp.status)
        except urllib.error.HTTPError as err:
            err.read()
            return int(err.code)

    def timed(self, method: str, path: str, body: bytes | None = None, ctype: str = "application/json",
              want: int = 200) -> tuple[float, dict[str, float]]:
        before = {name: cpu_seconds(p.pid) for name, p in self.chain.processes.items()}
        start = time.monotonic()
        status = self.request(method, path, body, ctype)
        wall = time.monotonic() - start
        if status != want:
            raise SystemExit(f"{method} {path[:80]}: {status}, expected {want}")
        time.sleep(0.3)  # let the watch cache and the gateway finish what the request started
        after = {name: cpu_seconds(p.pid) for name, p in self.chain.processes.items()}
        return wall, {name: after[name] - before[name] for name in before}

    def run(self, levels: int) -> None:
        name = f"deep-{levels}"
        item = f"{BASE}/{name}"
        pointer = "/spec/x" + "/a" * (levels - 3) + "/v"
        deep_patch = b'{"spec":{"x":' + nested(levels - 3, "merge") + b"}}"
        verbs: list[tuple[str, str, str, bytes | None, str, int]] = [
            ("create", "POST", BASE, deep_object(name, levels, "created"), "application/json", 201),
            ("get", "GET", item, None, "", 200),
            ("list", "GET", BASE, None, "", 200),
            ("watch", "GET", f"{BASE}?watch=1&resourceVersion=0&fieldSelector=metadata.name%3D{name}"
                             "&timeoutSeconds=1", None, "", 200),
            ("json-patch", "PATCH", item, f'[{{"op":"replace","path":"{pointer}","value":"json"}}]'.encode(),
             "application/json-patch+json", 200),
            ("merge-patch", "PATCH", item, deep_patch, "application/merge-patch+json", 200),
            ("smp(415)", "PATCH", item, deep_patch, "application/strategic-merge-patch+json", 415),
            ("apply", "PATCH", f"{item}?fieldManager=bench&force=true", deep_object(name, levels, "applied"),
             "application/apply-patch+yaml", 200),
            ("delete", "DELETE", item, None, "", 200),
        ]
        walls, cpus = [], []
        for label, method, path, body, ctype, want in verbs:
            wall, cpu = self.timed(method, path, body, ctype or "application/json", want)
            if label == "watch":
                wall -= 1.0  # the watch stays open for its timeoutSeconds
            walls.append(f"{label} {wall:.2f}")
            cpus.append(f"{label} {cpu.get('extensions-api', 0.0):.2f}")
        load = os.getloadavg()[0]
        print(f"{levels:>6} levels  wall s: {', '.join(walls)}  (load {load:.1f})")
        print(f"{'':>6}         extensions-api CPU s: {', '.join(cpus)}", flush=True)


def main() -> None:
    depths = [int(arg) for arg in sys.argv[1:]] or [1000, 2000, 4000, 8000, 10000]
    with tempfile.TemporaryDirectory(prefix="kubechain-deep-bench-") as data:
        chain = Chain(Path(data), port=free_port(), controllers=False, authorization_mode="AlwaysAllow")
        try:
            chain.start()
            bench = Bench(chain)
            bench.kubectl("create", "namespace", NS)
            bench.kubectl("apply", "-f", "-", stdin=CRD)
            bench.kubectl("wait", "--for", "condition=Established", f"crd/deeps.{GROUP}", "--timeout=30s")
            time.sleep(1)
            for levels in depths:
                bench.run(levels)
        finally:
            chain.stop(timeout=3)


if __name__ == "__main__":
    main()
