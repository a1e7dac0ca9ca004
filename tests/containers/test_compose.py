"""docker-compose.yml, default profile: the stack comes up healthy, kubectl works through the
published gateway (kubectl 1.33's protobuf bodies included), backends are private, services run as
non-root and stop cleanly on SIGTERM, and data and credentials survive ``down`` + ``up``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from compose_stack import Engine, Gateway, Stack
from genericapi import pinned_kubectl

pytestmark = pytest.mark.containers

CONFIGMAP = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: kept
  namespace: compose-test
data:
  color: blue
"""


def assert_protobuf_bodies_work(stack: Stack) -> None:
    """kubectl 1.33 sends built-in kinds as protobuf: the images decode them (201, not 415) with the
    descriptor set taken from the pinned kubectl at build time, never from the build host (the build
    context has no generated/), and carry no kubectl binary."""
    kubectl = Path(os.path.realpath(shutil.which("kubectl") or "kubectl")).parent / "kubectl.1.33"
    if not kubectl.is_file():
        pytest.fail(f"no {kubectl}: the protobuf check needs kubectl 1.33")
    created = subprocess.run([str(kubectl), "create", "configmap", "protobuf-body", "-n", "compose-test",
                              "--from-literal=a=b", "-v=8"], capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, KUBECONFIG=str(stack.kubeconfig)))
    assert "Content-Type: application/vnd.kubernetes.protobuf" in created.stderr, created.stderr[-3000:]
    assert '"Response" status="201 Created"' in created.stderr, created.stderr[-3000:]
    assert created.returncode == 0 and created.stdout.strip() == "configmap/protobuf-body created"
    assert stack.kubectl("get", "configmap", "protobuf-body", "-n", "compose-test", "-o",
                         "jsonpath={.data.a}").stdout == "b"
    probe = ("from genericapi.apimachinery import k8sproto_descriptors as d; "
             "source = d.descriptor_set_path().with_name('k8s_descriptors.source'); "
             "print(d.is_bundled(), source.read_text().splitlines()[1])")
    for service in ("core-api", "extensions-api", "aggregator"):
        code, out = stack.container(service).exec_run(["python", "-c", probe])
        assert code == 0 and out.decode().strip() == f"True {pinned_kubectl.description()}", (service, out)
        code, out = stack.container(service).exec_run(["find", "/opt", "/usr", "-name", "kubectl*", "-type", "f"])
        assert code == 0 and not out.strip(), (service, out)


@pytest.mark.parametrize("compose", ["v2", "v1"])
def test_compose_stack_serves_kubectl_and_keeps_data(engine: Engine, compose: str) -> None:
    """The same file with both compose CLIs: `docker compose` (v2) and Debian's docker-compose 1.29."""
    if compose not in engine.composes:
        pytest.skip(f"no compose {compose} here (have: {', '.join(engine.composes)}); `./dev containers` "
                    "fetches v2 when it can")
    stack = engine.stack("default", compose=compose)
    try:
        seconds = stack.up()
        print(f"docker compose up -d: healthy in {seconds:.1f}s")
        assert seconds < 60, f"the stack took {seconds:.1f}s to become healthy"
        for service in ("etcd", "core-api", "extensions-api", "aggregator"):
            state = stack.container(service).attrs["State"]
            assert state["Health"]["Status"] == "healthy", (service, state)
        assert stack.container("certs").attrs["State"]["ExitCode"] == 0

        # Only the gateway is published.
        for service in ("core-api", "extensions-api", "etcd"):
            bindings = stack.container(service).attrs["HostConfig"]["PortBindings"] or {}
            assert not bindings, (service, bindings)
        published = stack.container("aggregator").attrs["HostConfig"]["PortBindings"]
        assert published == {"6443/tcp": [{"HostIp": "", "HostPort": str(stack.port)}]}

        # Non-root in every service container.
        for service in ("core-api", "extensions-api", "aggregator"):
            code, out = stack.container(service).exec_run(["id", "-u"])
            assert code == 0 and out.decode().strip() == "10001", (service, out)

        config = yaml.safe_load(stack.kubeconfig.read_text())
        assert config["clusters"][0]["cluster"]["server"] == f"https://127.0.0.1:{stack.port}"
        assert {n.split()[0] for n in stack.kubectl("get", "ns", "-o", "name").stdout.split()} >= {
            "namespace/default", "namespace/kube-system"}
        stack.kubectl("create", "namespace", "compose-test")
        assert_protobuf_bodies_work(stack)
        stack.kubectl("apply", "-f", "-", input=CONFIGMAP)
        stack.kubectl("create", "deployment", "web", "--image=nginx:1.25", "--replicas=2", "-n", "compose-test")
        stack.kubectl("scale", "deployment", "web", "--replicas=3", "-n", "compose-test")
        assert stack.kubectl("get", "deployment", "web", "-n", "compose-test", "-o",
                             "jsonpath={.spec.replicas}").stdout == "3"
        # A bad object is still rejected as kube-apiserver does (through the container chain).
        bad = stack.kubectl("create", "configmap", "Bad_Name", "-n", "compose-test", check=False)
        assert bad.returncode != 0 and "Invalid value" in bad.stderr
        # CRDs reach extensions-api (the last link) through core-api's delegation.
        crd = stack.kubectl("get", "crd", "-o", "json")
        assert json.loads(crd.stdout)["kind"] == "List"
        gateway = Gateway(stack.kubeconfig, stack.port)
        status, missing = gateway.request("GET", "/apis/example.com/v1/widgets")
        assert status == 404 and missing["reason"] == "NotFound"
        ca_before = config["clusters"][0]["cluster"]["certificate-authority-data"]

        # SIGTERM: every service stops cleanly (exit 0) within compose's grace period.
        stack.run("stop", timeout=180)
        for service in ("core-api", "extensions-api", "aggregator"):
            state = stack.container(service).attrs["State"]
            assert state["ExitCode"] == 0 and not state["OOMKilled"], (service, state)

        stack.run("down")
        stack.up()
        config = yaml.safe_load(stack.kubeconfig.read_text())
        assert config["clusters"][0]["cluster"]["certificate-authority-data"] == ca_before, "the CA was replaced"
        out = stack.kubectl("get", "configmap", "kept", "-n", "compose-test", "-o", "jsonpath={.data.color}")
        assert out.stdout == "blue"
        assert stack.kubectl("get", "deployment", "web", "-n", "compose-test", "-o",
                             "jsonpath={.spec.replicas}").stdout == "3"
    except Exception:
        print(stack.logs())
        raise
    finally:
        stack.destroy()
