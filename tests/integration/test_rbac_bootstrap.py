"""kube 1.33's default RBAC objects and ClusterRole aggregation, against the real chain and kubectl.

core-api writes the defaults in its ``rbac/bootstrap-roles`` post-start hook (readiness waits for
it) and the ``clusterrole-aggregation`` controller fills ``admin``/``edit``/``view``. A user's
ClusterRole labelled ``aggregate-to-view`` shows up in ``view`` (and through it in ``edit`` and
``admin``) and leaves again. A restarted core-api (its own process on its own etcd prefix) puts
back a rule removed from an ``autoupdate: "true"`` role and leaves an ``autoupdate: "false"`` edit
alone.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from support.coreapi_procs import CoreAPIProcess
from support.procs import ChainHandle, EtcdServer, kubectl_binary, kubectl_params
from support.waiting import eventually

pytestmark = pytest.mark.integration

RBAC = "/apis/rbac.authorization.k8s.io/v1"
DEFAULT_ROLES = ("cluster-admin", "admin", "edit", "view", "system:aggregate-to-admin", "system:aggregate-to-edit",
                 "system:aggregate-to-view", "system:discovery", "system:basic-user", "system:public-info-viewer",
                 "system:monitoring", "system:service-account-issuer-discovery", "system:auth-delegator",
                 "system:kube-aggregator", "system:heapster", "system:node-proxier", "system:kube-controller-manager",
                 "system:kube-scheduler", "system:volume-scheduler",
                 "system:certificates.k8s.io:kubelet-serving-approver",
                 "system:controller:namespace-controller", "system:controller:generic-garbage-collector")


def get_json(chain: ChainHandle, *args: str, version: str = "") -> Any:
    return json.loads(chain.kubectl("get", *args, "-o", "json", version=version).stdout)


def allows(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any((group in r.get("apiGroups", []) or "*" in r.get("apiGroups", []))
               and (resource in r.get("resources", []) or "*" in r.get("resources", []))
               and (verb in r.get("verbs", []) or "*" in r.get("verbs", []))
               and not r.get("resourceNames") for r in rules)


@pytest.mark.parametrize("version", kubectl_params("1.27", "1.33"))
def test_default_cluster_roles_listed_with_labels(chain: ChainHandle, version: str) -> None:
    listed = get_json(chain, "clusterroles", "-l", "kubernetes.io/bootstrapping=rbac-defaults", version=version)
    by_name = {o["metadata"]["name"]: o for o in listed["items"]}
    for name in DEFAULT_ROLES:
        assert name in by_name, name
        meta = by_name[name]["metadata"]
        assert meta["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"
        assert meta["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] == "true"
    table = chain.kubectl("get", "clusterroles", version=version).stdout
    assert "cluster-admin" in table and "system:discovery" in table
    bindings = {o["metadata"]["name"]: o for o in get_json(chain, "clusterrolebindings", version=version)["items"]}
    assert bindings["cluster-admin"]["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}]
    assert bindings["cluster-admin"]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                    "name": "cluster-admin"}
    assert [s["name"] for s in bindings["system:public-info-viewer"]["subjects"]] == [
        "system:authenticated", "system:unauthenticated"]
    assert [s["name"] for s in bindings["system:monitoring"]["subjects"]] == ["system:monitoring"]
    reader = get_json(chain, "role", "extension-apiserver-authentication-reader", "-n", "kube-system",
                      version=version)
    assert reader["rules"][0]["resourceNames"] == ["extension-apiserver-authentication"]
    get_json(chain, "rolebinding", "system:controller:bootstrap-signer", "-n", "kube-public", version=version)


def test_aggregated_roles_have_kubes_rules(chain: ChainHandle) -> None:
    def rules(name: str) -> list[dict[str, Any]]:
        return get_json(chain, "clusterrole", name).get("rules") or []
    admin = eventually(lambda: rules("admin"), what="admin aggregated")
    assert allows(admin, "rbac.authorization.k8s.io", "rolebindings", "create")
    assert allows(admin, "", "secrets", "delete")
    view = eventually(lambda: rules("view"), what="view aggregated")
    assert allows(view, "", "pods", "list") and allows(view, "apps", "deployments", "watch")
    assert not allows(view, "", "secrets", "get")
    assert not allows(view, "", "pods", "create")
    edit = eventually(lambda: rules("edit"), what="edit aggregated")
    assert allows(edit, "", "secrets", "get") and allows(edit, "apps", "deployments", "patch")
    assert not allows(edit, "rbac.authorization.k8s.io", "rolebindings", "create")
    text = chain.kubectl("get", "clusterrole", "admin", "-o", "yaml").stdout
    assert "aggregationRule:" in text and "rbac.authorization.k8s.io/aggregate-to-admin" in text


def test_user_role_aggregates_into_view_and_leaves(chain: ChainHandle) -> None:
    name = f"crontab-viewer-{uuid.uuid4().hex[:6]}"
    group = f"{uuid.uuid4().hex[:6]}.example.com"
    chain.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": [group], "resources": ["crontabs"], "verbs": ["get", "list", "watch"]}]}))
    try:
        for role in ("view", "edit", "admin"):
            eventually(lambda role=role: allows(get_json(chain, "clusterrole", role).get("rules") or [],
                                                group, "crontabs", "list"), timeout=10, what=f"{role} gets the rule")
    finally:
        chain.kubectl("delete", "clusterrole", name)
    for role in ("view", "edit", "admin"):
        eventually(lambda role=role: not allows(get_json(chain, "clusterrole", role).get("rules") or [],
                                                group, "crontabs", "list"), timeout=10, what=f"{role} drops it")


def test_restart_reconciles_autoupdate_roles_only(etcd_server: EtcdServer, tmp_path: Path) -> None:
    prefix = f"/rbacboot-{uuid.uuid4().hex[:8]}"
    core = CoreAPIProcess(etcd_server.endpoint, prefix, tmp_path / "core-1.log", controllers=False).start()
    restarted: CoreAPIProcess | None = None
    try:
        core.wait_ready()
        status, basic = core.json("GET", f"{RBAC}/clusterroles/system:basic-user")
        assert status == 200, basic
        full_rules = basic["rules"]
        basic["rules"] = full_rules[:1]  # autoupdate "true": the removed rule comes back
        assert core.json("PUT", f"{RBAC}/clusterroles/system:basic-user", basic)[0] == 200
        status, disc = core.json("GET", f"{RBAC}/clusterroles/system:discovery")
        disc["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] = "false"
        disc["rules"] = [{"nonResourceURLs": ["/version"], "verbs": ["get"]}]
        assert core.json("PUT", f"{RBAC}/clusterroles/system:discovery", disc)[0] == 200
        status, crb = core.json("GET", f"{RBAC}/clusterrolebindings/system:basic-user")
        crb["subjects"] = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]
        assert core.json("PUT", f"{RBAC}/clusterrolebindings/system:basic-user", crb)[0] == 200
        assert core.json("DELETE", f"{RBAC}/clusterroles/system:monitoring")[0] == 200
        core.stop()
        restarted = CoreAPIProcess(etcd_server.endpoint, prefix, tmp_path / "core-2.log", controllers=False).start()
        restarted.wait_ready()
        assert restarted.json("GET", f"{RBAC}/clusterroles/system:basic-user")[1]["rules"] == full_rules
        disc_after = restarted.json("GET", f"{RBAC}/clusterroles/system:discovery")[1]
        assert disc_after["rules"] == [{"nonResourceURLs": ["/version"], "verbs": ["get"]}]
        subjects = restarted.json("GET", f"{RBAC}/clusterrolebindings/system:basic-user")[1]["subjects"]
        assert [s["name"] for s in subjects] == ["alice", "system:authenticated"]  # union: the user's stays
        assert restarted.json("GET", f"{RBAC}/clusterroles/system:monitoring")[0] == 200
        conn = http.client.HTTPConnection("127.0.0.1", restarted.port, timeout=10)
        conn.request("GET", "/readyz?verbose")
        assert "[+]poststarthook/rbac/bootstrap-roles ok" in conn.getresponse().read().decode()
        conn.close()
    finally:
        core.stop()
        if restarted is not None:
            restarted.stop()



def test_replicas_starting_together_write_each_default_once(etcd_server: EtcdServer, tmp_path: Path) -> None:
    """Every replica runs the hook (as every kube-apiserver): both start, one copy of each default."""
    prefix = f"/rbacboot-{uuid.uuid4().hex[:8]}"
    procs = [CoreAPIProcess(etcd_server.endpoint, prefix, tmp_path / f"core-{i}.log", controllers=False).start()
             for i in range(2)]
    try:
        for p in procs:
            p.wait_ready(timeout=90)
        status, listed = procs[0].json("GET", f"{RBAC}/clusterroles")
        assert status == 200
        names = [o["metadata"]["name"] for o in listed["items"]]
        assert len(names) == len(set(names)) and "cluster-admin" in names
        status, bindings = procs[1].json("GET", f"{RBAC}/namespaces/kube-system/rolebindings")
        assert "system::leader-locking-kube-scheduler" in [o["metadata"]["name"] for o in bindings["items"]]
    finally:
        for p in procs:
            p.stop()


def _as_token(chain: ChainHandle, token: str, *args: str, version: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl_binary(version), "--kubeconfig=/dev/null", f"--server={chain.url}",
                           f"--certificate-authority={chain.chain.pki.ca}", f"--token={token}", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("version", kubectl_params("1.27", "1.33"))
def test_defaults_grant_what_kube_grants(chain: ChainHandle, version: str) -> None:
    """With the gateway enforcing RBAC: any authenticated user reads discovery and /version (system:discovery,
    system:public-info-viewer); a RoleBinding to view/edit/admin grants their aggregated rules."""
    ns = f"rbacboot-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", ns)
    chain.kubectl("create", "serviceaccount", "robot", "-n", ns)
    token = chain.kubectl("create", "token", "robot", "-n", ns).stdout.strip()
    user = f"system:serviceaccount:{ns}:robot"
    version_out = _as_token(chain, token, "get", "--raw", "/version", version=version)
    assert version_out.returncode == 0 and '"gitVersion"' in version_out.stdout, version_out.stderr
    assert _as_token(chain, token, "get", "--raw", "/apis", version=version).returncode == 0
    assert _as_token(chain, token, "get", "pods", "-n", ns, version=version).returncode != 0
    chain.kubectl("create", "rolebinding", "robot-view", "--clusterrole=view", f"--serviceaccount={ns}:robot",
                  "-n", ns)
    eventually(lambda: _as_token(chain, token, "get", "pods", "-n", ns, version=version).returncode == 0,
               timeout=10, what="view lets the robot list pods")
    secrets = _as_token(chain, token, "get", "secrets", "-n", ns, version=version)
    assert (f'secrets is forbidden: User "{user}" cannot list resource "secrets" in API group "" in the '
            f'namespace "{ns}"') in secrets.stderr
    chain.kubectl("create", "rolebinding", "robot-edit", "--clusterrole=edit", f"--serviceaccount={ns}:robot",
                  "-n", ns)
    eventually(lambda: _as_token(chain, token, "create", "configmap", "c1", "-n", ns,
                                 version=version).returncode == 0, timeout=10, what="edit lets the robot create")
    denied = _as_token(chain, token, "create", "rolebinding", "x", "--clusterrole=view", "--user=u", "-n", ns,
                       version=version)
    assert "forbidden" in denied.stderr
    chain.kubectl("create", "rolebinding", "robot-admin", "--clusterrole=admin", f"--serviceaccount={ns}:robot",
                  "-n", ns)
    eventually(lambda: _as_token(chain, token, "create", "rolebinding", "x", "--clusterrole=view", "--user=u",
                                 "-n", ns, version=version).returncode == 0,
               timeout=10, what="admin lets the robot create rolebindings")
    chain.kubectl("delete", "namespace", ns, "--wait=false")
