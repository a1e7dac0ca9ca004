"""APIService aggregation through the real chain: a sample aggregated API server behind the gateway.

The sample (tests/support/sample_apiserver.py) runs as its own process with its own test CA and is
registered the way a user would: an ExternalName Service to localhost and an APIService, through
kubectl. Checks: it becomes Available; kubectl uses it through the gateway as the right user; a
client's own X-Remote-User never reaches it; stopped, it turns Available=False and requests get
kube's 503; deleted, its group leaves discovery. Also: built-in APIServices are registered, and
invalid APIServices are rejected with kube-aggregator's messages.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.procs import ChainHandle
from support.waiting import eventually

from kubechain_cli.chain import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "wardle-it"
APISERVICE = "v1alpha1.wardle.example.com"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _wait(what: str, probe: Callable[[], Any], timeout: float = 30.0) -> Any:
    return eventually(probe, timeout, what)


class Sample:
    def __init__(self, chain: ChainHandle, cert_dir: Path) -> None:
        self.port = free_port()
        self.cert_dir = cert_dir
        self.chain = chain
        self.start()

    def start(self) -> None:
        """Start (or start again, on the same port with the same certificates)."""
        self.log = open(self.cert_dir.parent / "sample.log", "ab")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "libs" / "genericapi"), str(ROOT / "tests")]))
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "support" / "sample_apiserver.py"), "--port", str(self.port),
             "--cert-dir", str(self.cert_dir), "--service", "api", "--namespace", NAMESPACE,
             "--requestheader-ca", self.chain.chain.pki.ca], stdout=self.log, stderr=subprocess.STDOUT, env=env)
        _wait("the sample server's certificate", lambda: (self.cert_dir / "tls.key").exists(), 20)

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode((self.cert_dir / "ca.crt").read_bytes()).decode()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.log.close()


def _apiservice(chain: ChainHandle, name: str = APISERVICE) -> dict[str, Any] | None:
    status, body = chain.json("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{name}")
    return body if status == 200 else None


def _available(chain: ChainHandle) -> dict[str, Any]:
    obj = _apiservice(chain) or {}
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Available"), {})


def _groups(chain: ChainHandle, aggregated: bool) -> list[str]:
    headers = {"Accept": AGGREGATED} if aggregated else {}
    _s, _h, data = chain.request("GET", "/apis", headers=headers)
    doc = json.loads(data)
    if aggregated:
        return [i["metadata"]["name"] for i in doc["items"]]
    return [g["name"] for g in doc["groups"]]


@pytest.fixture(scope="module")
def sample(chain: ChainHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sample]:
    server = Sample(chain, tmp_path_factory.mktemp("wardle") / "certs")
    chain.kubectl("create", "namespace", NAMESPACE)
    manifest = f"""
apiVersion: v1
kind: Service
metadata: {{name: api, namespace: {NAMESPACE}}}
spec: {{type: ExternalName, externalName: localhost, ports: [{{port: {server.port}}}]}}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: {APISERVICE}}}
spec:
  group: wardle.example.com
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  caBundle: {server.ca_bundle}
  service: {{name: api, namespace: {NAMESPACE}, port: {server.port}}}
"""
    chain.kubectl("apply", "-f", "-", input=manifest)
    yield server
    server.stop()
    chain.kubectl("delete", "apiservice", APISERVICE, "--ignore-not-found", check=False)


def test_builtin_group_versions_are_registered_as_local_apiservices(chain: ChainHandle) -> None:
    apps = _wait("v1.apps", lambda: _apiservice(chain, "v1.apps"))
    assert apps["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"] == "onstart"
    assert apps["spec"] == {"service": None, "group": "apps", "version": "v1", "groupPriorityMinimum": 17800,
                            "versionPriority": 15}
    cond = apps["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == \
        ("Available", "True", "Local", "Local APIServices are always available")
    core = _wait("v1.", lambda: _apiservice(chain, "v1."))
    assert core["spec"]["group"] == "" and core["spec"]["groupPriorityMinimum"] == 18000
    out = chain.kubectl("get", "apiservices", "v1.apps").stdout.splitlines()
    assert out[0].split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    assert out[1].split()[:3] == ["v1.apps", "Local", "True"]
    assert _groups(chain, aggregated=False)[0] == "apiregistration.k8s.io"
    assert _groups(chain, aggregated=True)[0] == "apiregistration.k8s.io"


def test_the_sample_becomes_available_and_serves_through_the_gateway(chain: ChainHandle, sample: Sample) -> None:
    cond = _wait("Available=True", lambda: (c := _available(chain)).get("status") == "True" and c)
    assert (cond["reason"], cond["message"]) == ("Passed", "all checks passed")
    row = chain.kubectl("get", "apiservice", APISERVICE, "--no-headers").stdout.split()
    assert row[:3] == [APISERVICE, f"{NAMESPACE}/api", "True"]
    flunder = ("apiVersion: wardle.example.com/v1alpha1\nkind: Flunder\n"
               f"metadata: {{name: one, namespace: {NAMESPACE}}}\n")
    chain.kubectl("create", "-f", "-", input=flunder)
    listed = chain.kubectl("get", "flunders", "-n", NAMESPACE, "-o", "json").stdout
    [item] = json.loads(listed)["items"]
    annotations = item["metadata"]["annotations"]
    assert annotations["wardle.example.com/created-by"] == "kubernetes-admin"
    assert json.loads(annotations["wardle.example.com/remote-user-headers"]) == ["kubernetes-admin"]
    assert "flunders" in chain.kubectl("api-resources", "--api-group", "wardle.example.com").stdout
    assert "wardle.example.com" in _groups(chain, aggregated=False)
    assert "wardle.example.com" in _groups(chain, aggregated=True)
    status, group = chain.json("GET", "/apis/wardle.example.com")
    assert status == 200 and group["preferredVersion"]["version"] == "v1alpha1"


def test_a_client_sent_x_remote_user_never_reaches_the_backend(chain: ChainHandle, sample: Sample) -> None:
    _wait("Available=True", lambda: _available(chain).get("status") == "True")
    body = {"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder", "metadata": {"name": "forged"}}
    status, created = chain.json("POST", f"/apis/wardle.example.com/v1alpha1/namespaces/{NAMESPACE}/flunders", body,
                                 headers={"X-Remote-User": "mallory", "X-Remote-Group": "system:masters"})
    assert status == 201, created
    annotations = created["metadata"]["annotations"]
    assert annotations["wardle.example.com/created-by"] == "kubernetes-admin"
    assert json.loads(annotations["wardle.example.com/remote-user-headers"]) == ["kubernetes-admin"]


def test_a_stopped_backend_turns_unavailable_and_requests_get_503(chain: ChainHandle, sample: Sample) -> None:
    _wait("Available=True", lambda: _available(chain).get("status") == "True")
    sample.stop()
    path = f"/apis/wardle.example.com/v1alpha1/namespaces/{NAMESPACE}/flunders"
    chain.request("GET", path)  # a failed proxied request triggers a recheck at once
    cond = _wait("Available=False", lambda: (c := _available(chain)).get("status") == "False" and c)
    assert cond["reason"] == "FailedDiscoveryCheck"
    assert cond["message"].startswith(f"failing or missing response from https://localhost:{sample.port}"
                                      "/apis/wardle.example.com/v1alpha1: ")
    assert "connection refused" in cond["message"]
    status, headers, data = chain.request("GET", path)
    assert (status, data) == (503, b"service unavailable\n")
    assert headers["content-type"].startswith("text/plain")
    result = chain.kubectl("get", "flunders", "-n", NAMESPACE, check=False)
    assert result.returncode != 0 and "ServiceUnavailable" in result.stderr
    row = chain.kubectl("get", "apiservice", APISERVICE, "--no-headers").stdout.split()
    assert row[2:4] == ["False", "(FailedDiscoveryCheck)"]


def test_a_recovered_backend_turns_available_again_within_seconds(chain: ChainHandle, sample: Sample) -> None:
    if sample.proc.poll() is None:  # run alone: take it down first
        sample.stop()
        _wait("Available=False", lambda: _available(chain).get("status") == "False")
    started = time.monotonic()
    sample.start()
    cond = _wait("Available=True again", lambda: (c := _available(chain)).get("status") == "True" and c, 20)
    took = time.monotonic() - started
    assert (cond["reason"], cond["message"]) == ("Passed", "all checks passed")
    assert took < 15, f"recovery noticed after {took:.1f}s (recheck interval 10 s)"
    chain.kubectl("get", "flunders", "-n", NAMESPACE)


def test_a_missing_service_is_reported(chain: ChainHandle) -> None:
    name = "v1.nosvc.example.com"
    obj = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": name},
           "spec": {"group": "nosvc.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
                    "insecureSkipTLSVerify": True, "service": {"namespace": NAMESPACE, "name": "absent"}}}
    status, created = chain.json("POST", "/apis/apiregistration.k8s.io/v1/apiservices", obj)
    assert status == 201, created
    assert created["spec"]["service"]["port"] == 443
    try:
        cond = _wait("ServiceNotFound", lambda: next(
            (c for c in ((_apiservice(chain, name) or {}).get("status") or {}).get("conditions") or []
             if c.get("reason") == "ServiceNotFound"), None))
        assert cond["status"] == "False"
        assert cond["message"] == f'service/absent in "{NAMESPACE}" is not present'
        status, _h, data = chain.request("GET", "/apis/nosvc.example.com/v1/things")
        assert (status, data) == (503, b"service unavailable\n")
    finally:
        chain.request("DELETE", f"/apis/apiregistration.k8s.io/v1/apiservices/{name}")


def test_deleting_the_apiservice_takes_its_group_out_of_discovery(chain: ChainHandle, sample: Sample) -> None:
    assert "wardle.example.com" in _groups(chain, aggregated=False)
    chain.kubectl("delete", "apiservice", APISERVICE)
    _wait("the group to leave /apis", lambda: "wardle.example.com" not in _groups(chain, aggregated=False))
    _wait("the group to leave aggregated /apis", lambda: "wardle.example.com" not in _groups(chain, aggregated=True))
    status, _body = chain.json("GET", "/apis/wardle.example.com")
    assert status == 404


@pytest.mark.parametrize(("spec", "name", "causes"), [
    ({"group": "right.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10},
     "v1.wrong.example.com",
     [("metadata.name", 'Invalid value: "v1.wrong.example.com": must be `spec.version+"."+spec.group`: '
       '"v1.right.example.com"')]),
    ({"group": "prio.example.com", "version": "v1", "groupPriorityMinimum": 0, "versionPriority": 1001},
     "v1.prio.example.com",
     [("spec.groupPriorityMinimum", "Invalid value: 0: must be positive and less than 20000"),
      ("spec.versionPriority", "Invalid value: 1001: must be positive and less than 1000")]),
    ({"group": "tls.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
      "insecureSkipTLSVerify": True, "caBundle": base64.b64encode(b"abc").decode(),
      "service": {"namespace": "default", "name": "svc"}},
     "v1.tls.example.com",
     [("spec.insecureSkipTLSVerify", "Invalid value: true: may not be true if caBundle is present")]),
    ({"group": "local.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
      "insecureSkipTLSVerify": True},
     "v1.local.example.com",
     [("spec.insecureSkipTLSVerify", "Invalid value: true: local APIServices may not have insecureSkipTLSVerify")]),
    ({"group": "", "version": "v2", "groupPriorityMinimum": 100, "versionPriority": 10}, "v2.",
     [("spec.group", "Required value: only v1 may have an empty group and it better be legacy kube")]),
])
def test_invalid_apiservices_are_rejected(chain: ChainHandle, spec: dict[str, Any], name: str,
                                          causes: list[tuple[str, str]]) -> None:
    obj = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": name}, "spec": spec}
    status, body = chain.json("POST", "/apis/apiregistration.k8s.io/v1/apiservices", obj)
    assert status == 422, body
    assert body["reason"] == "Invalid"
    assert body["details"] == {"name": name, "group": "apiregistration.k8s.io", "kind": "APIService",
                               "causes": body["details"]["causes"]}
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == causes
    assert body["message"].startswith(f'APIService.apiregistration.k8s.io "{name}" is invalid: ')


def test_kubectl_reports_an_invalid_apiservice(chain: ChainHandle) -> None:
    manifest = ("apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: v1.bad.example.com}\n"
                "spec: {group: other.example.com, version: v1, groupPriorityMinimum: 100, versionPriority: 10}\n")
    result = chain.kubectl("create", "-f", "-", input=manifest, check=False)
    assert result.returncode != 0
    assert 'The APIService "v1.bad.example.com" is invalid: metadata.name: Invalid value: "v1.bad.example.com": ' \
           'must be `spec.version+"."+spec.group`: "v1.other.example.com"' in result.stderr
