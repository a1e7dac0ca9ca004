"""A fresh extensions-api process serves every established CRD as soon as it reports ready."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from support.procs import ChainHandle
from test_crds import crontab, crontab_crd, establish

from kubechain_cli.chain import etcd_tls_flags, free_port

pytestmark = pytest.mark.integration


def test_new_extensions_api_serves_established_crds(chain: ChainHandle) -> None:
    group, ns = "it-restart.example.com", "crd-restart"
    chain.kubectl("create", "namespace", ns)
    establish(chain, crontab_crd(group, "r"), f"crontabs.{group}")
    chain.kubectl("create", "-f", "-", input=crontab(group, "kept", ns, cronSpec="@daily", replicas=1))
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(["libs/genericapi", "services/extensions-api"]))
    proc = subprocess.Popen([sys.executable, "-m", "extensionsapi", "--etcd-servers", chain.chain.etcd_endpoints,
                             *etcd_tls_flags(chain.chain.etcd_tls),
                             "--port", str(port), "--log-level", "WARNING"], env=env,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(base + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            assert time.monotonic() < deadline, "extensions-api did not become ready"
            time.sleep(0.1)
        with urllib.request.urlopen(f"{base}/apis/{group}/v1/namespaces/{ns}/crontabs/kept", timeout=5) as r:
            obj = json.loads(r.read())
        assert obj["spec"] == {"cronSpec": "@daily", "replicas": 1, "color": "blue"}
        with urllib.request.urlopen(f"{base}/apis/{group}/v1", timeout=5) as r:
            resources = {res["name"]: res for res in json.loads(r.read())["resources"]}
        assert resources["crontabs"]["shortNames"] == ["ctr"]
        assert set(resources) == {"crontabs", "crontabs/status", "crontabs/scale"}
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{base}/apis/not-a-crd.example.com/v1/things", timeout=5)
        assert err.value.code == 404
    finally:
        proc.terminate()
        try:
            assert proc.wait(15) == 0, "extensions-api did not exit cleanly on SIGTERM"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    chain.kubectl("delete", "crd", f"crontabs.{group}")
