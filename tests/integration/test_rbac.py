"""RBAC enforced at the gateway as kube-apiserver enforces it, with real kubectl.

A service account (its token from ``kubectl create token``) starts with no grants: 403 with kube's
exact message on a namespaced and a cluster-scoped resource; a RoleBinding grants exactly its rules
in its namespace, a ClusterRoleBinding everywhere; resourceNames and subresources narrow a rule;
``kubectl --as`` impersonates only with the ``impersonate`` verb; SubjectAccessReview answers what the
gateway enforces.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from typing import Any

import pytest
from support.procs import ChainHandle, kubectl_binary

pytestmark = pytest.mark.integration


@pytest.fixture
def robot(chain: ChainHandle) -> tuple[str, str, str]:
    """A fresh namespace and account in it; its token."""
    ns = f"rbac-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", ns)
    chain.kubectl("create", "serviceaccount", "robot", "-n", ns)
    token = chain.kubectl("create", "token", "robot", "-n", ns).stdout.strip()
    return ns, f"system:serviceaccount:{ns}:robot", token


def as_token(chain: ChainHandle, token: str, *args: str, version: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl_binary(version), "--kubeconfig=/dev/null", f"--server={chain.url}",
                           f"--certificate-authority={chain.chain.pki.ca}", f"--token={token}", *args],
                          capture_output=True, text=True, timeout=60)


def eventually(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_no_bindings_no_access_with_kubes_messages(chain: ChainHandle, robot: tuple[str, str, str],
                                                   version: str) -> None:
    ns, user, token = robot
    listed = as_token(chain, token, "get", "configmaps", "-n", ns, version=version)
    assert listed.returncode != 0
    assert (f'Error from server (Forbidden): configmaps is forbidden: User "{user}" cannot list resource '
            f'"configmaps" in API group "" in the namespace "{ns}"') in listed.stderr
    nodes = as_token(chain, token, "get", "nodes", version=version)
    assert (f'nodes is forbidden: User "{user}" cannot list resource "nodes" in API group "" at the cluster '
            "scope") in nodes.stderr
    created = as_token(chain, token, "create", "configmap", "x", "-n", ns, version=version)
    assert f'cannot create resource "configmaps" in API group "" in the namespace "{ns}"' in created.stderr
    status, _h, body = chain.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web/scale",
                                     headers={"Authorization": f"Bearer {token}"}, auth=False)
    doc = json.loads(body)
    assert status == 403 and doc["reason"] == "Forbidden"
    assert doc["message"] == (f'deployments.apps "web" is forbidden: User "{user}" cannot get resource '
                              f'"deployments/scale" in API group "apps" in the namespace "{ns}"')
    assert doc["details"] == {"name": "web", "group": "apps", "kind": "deployments"}


def test_a_role_binding_grants_its_rules_in_its_namespace(chain: ChainHandle, robot: tuple[str, str, str]) -> None:
    ns, _user, token = robot
    chain.kubectl("create", "role", "cm-editor", "-n", ns, "--verb=get,list,create", "--resource=configmaps")
    chain.kubectl("create", "rolebinding", "robot-cm", "-n", ns, "--role=cm-editor", f"--serviceaccount={ns}:robot")
    assert eventually(lambda: as_token(chain, token, "get", "configmaps", "-n", ns).returncode == 0)
    assert as_token(chain, token, "create", "configmap", "made", "-n", ns).returncode == 0
    assert as_token(chain, token, "delete", "configmap", "made", "-n", ns).returncode != 0
    assert as_token(chain, token, "get", "configmaps", "-n", "default").returncode != 0
    assert as_token(chain, token, "get", "secrets", "-n", ns).returncode != 0
    # resourceNames: one object only, and never a list
    chain.kubectl("create", "role", "one-secret", "-n", ns, "--verb=get", "--resource=secrets",
                  "--resource-name=allowed")
    chain.kubectl("create", "rolebinding", "robot-one", "-n", ns, "--role=one-secret", f"--serviceaccount={ns}:robot")
    chain.kubectl("create", "secret", "generic", "allowed", "-n", ns, "--from-literal=a=b")
    chain.kubectl("create", "secret", "generic", "other", "-n", ns, "--from-literal=a=b")
    assert eventually(lambda: as_token(chain, token, "get", "secret", "allowed", "-n", ns).returncode == 0)
    assert as_token(chain, token, "get", "secret", "other", "-n", ns).returncode != 0
    assert as_token(chain, token, "get", "secrets", "-n", ns).returncode != 0
    # A ClusterRoleBinding: everywhere; removing it takes the access away again.
    chain.kubectl("create", "clusterrole", f"{ns}-nodes", "--verb=list", "--resource=nodes")
    chain.kubectl("create", "clusterrolebinding", f"{ns}-nodes", f"--clusterrole={ns}-nodes",
                  f"--serviceaccount={ns}:robot")
    assert eventually(lambda: as_token(chain, token, "get", "nodes").returncode == 0)
    chain.kubectl("delete", "clusterrolebinding", f"{ns}-nodes")
    assert eventually(lambda: as_token(chain, token, "get", "nodes").returncode != 0)


def test_impersonation_needs_the_impersonate_verb(chain: ChainHandle, robot: tuple[str, str, str]) -> None:
    ns, user, token = robot
    # The admin (system:masters) may impersonate anyone: alice has no grants, so she is refused.
    as_alice = chain.kubectl("get", "configmaps", "-n", ns, "--as=alice", "--as-group=devs", check=False)
    assert 'User "alice" cannot list resource "configmaps"' in as_alice.stderr
    refused = as_token(chain, token, "get", "configmaps", "-n", ns, "--as=alice")
    assert (f'users "alice" is forbidden: User "{user}" cannot impersonate resource "users" in API group "" at '
            "the cluster scope") in refused.stderr
    chain.kubectl("create", "clusterrole", f"{ns}-imp", "--verb=impersonate", "--resource=users",
                  "--resource-name=alice")
    chain.kubectl("create", "clusterrolebinding", f"{ns}-imp", f"--clusterrole={ns}-imp",
                  f"--serviceaccount={ns}:robot")
    # Now alice may be impersonated (and is then refused as alice), bob still not.
    assert eventually(lambda: 'User "alice" cannot list' in as_token(chain, token, "get", "configmaps", "-n", ns,
                                                                    "--as=alice").stderr)
    assert "cannot impersonate" in as_token(chain, token, "get", "configmaps", "--as=bob").stderr
    status, _h, body = chain.request("GET", f"/api/v1/namespaces/{ns}/configmaps",
                                     headers={"Impersonate-Group": "devs"})
    assert status == 400 and b"without impersonating a user" in body


def test_subject_access_review_answers_what_the_gateway_enforces(chain: ChainHandle,
                                                                  robot: tuple[str, str, str]) -> None:
    ns, user, _token = robot
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": user, "groups": ["system:serviceaccounts"],
                       "resourceAttributes": {"namespace": ns, "verb": "list", "resource": "pods"}}}
    status, body = chain.json("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    assert status == 201 and body["status"]["allowed"] is False
    chain.kubectl("create", "rolebinding", "robot-view", "-n", ns, "--clusterrole=view", f"--serviceaccount={ns}:robot")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        status, body = chain.json("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        if body["status"]["allowed"]:
            break
        time.sleep(0.2)
    assert body["status"]["allowed"] is True
    assert body["status"]["reason"].startswith(f'RBAC: allowed by RoleBinding "robot-view/{ns}" of ClusterRole "view"')


def test_a_new_user_from_the_cli_gets_exactly_their_role(chain: ChainHandle, tmp_path: Any) -> None:
    import sys

    ns = f"team-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", ns)
    config = tmp_path / "carol.kubeconfig"
    made = subprocess.run([sys.executable, "-m", "kubechain_cli", "kubeconfig", "user", "--data-dir",
                           str(chain.chain.data_dir), "--client-name", "carol", "--org", "designers", "-o",
                           str(config)], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert oct(config.stat().st_mode & 0o777) == "0o600"

    def carol(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([kubectl_binary(), f"--kubeconfig={config}", *args], capture_output=True, text=True,
                              timeout=60)

    assert 'User "carol" cannot list resource "configmaps"' in carol("get", "configmaps", "-n", ns).stderr
    chain.kubectl("create", "rolebinding", "designers-edit", "-n", ns, "--clusterrole=edit", "--group=designers")
    assert eventually(lambda: carol("create", "configmap", "palette", "-n", ns).returncode == 0)
    assert carol("get", "configmaps", "-n", "default").returncode != 0
    who = carol("auth", "whoami", "-o", "json")
    assert who.returncode == 0, who.stderr
    assert json.loads(who.stdout)["status"]["userInfo"]["groups"] == ["designers", "system:authenticated"]


def test_nobody_grants_what_they_do_not_hold(chain: ChainHandle, robot: tuple[str, str, str]) -> None:
    ns, user, token = robot
    chain.kubectl("create", "rolebinding", "robot-admin", "-n", ns, "--clusterrole=admin",
                  f"--serviceaccount={ns}:robot")
    assert eventually(lambda: as_token(chain, token, "get", "rolebindings", "-n", ns).returncode == 0)
    groups = f'["system:serviceaccounts" "system:serviceaccounts:{ns}" "system:authenticated"]'
    stolen = as_token(chain, token, "create", "rolebinding", "steal", "-n", ns, "--clusterrole=cluster-admin",
                      f"--serviceaccount={ns}:robot")
    assert stolen.returncode != 0
    assert (f'rolebindings.rbac.authorization.k8s.io "steal" is forbidden: user "{user}" (groups={groups}) is '
            "attempting to grant RBAC permissions not currently held:\n"
            '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}\n{NonResourceURLs:["*"], Verbs:["*"]}') in stolen.stderr
    # What the admin role holds may be granted on; a Role beyond it may not be written.
    assert as_token(chain, token, "create", "rolebinding", "view-too", "-n", ns, "--clusterrole=view",
                    f"--serviceaccount={ns}:robot").returncode == 0
    assert as_token(chain, token, "create", "role", "cm", "-n", ns, "--verb=get",
                    "--resource=configmaps").returncode == 0
    nodes = as_token(chain, token, "create", "role", "nodes", "-n", ns, "--verb=get", "--resource=nodes")
    assert 'permissions not currently held:\n{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}' in nodes.stderr
    # With the bind verb on cluster-admin, binding it is allowed (kube's BindingAuthorized).
    chain.kubectl("create", "clusterrole", f"{ns}-binder", "--verb=bind", "--resource=clusterroles",
                  "--resource-name=cluster-admin")
    chain.kubectl("create", "rolebinding", "robot-binder", "-n", ns, f"--clusterrole={ns}-binder",
                  f"--serviceaccount={ns}:robot")
    assert eventually(lambda: as_token(chain, token, "create", "rolebinding", "granted", "-n", ns,
                                       "--clusterrole=cluster-admin", f"--serviceaccount={ns}:robot").returncode == 0)
