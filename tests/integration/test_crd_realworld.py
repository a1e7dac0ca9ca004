"""Real-world CRD shapes (tests/data/crds) and CEL rules through the gateway with kubectl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.procs import ChainHandle
from test_crds import establish

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "data" / "crds"


def test_cert_manager_certificate(chain: ChainHandle) -> None:
    ns = "crd-cm"
    chain.kubectl("create", "namespace", ns)
    establish(chain, (DATA / "certificates.cert-manager.io.yaml").read_text(), "certificates.cert-manager.io")
    cert = {"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": "web", "namespace": ns},
            "spec": {"secretName": "web-tls", "dnsNames": ["example.com"], "issuerRef": {"name": "ca"},
                     "privateKey": {"algorithm": "ECDSA"}}}
    chain.kubectl("apply", "-f", "-", input=json.dumps(cert))
    chain.kubectl("patch", "certificate", "web", "-n", ns, "--subresource=status", "--type=merge", "-p",
                  json.dumps({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}))
    rows = chain.kubectl("get", "cert", "-n", ns).stdout.splitlines()
    assert rows[0].split() == ["NAME", "READY", "SECRET", "AGE"]
    assert rows[1].split()[:3] == ["web", "True", "web-tls"]
    assert "ISSUER" in chain.kubectl("get", "certs", "-n", ns, "-o", "wide").stdout.splitlines()[0]
    assert "cert-manager" not in chain.kubectl("get", "all", "-n", ns, "-o", "name").stdout
    assert "certificate.cert-manager.io/web" in chain.kubectl("get", "cert-manager", "-n", ns, "-o", "name").stdout
    bad = dict(cert, metadata={"name": "bad", "namespace": ns},
               spec={"issuerRef": {}, "privateKey": {"algorithm": "DSA"}})
    out = chain.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert out.returncode != 0
    assert "spec.secretName: Required value" in out.stderr
    assert "spec.issuerRef.name: Required value" in out.stderr
    assert 'spec.privateKey.algorithm: Unsupported value: "DSA"' in out.stderr
    explain = chain.kubectl("explain", "certificate.spec.privateKey").stdout
    assert "algorithm" in explain and "rotationPolicy" in explain
    chain.kubectl("delete", "crd", "certificates.cert-manager.io")
    gone = chain.kubectl("get", "certificates.cert-manager.io", "-n", ns, check=False)
    assert gone.returncode != 0


def test_prometheus_servicemonitor_and_argo_application(chain: ChainHandle) -> None:
    ns = "crd-ops"
    chain.kubectl("create", "namespace", ns)
    establish(chain, (DATA / "servicemonitors.monitoring.coreos.com.yaml").read_text(),
              "servicemonitors.monitoring.coreos.com")
    establish(chain, (DATA / "applications.argoproj.io.yaml").read_text(), "applications.argoproj.io")
    smon = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": {"name": "api", "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": "api"}}, "endpoints": [{"port": "http", "interval": "30s"}]}}
    chain.kubectl("apply", "-f", "-", input=json.dumps(smon))
    got = json.loads(chain.kubectl("get", "smon", "api", "-n", ns, "-o", "json").stdout)
    assert got["spec"]["endpoints"][0]["port"] == "http"
    missing = dict(smon, metadata={"name": "bad", "namespace": ns}, spec={"endpoints": []})
    out = chain.kubectl("create", "-f", "-", input=json.dumps(missing), check=False)
    assert out.returncode != 0 and "spec.selector: Required value" in out.stderr
    app = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "guestbook",
                                                                                      "namespace": ns},
           "spec": {"project": "default", "destination": {"server": "https://kubernetes.default.svc",
                                                         "namespace": "guestbook"},
                    "source": {"repoURL": "https://github.com/argoproj/argocd-example-apps", "path": "guestbook",
                               "targetRevision": "HEAD"}},
           "status": {"sync": {"status": "Synced", "revision": "abc123"}, "health": {"status": "Healthy"}}}
    chain.kubectl("apply", "-f", "-", input=json.dumps(app))
    rows = chain.kubectl("get", "applications.argoproj.io", "-n", ns).stdout.splitlines()
    assert rows[0].split() == ["NAME", "SYNC", "STATUS", "HEALTH", "STATUS"]
    assert rows[1].split() == ["guestbook", "Synced", "Healthy"]
    assert "abc123" in chain.kubectl("get", "applications.argoproj.io", "-n", ns, "-o", "wide").stdout
    api = chain.kubectl("api-resources", "--api-group", "argoproj.io").stdout
    assert "applications" in api and "app,apps" in api
    chain.kubectl("delete", "crd", "servicemonitors.monitoring.coreos.com", "applications.argoproj.io")


@pytest.mark.parametrize("name", sorted(p.name for p in (DATA / "bad").glob("*.yaml")))
def test_bad_crds_are_rejected(chain: ChainHandle, name: str) -> None:
    manifest = (DATA / "bad" / name).read_text()
    out = chain.kubectl("apply", "-f", "-", input=manifest, check=False)
    assert out.returncode != 0 and "is invalid" in out.stderr, out.stderr
    crd_name = yaml.safe_load(manifest)["metadata"]["name"]
    assert chain.kubectl("get", "crd", crd_name, check=False).returncode != 0


CEL_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: scalers.it-cel.example.com}
spec:
  group: it-cel.example.com
  scope: Namespaced
  names: {plural: scalers, kind: Scaler}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: self.minReplicas <= self.maxReplicas
              message: minReplicas must not exceed maxReplicas
            - rule: self.mode == oldSelf.mode
              message: mode is immutable
            properties:
              minReplicas: {type: integer}
              maxReplicas: {type: integer}
              mode: {type: string}
"""


def test_cel_rules_and_transition_rules(chain: ChainHandle) -> None:
    ns = "crd-cel"
    chain.kubectl("create", "namespace", ns)
    establish(chain, CEL_CRD, "scalers.it-cel.example.com")
    base = f"/apis/it-cel.example.com/v1/namespaces/{ns}/scalers"
    obj: dict[str, Any] = {"apiVersion": "it-cel.example.com/v1", "kind": "Scaler", "metadata": {"name": "s"},
           "spec": {"minReplicas": 5, "maxReplicas": 2, "mode": "fast"}}
    status, body = chain.json("POST", base, obj)
    assert status == 422
    assert body["details"]["causes"] == [{"reason": "FieldValueInvalid", "message":
                                          "Invalid value: \"object\": minReplicas must not exceed maxReplicas",
                                          "field": "spec"}]
    obj["spec"]["maxReplicas"] = 9
    status, _ = chain.json("POST", base, obj)
    assert status == 201
    status, body = chain.json("PATCH", base + "/s", {"spec": {"mode": "slow"}},
                              headers={"Content-Type": "application/merge-patch+json"})
    assert status == 422 and "mode is immutable" in body["message"]
    # A CRD whose rule does not compile is rejected when written.
    broken = CEL_CRD.replace("scalers", "brokens").replace("Scaler", "Broken").replace(
        "self.minReplicas <= self.maxReplicas", "self.minReplicas <=")
    out = chain.kubectl("apply", "-f", "-", input=broken, check=False)
    assert out.returncode != 0 and "x-kubernetes-validations[0].rule" in out.stderr
    chain.kubectl("delete", "crd", "scalers.it-cel.example.com")
