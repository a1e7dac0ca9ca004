"""How many etcd watches each service of a started chain holds, read from etcd's own /metrics.

Issue 15: "Events, HPAs and multi-version custom resources open duplicate etcd watches". A chain is
started as ``kubechain up`` starts it; etcd's ``etcd_debugging_mvcc_watcher_total`` (watchers) and
``etcd_debugging_mvcc_watch_stream_total`` (gRPC watch streams) are read, then the services are
stopped one at a time (gateway, core-api, extensions-api) and each drop is what that service held.

    .venv/bin/python bench/etcd_watches.py [--crd]

``--crd`` first creates a CRD with two served versions (the drop of extensions-api then includes
its custom resources' watches).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import ssl
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from kubechain_cli.chain import Chain, free_port

_METRICS = ("etcd_debugging_mvcc_watcher_total", "etcd_debugging_mvcc_watch_stream_total")

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.bench.example.com"},
    "spec": {"group": "bench.example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": v, "served": True, "storage": v == "v1",
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}
                          for v in ("v1", "v2")]},
}


def etcd_watch_counts(chain: Chain) -> dict[str, int]:
    tls = chain.etcd_tls
    ctx = ssl.create_default_context(cafile=tls.cafile)
    ctx.load_cert_chain(tls.certfile, tls.keyfile)
    with urllib.request.urlopen(chain.etcd_endpoints.split(",")[0] + "/metrics", context=ctx, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for name in _METRICS:
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        out[name] = int(float(m.group(1))) if m else -1
    return out


def settle(chain: Chain, seconds: float = 3.0) -> dict[str, int]:
    """The counts once they stopped moving (a stopping service closes its streams asynchronously)."""
    last = etcd_watch_counts(chain)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(seconds)
        now = etcd_watch_counts(chain)
        if now == last:
            return now
        last = now
    return last


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--crd", action="store_true", help="create a two-version CRD first")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kubechain-watches-") as data:
        chain = Chain(Path(data), port=free_port())
        chain.start()
        try:
            if args.crd:
                subprocess.run(["kubectl", "--kubeconfig", str(chain.kubeconfig), "apply", "-f", "-"],
                               input=json.dumps(CRD).encode(), check=True, capture_output=True)
                subprocess.run(["kubectl", "--kubeconfig", str(chain.kubeconfig), "wait", "--for",
                                "condition=Established", "crd/widgets.bench.example.com"], check=True,
                               capture_output=True)
            before = settle(chain)
            print(f"load {os.getloadavg()[0]:.1f}; whole chain: watchers {before[_METRICS[0]]}, "
                  f"streams {before[_METRICS[1]]}")
            for name in ("aggregator", "core-api", "extensions-api"):
                proc = chain.processes[name]
                proc.terminate()
                proc.wait(30)
                after = settle(chain)
                print(f"{name:15s} held watchers {before[_METRICS[0]] - after[_METRICS[0]]:4d}, "
                      f"streams {before[_METRICS[1]] - after[_METRICS[1]]:4d}")
                before = after
            print(f"left (etcd itself, none expected): watchers {before[_METRICS[0]]}, streams {before[_METRICS[1]]}")
        finally:
            chain.stop(timeout=5)


if __name__ == "__main__":
    main()
