"""kubectl against the real chain, as a user drives it (oldest and newest supported kubectl)."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
import yaml
from support.procs import ChainHandle, kubectl_binary

pytestmark = pytest.mark.integration

VERSIONS = ["1.27", "1.33"]

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels: {{app: {name}}}
spec:
  replicas: 2
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: web
        image: {image}
        ports:
        - containerPort: 80
        env:
        - {{name: A, value: "1"}}
      - name: sidecar
        image: busybox:1.36
"""


def deployment(name: str, image: str = "nginx:1.25") -> str:
    return DEPLOYMENT.format(name=name, image=image)


def get_json(chain: ChainHandle, *args: str, version: str = "") -> dict:  # type: ignore[type-arg]
    return json.loads(chain.kubectl("get", *args, "-o", "json", version=version).stdout)


@pytest.mark.parametrize("version", VERSIONS)
def test_apply_get_diff_and_reapply(chain: ChainHandle, version: str) -> None:
    name = f"apply-{version.replace('.', '')}"
    out = chain.kubectl("apply", "-f", "-", input=deployment(name), version=version)
    assert f"deployment.apps/{name} created" in out.stdout
    obj = get_json(chain, "deployment", name, version=version)
    assert obj["metadata"]["generation"] == 1
    assert "kubectl.kubernetes.io/last-applied-configuration" in obj["metadata"]["annotations"]
    # diff shows nothing for the same manifest, a change for a new image (exit code 1).
    same = chain.kubectl("diff", "-f", "-", input=deployment(name), version=version, check=False)
    assert same.returncode == 0, same.stderr
    changed = chain.kubectl("diff", "-f", "-", input=deployment(name, "nginx:1.26"), version=version,
                            check=False)
    assert changed.returncode == 1 and "nginx:1.26" in changed.stdout
    chain.kubectl("apply", "-f", "-", input=deployment(name, "nginx:1.26"), version=version)
    obj = get_json(chain, "deployment", name, version=version)
    containers = obj["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["web", "sidecar"]  # merged by name, order kept
    assert containers[0]["image"] == "nginx:1.26" and containers[0]["env"] == [{"name": "A", "value": "1"}]
    assert obj["metadata"]["generation"] == 2


@pytest.mark.parametrize("version", VERSIONS)
def test_label_scale_rollout_restart_delete(chain: ChainHandle, version: str) -> None:
    name = f"ops-{version.replace('.', '')}"
    chain.kubectl("apply", "-f", "-", input=deployment(name), version=version)
    chain.kubectl("label", "deployment", name, "tier=frontend", version=version)
    chain.kubectl("scale", "deployment", name, "--replicas=5", version=version)
    chain.kubectl("rollout", "restart", "deployment", name, version=version)
    obj = get_json(chain, "deployment", name, version=version)
    assert obj["metadata"]["labels"]["tier"] == "frontend"
    assert obj["spec"]["replicas"] == 5
    assert "kubectl.kubernetes.io/restartedAt" in obj["spec"]["template"]["metadata"]["annotations"]
    chain.kubectl("label", "deployment", name, "tier-", version=version)
    assert "tier" not in get_json(chain, "deployment", name, version=version)["metadata"]["labels"]
    chain.kubectl("delete", "deployment", name, version=version)
    gone = chain.kubectl("get", "deployment", name, version=version, check=False)
    assert gone.returncode != 0
    assert f'deployments.apps "{name}" not found' in gone.stderr


@pytest.mark.parametrize("version", VERSIONS)
def test_edit_with_an_editor(chain: ChainHandle, version: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    name = f"edit-{version.replace('.', '')}"
    chain.kubectl("apply", "-f", "-", input=f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
                  "data:\n  color: blue\n", version=version)
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/color: blue/color: green/' \"$1\"\n")
    editor.chmod(0o755)
    env = dict(os.environ, KUBECONFIG=chain.kubeconfig, KUBE_EDITOR=str(editor))
    proc = subprocess.run([kubectl_binary(version), "edit", "configmap", name], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert get_json(chain, "configmap", name)["data"] == {"color": "green"}


def test_get_prints_server_side_tables(chain: ChainHandle) -> None:
    out = chain.kubectl("get", "namespaces").stdout.splitlines()
    assert out[0].split() == ["NAME", "STATUS", "AGE"]
    assert any(line.split()[:2] == ["kube-system", "Active"] for line in out[1:])
    svc = chain.kubectl("get", "svc", "kubernetes", "-n", "default").stdout.splitlines()
    assert svc[0].split()[:5] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)"]
    assert svc[1].split()[:5] == ["kubernetes", "ClusterIP", "10.0.0.1", "<none>", "443/TCP"]


@pytest.mark.parametrize("version", VERSIONS)
def test_explain_and_api_resources(chain: ChainHandle, version: str) -> None:
    explain = chain.kubectl("explain", "deployment.spec.strategy", version=version).stdout
    assert "DeploymentStrategy" in explain and "rollingUpdate" in explain
    resources = chain.kubectl("api-resources", version=version).stdout
    rows = {line.split()[0]: line.split() for line in resources.splitlines()[1:]}
    assert rows["deployments"][1] == "deploy" and rows["deployments"][-1] == "Deployment"
    assert rows["namespaces"][-2:] == ["false", "Namespace"]
    assert "clusterroles" in rows and "leases" in rows


def test_get_all_uses_categories(chain: ChainHandle) -> None:
    chain.kubectl("apply", "-f", "-", input=deployment("allcat"))
    out = chain.kubectl("get", "all").stdout
    assert "service/kubernetes" in out and "deployment.apps/allcat" in out


def test_patch_types(chain: ChainHandle) -> None:
    chain.kubectl("apply", "-f", "-", input=deployment("patchy"))
    chain.kubectl("patch", "deployment", "patchy", "--type=strategic", "-p",
                  '{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:2"}]}}}}')
    chain.kubectl("patch", "deployment", "patchy", "--type=merge", "-p", '{"metadata":{"labels":{"m":"1"}}}')
    chain.kubectl("patch", "deployment", "patchy", "--type=json", "-p",
                  '[{"op":"replace","path":"/spec/replicas","value":4}]')
    obj = get_json(chain, "deployment", "patchy")
    assert [c["image"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["nginx:2", "busybox:1.36"]
    assert obj["metadata"]["labels"]["m"] == "1" and obj["spec"]["replicas"] == 4
    bad = chain.kubectl("patch", "deployment", "patchy", "--type=json", "-p",
                        '[{"op":"test","path":"/spec/replicas","value":99}]', check=False)
    assert bad.returncode != 0
    bad_replicas = chain.kubectl("patch", "deployment", "patchy", "--type=merge", "-p",
                                 '{"spec":{"replicas":"many"}}', check=False)
    assert bad_replicas.returncode != 0 and "cannot unmarshal string" in bad_replicas.stderr
    assert get_json(chain, "deployment", "patchy")["spec"]["replicas"] == 4  # nothing bad was stored


def test_watch_streams_changes(chain: ChainHandle) -> None:
    env = dict(os.environ, KUBECONFIG=chain.kubeconfig)
    chain.kubectl("create", "namespace", "watched")
    proc = subprocess.Popen([kubectl_binary(), "get", "configmaps", "-n", "watched", "-w", "-o", "name"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        for i in range(3):
            chain.kubectl("create", "configmap", f"w{i}", "-n", "watched", "--from-literal=a=b", version="1.31")
        deadline = time.monotonic() + 10
        seen: list[str] = []
        assert proc.stdout is not None
        while len(seen) < 3 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            # The root-CA publisher adds kube-root-ca.crt to every new namespace, as in a real cluster.
            if line.strip() and line.strip() != "configmap/kube-root-ca.crt":
                seen.append(line.strip())
        assert seen == [f"configmap/w{i}" for i in range(3)]
    finally:
        proc.terminate()
        proc.wait(5)


def test_pagination_with_chunk_size(chain: ChainHandle) -> None:
    chain.kubectl("create", "namespace", "paged")
    # As in a real cluster, the root-CA publisher puts kube-root-ca.crt into every new namespace.
    chain.kubectl("wait", "--for=create", "configmap/kube-root-ca.crt", "-n", "paged", "--timeout=10s")
    docs = "\n---\n".join(f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p{i:02d}\n" for i in range(12))
    chain.kubectl("apply", "-n", "paged", "-f", "-", input=docs)
    out = chain.kubectl("get", "configmaps", "-n", "paged", "--chunk-size=5", "-o", "name").stdout.split()
    assert out == ["configmap/kube-root-ca.crt"] + [f"configmap/p{i:02d}" for i in range(12)]
    status, body = chain.json("GET", "/api/v1/namespaces/paged/configmaps?limit=5")
    assert status == 200 and len(body["items"]) == 5 and body["metadata"]["remainingItemCount"] == 8


def test_create_errors_from_kubectl(chain: ChainHandle) -> None:
    bad_name = chain.kubectl("create", "-f", "-", check=False,
                             input="apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n")
    assert bad_name.returncode != 0
    assert 'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"' in bad_name.stderr
    no_ns = chain.kubectl("apply", "-n", "nowhere", "-f", "-", check=False,
                          input="apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
    assert no_ns.returncode != 0 and 'namespaces "nowhere" not found' in no_ns.stderr
    unknown = chain.kubectl("apply", "-f", "-", check=False,
                            input="apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: strict\nbogus: 1\n")
    assert unknown.returncode != 0 and 'unknown field "bogus"' in unknown.stderr


def test_server_dry_run_stores_nothing(chain: ChainHandle) -> None:
    out = chain.kubectl("apply", "--dry-run=server", "-f", "-", input=deployment("dry"))
    assert "server dry run" in out.stdout
    assert chain.kubectl("get", "deployment", "dry", check=False).returncode != 0


def test_yaml_roundtrip_of_get(chain: ChainHandle) -> None:
    chain.kubectl("apply", "-f", "-", input=deployment("yamly"))
    doc = yaml.safe_load(chain.kubectl("get", "deployment", "yamly", "-o", "yaml").stdout)
    assert doc["kind"] == "Deployment" and doc["metadata"]["resourceVersion"].isdigit()


@pytest.mark.parametrize("version", ["1.28", "1.33"])
def test_auth_whoami(chain: ChainHandle, version: str) -> None:
    out = json.loads(chain.kubectl("auth", "whoami", "-o", "json", version=version).stdout)
    assert out["kind"] == "SelfSubjectReview"
    assert out["status"]["userInfo"] == {"username": "kubernetes-admin",
                                         "groups": ["system:masters", "system:authenticated"]}
