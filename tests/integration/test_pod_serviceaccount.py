"""The ServiceAccount admission plugin on the running chain, through kubectl: new Pods run as the
namespace's ``default`` account with its API credentials projected into every container, automount
can be turned off by the pod or the account, a missing account is refused as kube-apiserver words
it, and a pod created right after its namespace waits for the controller's ``default`` account."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

NS = "pod-sa-it"
MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
ALPHABET = set("bcdfghjklmnpqrstvwxz2456789")


@pytest.fixture(scope="module")
def ns(chain: ChainHandle) -> Iterator[str]:
    chain.kubectl("create", "namespace", NS)
    yield NS
    chain.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=false", check=False)


def get_pod(chain: ChainHandle, name: str, namespace: str = NS) -> dict[str, Any]:
    out = chain.kubectl("get", "pod", name, "-n", namespace, "-o", "json").stdout
    return json.loads(out)  # type: ignore[no-any-return]


def run(chain: ChainHandle, name: str, namespace: str, override: dict[str, Any] | None = None,
        check: bool = True) -> Any:
    args = ["run", name, "--image=nginx", "-n", namespace]
    if override is not None:
        args.append(f"--overrides={json.dumps(override)}")
    return chain.kubectl(*args, check=check)


def test_kubectl_run_gets_default_account_and_token_volume(chain: ChainHandle, ns: str) -> None:
    override = {"spec": {"initContainers": [{"name": "init", "image": "busybox"}],
                         "containers": [{"name": "app", "image": "nginx"}]}}
    run(chain, "plain", ns, override)
    spec = get_pod(chain, "plain")["spec"]
    assert spec["serviceAccountName"] == "default" and spec["serviceAccount"] == "default"
    volumes = [v for v in spec["volumes"] if v["name"].startswith("kube-api-access-")]
    assert len(volumes) == 1
    name = volumes[0]["name"]
    assert len(name) == len("kube-api-access-") + 5 and set(name[-5:]) <= ALPHABET
    assert volumes[0]["projected"] == {
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ],
    }
    mount = {"name": name, "readOnly": True, "mountPath": MOUNT_PATH}
    assert spec["containers"][0]["volumeMounts"] == [mount]
    assert spec["initContainers"][0]["volumeMounts"] == [mount]


def test_automount_off_on_pod_or_account(chain: ChainHandle, ns: str) -> None:
    run(chain, "pod-off", ns, {"spec": {"automountServiceAccountToken": False}})
    spec = get_pod(chain, "pod-off")["spec"]
    assert spec["serviceAccountName"] == "default"
    assert "volumes" not in spec and "volumeMounts" not in spec["containers"][0]

    chain.kubectl("create", "serviceaccount", "quiet", "-n", ns)
    chain.kubectl("patch", "serviceaccount", "quiet", "-n", ns, "-p",
                  json.dumps({"automountServiceAccountToken": False,
                              "imagePullSecrets": [{"name": "registry"}]}))
    run(chain, "account-off", ns, {"spec": {"serviceAccountName": "quiet"}})
    spec = get_pod(chain, "account-off")["spec"]
    assert spec["serviceAccountName"] == "quiet" and "volumes" not in spec
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    # the pod's own choice wins over the account's
    run(chain, "pod-on", ns, {"spec": {"serviceAccountName": "quiet", "automountServiceAccountToken": True,
                                       "imagePullSecrets": [{"name": "mine"}]}})
    spec = get_pod(chain, "pod-on")["spec"]
    assert any(v["name"].startswith("kube-api-access-") for v in spec["volumes"])
    assert spec["imagePullSecrets"] == [{"name": "mine"}]


def test_missing_account_is_forbidden(chain: ChainHandle, ns: str) -> None:
    started = time.monotonic()
    out = run(chain, "orphan", ns, {"spec": {"serviceAccountName": "ghost"}}, check=False)
    assert out.returncode == 1
    assert ('Error from server (Forbidden): pods "orphan" is forbidden: error looking up service account '
            f'{ns}/ghost: serviceaccount "ghost" not found') in out.stderr, out.stderr
    assert time.monotonic() - started < 5  # a named account is looked up once, not retried
    assert chain.kubectl("get", "pod", "orphan", "-n", ns, check=False).returncode == 1
    status, body = chain.json("POST", f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "gen-"},
        "spec": {"serviceAccountName": "ghost", "containers": [{"name": "c", "image": "nginx"}]}})
    assert status == 403 and body["reason"] == "Forbidden"
    assert body["message"].startswith('pods "gen-" is forbidden: error looking up service account')


def test_enforced_mountable_secrets(chain: ChainHandle, ns: str) -> None:
    chain.kubectl("create", "serviceaccount", "strict", "-n", ns)
    chain.kubectl("annotate", "serviceaccount", "strict", "-n", ns, "kubernetes.io/enforce-mountable-secrets=true")
    override = {"spec": {"serviceAccountName": "strict",
                         "volumes": [{"name": "s", "secret": {"secretName": "other"}}]}}
    out = run(chain, "sneaky", ns, override, check=False)
    assert out.returncode == 1
    assert ('pods "sneaky" is forbidden: volume with secret.secretName="other" is not allowed because service '
            "account strict does not reference that secret") in out.stderr, out.stderr


def test_mirror_pod_may_not_name_an_account(chain: ChainHandle, ns: str) -> None:
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "mirror", "annotations": {"kubernetes.io/config.mirror": "x"}},
            "spec": {"serviceAccountName": "default", "containers": [{"name": "c", "image": "nginx"}]}}
    status, out = chain.json("POST", f"/api/v1/namespaces/{ns}/pods", body)
    assert status == 403, out
    assert out["message"] == 'pods "mirror" is forbidden: a mirror pod may not reference service accounts'
    del body["spec"]["serviceAccountName"]  # type: ignore[attr-defined]
    status, out = chain.json("POST", f"/api/v1/namespaces/{ns}/pods", body)
    assert status == 201, out
    assert "serviceAccountName" not in out["spec"] and "volumes" not in out["spec"]


def test_pod_in_a_just_created_namespace(chain: ChainHandle) -> None:
    fresh = "pod-sa-fresh"
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": fresh}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "early", "namespace": fresh},
         "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
    ]})
    try:
        chain.kubectl("create", "-f", "-", input=manifest)
        spec = get_pod(chain, "early", fresh)["spec"]
        assert spec["serviceAccountName"] == "default"
        assert any(v["name"].startswith("kube-api-access-") for v in spec["volumes"])
    finally:
        chain.kubectl("delete", "namespace", fresh, "--ignore-not-found", "--wait=false", check=False)
