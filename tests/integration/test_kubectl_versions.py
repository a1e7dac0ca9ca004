"""Every kubectl minor we claim to support (1.27 .. 1.33) against the session chain: the everyday
commands, each version with its own discovery cache and object names.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.procs import ChainHandle, kubectl_binary

pytestmark = pytest.mark.integration

MINORS = [f"1.{m}" for m in range(27, 34)]
SERVER_MINOR = "v1.33"

MANIFEST = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}-cm
data:
  colour: blue
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}-dep
  labels: {{app: {name}}}
spec:
  replicas: 1
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: web
        image: nginx:1.25
        envFrom:
        - configMapRef: {{name: {name}-cm}}
"""


def _installed(version: str) -> bool:
    try:
        kubectl_binary(version)
    except RuntimeError:
        return False
    return True


VERSIONS = [pytest.param(v, marks=pytest.mark.skipif(not _installed(v), reason=f"no kubectl.{v} installed"))
            for v in MINORS]


class Kubectl:
    """One kubectl minor against the chain, with a discovery cache of its own."""

    def __init__(self, chain: ChainHandle, version: str, cache_dir: Path) -> None:
        self.chain = chain
        self.version = version
        self.cache_dir = str(cache_dir)

    def run(self, *args: str, input: str | None = None, check: bool = True) -> tuple[int, str, str]:
        proc = self.chain.kubectl(*args, f"--cache-dir={self.cache_dir}", version=self.version, input=input,
                                  check=check)
        return proc.returncode, proc.stdout, proc.stderr

    def out(self, *args: str, input: str | None = None) -> str:
        return self.run(*args, input=input)[1]

    def get_json(self, *args: str) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.out("get", *args, "-o", "json"))
        return doc


@pytest.fixture(params=VERSIONS)
def kubectl(request: pytest.FixtureRequest, chain: ChainHandle, tmp_path: Path) -> Kubectl:
    return Kubectl(chain, request.param, tmp_path / "kube-cache")


def unique(kubectl: Kubectl, prefix: str) -> str:
    return f"{prefix}-{kubectl.version.replace('.', '')}"


def test_version_reports_client_and_server(kubectl: Kubectl) -> None:
    doc = json.loads(kubectl.out("version", "-o", "json"))
    assert doc["clientVersion"]["gitVersion"].startswith(f"v{kubectl.version}."), doc["clientVersion"]
    server = doc["serverVersion"]
    assert server["gitVersion"].startswith(SERVER_MINOR + "."), server
    assert server["major"] == "1" and server["minor"].startswith("33")


def test_api_resources_lists_deployments_with_short_name(kubectl: Kubectl) -> None:
    lines = kubectl.out("api-resources").splitlines()
    assert lines[0].split() == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    rows = {tuple(line.split()) for line in lines[1:]}
    assert ("deployments", "deploy", "apps/v1", "true", "Deployment") in rows
    assert ("configmaps", "cm", "v1", "true", "ConfigMap") in rows


def test_manifest_lifecycle(kubectl: Kubectl) -> None:
    name = unique(kubectl, "life")
    cm, dep = f"{name}-cm", f"{name}-dep"
    manifest = MANIFEST.format(name=name)

    out = kubectl.out("apply", "-f", "-", input=manifest)
    assert f"configmap/{cm} created" in out and f"deployment.apps/{dep} created" in out, out

    config = kubectl.get_json("configmap", cm)
    assert config["kind"] == "ConfigMap" and config["data"] == {"colour": "blue"}
    deployment = kubectl.get_json("deployment", dep)
    assert deployment["kind"] == "Deployment" and deployment["apiVersion"] == "apps/v1"
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["template"]["spec"]["containers"][0]["envFrom"] == [{"configMapRef": {"name": cm}}]

    out = kubectl.out("patch", "configmap", cm, "--type=merge", "-p", '{"data":{"colour":"green","size":"L"}}')
    assert f"configmap/{cm} patched" in out, out
    assert kubectl.get_json("configmap", cm)["data"] == {"colour": "green", "size": "L"}

    out = kubectl.out("label", "deployment", dep, "tier=frontend")
    assert f"deployment.apps/{dep} labeled" in out, out
    out = kubectl.out("scale", "deployment", dep, "--replicas=3")
    assert f"deployment.apps/{dep} scaled" in out, out
    deployment = kubectl.get_json("deploy", dep)
    assert deployment["metadata"]["labels"] == {"app": name, "tier": "frontend"}
    assert deployment["spec"]["replicas"] == 3

    table = kubectl.out("get", "deploy", dep).splitlines()
    assert table[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], table
    assert len(table) == 2 and table[1].split()[:2] == [dep, "0/3"], table

    explained = kubectl.out("explain", "deployment.spec.replicas")
    assert re.search(r"KIND:\s+Deployment\b", explained), explained
    # Older kubectl prints "VERSION: apps/v1"; explain from OpenAPI v3 prints GROUP and VERSION apart.
    assert re.search(r"VERSION:\s+apps/v1\b", explained) or (
        re.search(r"GROUP:\s+apps\n", explained) and re.search(r"VERSION:\s+v1\n", explained)), explained
    assert re.search(r"FIELD:\s+replicas\s+<integer>", explained), explained

    out = kubectl.out("delete", "-f", "-", input=manifest)
    assert f'configmap "{cm}" deleted' in out and f'deployment.apps "{dep}" deleted' in out, out
    for kind, obj_name, qualified in (("configmap", cm, "configmaps"), ("deployment", dep, "deployments.apps")):
        code, _out, err = kubectl.run("get", kind, obj_name, check=False)
        assert code != 0
        assert f'Error from server (NotFound): {qualified} "{obj_name}" not found' in err, err


def test_create_configmap_and_deployment_imperatively(kubectl: Kubectl) -> None:
    cm, dep = unique(kubectl, "lit"), unique(kubectl, "img")
    # kubectl 1.32+ sends this body as protobuf.
    out = kubectl.out("create", "configmap", cm, "--from-literal=greeting=hello", "--from-literal=n=1")
    assert f"configmap/{cm} created" in out, out
    config = kubectl.get_json("configmap", cm)
    assert config["data"] == {"greeting": "hello", "n": "1"}
    assert config["metadata"]["namespace"] == "default"

    out = kubectl.out("create", "deployment", dep, "--image=nginx:1.25", "--replicas=2")
    assert f"deployment.apps/{dep} created" in out, out
    deployment = kubectl.get_json("deployment", dep)
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["selector"] == {"matchLabels": {"app": dep}}
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("nginx", "nginx:1.25")]

    kubectl.out("delete", "configmap", cm)
    kubectl.out("delete", "deployment", dep)
    assert kubectl.run("get", "configmap", cm, check=False)[0] != 0


def test_server_defaults_an_imperatively_created_deployment(chain: ChainHandle) -> None:
    name = "defaults-check"
    chain.kubectl("create", "deployment", name, "--image=nginx:1.25")
    try:
        spec = json.loads(chain.kubectl("get", "deployment", name, "-o", "json").stdout)["spec"]
    finally:
        chain.kubectl("delete", "deployment", name, "--ignore-not-found")
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert spec["revisionHistoryLimit"] == 10 and spec["progressDeadlineSeconds"] == 600
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Always" and pod["dnsPolicy"] == "ClusterFirst"
    assert pod["terminationGracePeriodSeconds"] == 30 and pod["schedulerName"] == "default-scheduler"
    container = pod["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "File"
