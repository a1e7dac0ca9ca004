"""OpenAPI of a service-backed APIService through the real chain: kubectl explain for an aggregated API.

The sample aggregated server (tests/support/sample_apiserver.py) serves OpenAPI v2 and v3 for
``flunders`` (tests/support/sample_openapi.py). Registered with a Service and an APIService, its
schema reaches the gateway's ``/openapi/v2`` (merged, kube-aggregator's renaming of conflicting
definitions) and ``/openapi/v3`` (its hashed group-version document, proxied), so ``kubectl explain``
works with kubectl 1.33 (v3) and with 1.27's ``--output plaintext-openapiv2`` (v2). A backend
serving broken OpenAPI is skipped; a stopped backend keeps its last document, as kube keeps its
last successful download; a deleted APIService takes its schema away.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.procs import ChainHandle
from support.sample_openapi import FLUNDER_DESCRIPTION, GROUP_ONLY, META, REFERENCE_DESCRIPTION, Documents
from test_aggregation import _wait

from kubechain_cli.chain import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "wardle-openapi-it"
V3_KEY = "apis/wardle.example.com/v1alpha1"


class Backend:
    """One sample server process, registered through kubectl as ``<version>.wardle.example.com``."""

    def __init__(self, chain: ChainHandle, workdir: Path, version: str, service: str, openapi: str = "valid"):
        self.chain, self.version, self.service = chain, version, service
        self.port = free_port()
        self.cert_dir = workdir / "certs"
        self.log = open(workdir / "sample.log", "ab")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "libs" / "genericapi"), str(ROOT / "tests")]))
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "support" / "sample_apiserver.py"), "--port", str(self.port),
             "--cert-dir", str(self.cert_dir), "--service", service, "--namespace", NAMESPACE,
             "--requestheader-ca", chain.chain.pki.ca, "--version", version, "--openapi", openapi],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        _wait("the sample server's certificate", lambda: (self.cert_dir / "tls.key").exists(), 20)

    @property
    def name(self) -> str:
        return f"{self.version}.wardle.example.com"

    def register(self, version_priority: int) -> None:
        ca = base64.b64encode((self.cert_dir / "ca.crt").read_bytes()).decode()
        self.chain.kubectl("apply", "-f", "-", input=f"""
apiVersion: v1
kind: Service
metadata: {{name: {self.service}, namespace: {NAMESPACE}}}
spec: {{type: ExternalName, externalName: localhost, ports: [{{port: {self.port}}}]}}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: {self.name}}}
spec:
  group: wardle.example.com
  version: {self.version}
  groupPriorityMinimum: 1000
  versionPriority: {version_priority}
  caBundle: {ca}
  service: {{name: {self.service}, namespace: {NAMESPACE}, port: {self.port}}}
""")

    def available(self) -> str:
        status, obj = self.chain.json("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{self.name}")
        if status != 200:
            return ""
        conds = (obj.get("status") or {}).get("conditions") or []
        return next((c["status"] for c in conds if c["type"] == "Available"), "")

    def unregister(self) -> None:
        self.chain.kubectl("delete", "apiservice", self.name, "--ignore-not-found", check=False)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.log.close()


def _v2(chain: ChainHandle) -> dict[str, Any]:
    status, _h, body = chain.request("GET", "/openapi/v2", headers={"Accept": "application/json"})
    assert status == 200, body[:300]
    return json.loads(body)


def _v3_index(chain: ChainHandle) -> dict[str, Any]:
    status, _h, body = chain.request("GET", "/openapi/v3")
    assert status == 200, body[:300]
    return json.loads(body)["paths"]


def _words(text: str) -> str:
    """kubectl wraps descriptions: compare with whitespace collapsed."""
    return " ".join(text.split())


def _flunder_in_v2(chain: ChainHandle) -> bool:
    return "com.example.wardle.v1alpha1.Flunder" in _v2(chain)["definitions"]


@pytest.fixture(scope="module")
def wardle(chain: ChainHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    chain.kubectl("create", "namespace", NAMESPACE)
    backend = Backend(chain, tmp_path_factory.mktemp("wardle-openapi"), "v1alpha1", "api")
    backend.register(15)
    _wait("Available=True", lambda: backend.available() == "True")
    yield backend
    backend.stop()
    backend.unregister()


def test_kubectl_explain_reads_the_samples_openapi_v3(chain: ChainHandle, wardle: Backend) -> None:
    docs = Documents.build("v1alpha1")
    entry = _wait("the v3 index entry", lambda: _v3_index(chain).get(V3_KEY))
    assert entry == {"serverRelativeURL": f"/openapi/v3/{V3_KEY}?hash={docs.v3_hash}"}
    assert "api/v1" in _v3_index(chain)  # the members' entries are still there
    status, headers, body = chain.request("GET", entry["serverRelativeURL"])
    assert (status, body) == (200, docs.v3)  # proxied to the backend as kube does
    assert headers["etag"] == f'"{docs.v3_hash}"'

    out = chain.kubectl("explain", "flunders").stdout
    assert "KIND:       Flunder" in out and FLUNDER_DESCRIPTION in _words(out), out
    out = chain.kubectl("explain", "flunders.spec.reference").stdout
    assert REFERENCE_DESCRIPTION in _words(out) and "FIELD: reference <string>" in out, out


def test_kubectl_127_explains_from_the_merged_openapi_v2(chain: ChainHandle, wardle: Backend) -> None:
    _wait("the sample's definitions in /openapi/v2", lambda: _flunder_in_v2(chain))
    doc = _v2(chain)
    definitions, paths = doc["definitions"], doc["paths"]
    flunder = definitions["com.example.wardle.v1alpha1.Flunder"]
    # The sample's trimmed ObjectMeta conflicts with the built-in one: renamed, references follow.
    assert flunder["properties"]["metadata"]["$ref"] == f"#/definitions/{META}.ObjectMeta_v2"
    assert definitions[f"{META}.ObjectMeta_v2"]["description"] == "Trimmed ObjectMeta of the wardle sample."
    assert "uid" in definitions[f"{META}.ObjectMeta"]["properties"]
    assert "/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders/{name}" in paths
    # Only /apis/<group>/<version>/ paths are taken from the backend, and only what they use.
    assert "/apis/wardle.example.com/" not in paths and GROUP_ONLY not in definitions
    assert "/api/v1/namespaces/{namespace}/pods" in paths

    # kubectl 1.27 explains from OpenAPI v3 by default; plaintext-openapiv2 reads /openapi/v2 only.
    v2 = ("--output", "plaintext-openapiv2", "-v=6")
    result = chain.kubectl("explain", "flunders.spec.reference", *v2, version="1.27")
    assert REFERENCE_DESCRIPTION in _words(result.stdout), result.stdout
    assert "/openapi/v2" in result.stderr and "/openapi/v3" not in result.stderr
    out = chain.kubectl("explain", "flunders.metadata", *v2, version="1.27").stdout
    assert "Trimmed ObjectMeta of the wardle sample." in _words(out), out


def test_a_backend_serving_invalid_openapi_is_skipped(chain: ChainHandle, wardle: Backend,
                                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    broken = Backend(chain, tmp_path_factory.mktemp("wardle-broken"), "v1beta1", "broken", openapi="invalid")
    try:
        broken.register(10)
        _wait("the broken backend Available=True", lambda: broken.available() == "True")
        logs = (chain.chain.log_dir or chain.chain.data_dir / "logs")
        _wait("the logged download error", lambda: any(
            "'v1beta1.wardle.example.com' failed" in p.read_text(errors="replace") and "invalid JSON" in
            p.read_text(errors="replace") for p in logs.glob("aggregator*.log")))
        assert _flunder_in_v2(chain)
        assert not any(p.startswith("/apis/wardle.example.com/v1beta1/") for p in _v2(chain)["paths"])
        index = _v3_index(chain)
        assert V3_KEY in index and "apis/wardle.example.com/v1beta1" not in index
        status, _h, _b = chain.request("GET", "/openapi/v3/apis/wardle.example.com/v1beta1")
        assert status == 404
        # The API itself still works through the gateway.
        status, listed = chain.json("GET", f"/apis/wardle.example.com/v1beta1/namespaces/{NAMESPACE}/flunders")
        assert status == 200 and listed["kind"] == "FlunderList"
    finally:
        broken.stop()
        broken.unregister()


def test_an_unavailable_backend_keeps_its_last_document(chain: ChainHandle, wardle: Backend) -> None:
    _wait("the sample's definitions in /openapi/v2", lambda: _flunder_in_v2(chain))
    wardle.stop()
    chain.request("GET", f"/apis/wardle.example.com/v1alpha1/namespaces/{NAMESPACE}/flunders")  # recheck now
    _wait("Available=False", lambda: wardle.available() == "False")
    assert _flunder_in_v2(chain)  # kube keeps an APIService's last successful download
    entry = _v3_index(chain)[V3_KEY]
    status, _h, body = chain.request("GET", entry["serverRelativeURL"])
    assert (status, body) == (503, b"service unavailable\n")


def test_deleting_the_apiservice_takes_its_schema_away(chain: ChainHandle, wardle: Backend) -> None:
    wardle.unregister()
    _wait("the definitions to leave /openapi/v2", lambda: not _flunder_in_v2(chain), 10)
    doc = _v2(chain)
    assert f"{META}.ObjectMeta_v2" not in doc["definitions"]
    assert not any(p.startswith("/apis/wardle.example.com/") for p in doc["paths"])
    assert V3_KEY not in _v3_index(chain)
    for version, args in (("", ()), ("1.27", ("--output", "plaintext-openapiv2"))):
        result = chain.kubectl("explain", "flunders", *args, version=version, check=False)
        assert result.returncode != 0, result.stdout
