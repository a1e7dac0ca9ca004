"""docker-compose.yml, default profile: the stack comes up healthy, kubectl works through the
published gateway (kubectl 1.33's protobuf bodies included), backends are private, services run as
non-root and stop cleanly on SIGTERM, and data and credentials survive ``down`` + ``up``. Hardened
as a kubeadm cluster: etcd answers only its CA's client certificates, Secrets are stored encrypted,
RBAC decides, TokenRequest tokens authenticate, and a killed service is restarted by the engine."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
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


PKI = "/var/lib/kubechain/pki"


def etcdctl(stack: Stack, *args: str, cert: bool = True) -> tuple[int, str]:
    """etcdctl in the etcd container, with the services' etcd client certificate or none."""
    creds = [f"--cacert={PKI}/etcd-ca.crt"]
    if cert:
        creds += [f"--cert={PKI}/apiserver-etcd-client.crt", f"--key={PKI}/apiserver-etcd-client.key"]
    code, out = stack.container("etcd").exec_run(["/usr/local/bin/etcdctl", "--endpoints=https://127.0.0.1:2379",
                                                  "--dial-timeout=2s", "--command-timeout=3s", *creds, *args])
    return code, out.decode(errors="replace")


def assert_hardened(stack: Stack) -> None:
    # etcd: nothing without a client certificate of its CA, not over plain HTTP either.
    code, out = etcdctl(stack, "get", "/registry/namespaces/default", "--keys-only")
    assert code == 0 and out.strip() == "/registry/namespaces/default", out
    code, out = etcdctl(stack, "get", "/registry/namespaces/default", "--keys-only", cert=False)
    assert code != 0 and "/registry" not in out, out
    code, out = stack.container("etcd").exec_run(["/usr/local/bin/etcdctl", "--endpoints=http://127.0.0.1:2379",
                                                  "--dial-timeout=2s", "--command-timeout=3s", "get", "/", "--prefix"])
    assert code != 0, out

    # Secrets encrypted at rest with the certs job's aescbc key.
    stack.kubectl("create", "secret", "generic", "at-rest", "-n", "compose-test", "--from-literal=k=v")
    code, out = etcdctl(stack, "get", "/registry/secrets/compose-test/at-rest", "--print-value-only")
    assert code == 0 and out.startswith("k8s:enc:aescbc:v1:key1:"), out[:80]
    assert stack.kubectl("get", "secret", "at-rest", "-n", "compose-test", "-o",
                         "jsonpath={.data.k}").stdout == base64.b64encode(b"v").decode()

    # RBAC with kube's bootstrap policy: nobody but system:masters may do anything at first.
    assert stack.kubectl("auth", "can-i", "list", "pods", "-n", "compose-test").stdout.strip() == "yes"
    denied = stack.kubectl("auth", "can-i", "list", "pods", "-n", "compose-test", "--as=alice", check=False)
    assert denied.stdout.strip() == "no"
    view = stack.kubectl("get", "clusterrole", "view", "-o", "name").stdout.strip()
    assert view == "clusterrole.rbac.authorization.k8s.io/view"

    # TokenRequest: core-api signs, the gateway verifies with the shared key; RBAC then decides.
    stack.kubectl("create", "serviceaccount", "robot", "-n", "compose-test")
    token = stack.kubectl("create", "token", "robot", "-n", "compose-test").stdout.strip()
    assert token.count(".") == 2
    config = yaml.safe_load(stack.kubeconfig.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        ca = Path(tmp) / "ca.crt"
        ca.write_bytes(base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]))

        def as_robot(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["kubectl", "--kubeconfig=/dev/null", f"--server=https://127.0.0.1:{stack.port}",
                                   f"--certificate-authority={ca}", f"--token={token}", *args],
                                  capture_output=True, text=True, timeout=60)

        forbidden = as_robot("get", "configmaps", "-n", "compose-test")
        assert forbidden.returncode != 0 and (
            'User "system:serviceaccount:compose-test:robot" cannot list resource "configmaps"') in forbidden.stderr
        stack.kubectl("create", "rolebinding", "robot-view", "--clusterrole=view",
                      "--serviceaccount=compose-test:robot", "-n", "compose-test")
        allowed = as_robot("get", "configmap", "kept", "-n", "compose-test", "-o", "name")
        assert allowed.returncode == 0 and allowed.stdout.strip() == "configmap/kept", allowed.stderr
        bogus = as_robot("get", "configmaps", "-n", "compose-test", f"--token={token[:-4]}AAAA")
        assert bogus.returncode != 0 and "Unauthorized" in bogus.stderr


def assert_restarted_by_the_engine(stack: Stack, service: str, budget: float = 90) -> float:
    """SIGKILL the service's process from the host (not `docker kill`, which counts as stopped by
    hand): restart: unless-stopped brings it back, healthy again; the seconds that took."""
    container = stack.container(service)
    assert container.attrs["HostConfig"]["RestartPolicy"]["Name"] == "unless-stopped"
    before = container.attrs["RestartCount"]
    os.kill(container.attrs["State"]["Pid"], signal.SIGKILL)
    killed = time.monotonic()
    while time.monotonic() - killed < budget:
        time.sleep(0.5)
        container.reload()
        if container.attrs["RestartCount"] > before and container.attrs["State"].get("Health", {}).get(
                "Status") == "healthy":
            return time.monotonic() - killed
    raise AssertionError(f"{service} was not back and healthy {budget}s after SIGKILL: {container.attrs['State']}")


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
        assert_hardened(stack)
        for service in ("core-api", "etcd"):
            print(f"{service} killed: restarted and healthy in {assert_restarted_by_the_engine(stack, service):.1f}s")
        assert stack.kubectl("get", "configmap", "kept", "-n", "compose-test", "-o",
                             "jsonpath={.data.color}").stdout == "blue"
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
