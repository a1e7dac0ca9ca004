"""TokenRequest and service account tokens end to end, with real kubectl as users run it.

``kubectl create token`` (1.27 and 1.33) gets a token that authenticates as the account through the
gateway; a deleted account's token, or one whose account was made again under the same name, is
401 at once; a tampered or foreign token is 401; kube's validation and NotFound messages.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
import uuid
from typing import Any

import pytest
from support.procs import ChainHandle, kubectl_binary

pytestmark = pytest.mark.integration

NS = "default"


def as_token(chain: ChainHandle, token: str, *args: str, version: str = "") -> subprocess.CompletedProcess[str]:
    """kubectl with only the token as credential (no client certificate)."""
    return subprocess.run([kubectl_binary(version), "--kubeconfig=/dev/null", f"--server={chain.url}",
                           f"--certificate-authority={chain.chain.pki.ca}", f"--token={token}", *args],
                          capture_output=True, text=True, timeout=60)


def whoami(chain: ChainHandle, token: str) -> tuple[int, Any]:
    status, _h, body = chain.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                     {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                                     headers={"Authorization": f"Bearer {token}"}, auth=False)
    return status, json.loads(body)


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_kubectl_create_token_authenticates_as_the_account(chain: ChainHandle, version: str) -> None:
    name = f"robot-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "serviceaccount", name, version=version)
    token = chain.kubectl("create", "token", name, "--duration=20m", version=version).stdout.strip()
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["exp"] - claims["iat"] == 1200
    assert claims["sub"] == f"system:serviceaccount:{NS}:{name}"
    status, review = whoami(chain, token)
    assert status == 201, review
    user = review["status"]["userInfo"]
    assert user["username"] == f"system:serviceaccount:{NS}:{name}"
    assert user["groups"] == ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"]
    uid = chain.kubectl("get", "serviceaccount", name, "-o", "jsonpath={.metadata.uid}").stdout
    assert user["uid"] == uid
    # RBAC: nothing is granted to a new account; a RoleBinding grants exactly its Role, in its namespace.
    refused = as_token(chain, token, "get", "configmaps", "-n", NS, version=version)
    assert refused.returncode != 0
    assert (f'configmaps is forbidden: User "system:serviceaccount:{NS}:{name}" cannot list resource '
            f'"configmaps" in API group "" in the namespace "{NS}"') in refused.stderr
    chain.kubectl("create", "role", f"{name}-read", "--verb=get,list", "--resource=configmaps")
    chain.kubectl("create", "rolebinding", f"{name}-read", f"--role={name}-read", f"--serviceaccount={NS}:{name}")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        listed = as_token(chain, token, "get", "configmaps", "-n", NS, "-o", "name", version=version)
        if listed.returncode == 0:
            break
        time.sleep(0.2)
    assert listed.returncode == 0, listed.stderr
    other = as_token(chain, token, "get", "configmaps", "-n", "kube-system", version=version)
    assert other.returncode != 0 and 'in the namespace "kube-system"' in other.stderr
    deleting = as_token(chain, token, "delete", "configmap", "kube-root-ca.crt", "-n", NS, version=version)
    assert deleting.returncode != 0 and "cannot delete resource" in deleting.stderr

    # The account goes: its tokens stop working at once; a namesake does not inherit them.
    chain.kubectl("delete", "serviceaccount", name)
    assert whoami(chain, token)[0] == 401
    chain.kubectl("create", "serviceaccount", name)
    status, body = whoami(chain, token)
    assert status == 401 and body["reason"] == "Unauthorized"
    refused = as_token(chain, token, "get", "configmaps", version=version)
    assert refused.returncode != 0 and "Unauthorized" in refused.stderr


def test_token_request_validation_and_not_found(chain: ChainHandle) -> None:
    chain.kubectl("create", "serviceaccount", "short-lived")
    short = chain.kubectl("create", "token", "short-lived", "--duration=5m", check=False)
    assert short.returncode != 0
    assert ('TokenRequest.authentication.k8s.io "short-lived" is invalid: spec.expirationSeconds: Invalid value: '
            "300: may not specify a duration less than 10 minutes") in short.stderr
    missing = chain.kubectl("create", "token", "no-such-account", check=False)
    assert missing.returncode != 0 and 'serviceaccounts "no-such-account" not found' in missing.stderr
    base = f"/api/v1/namespaces/{NS}/serviceaccounts/short-lived/token"
    status, body = chain.json("POST", base, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                             "metadata": {"name": "other"}, "spec": {}})
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.name"
    status, body = chain.json("POST", f"{base}?dryRun=All", {"apiVersion": "authentication.k8s.io/v1",
                                                             "kind": "TokenRequest", "spec": {"audiences": ["x"]}})
    assert status == 201 and body["status"]["token"] == "" and body["spec"]["audiences"] == ["x"]
    status, body = chain.json("POST", base, {"apiVersion": "v1", "kind": "ConfigMap"})
    assert status == 400, body


def test_bound_tokens_and_foreign_tokens(chain: ChainHandle) -> None:
    chain.kubectl("create", "serviceaccount", "bound")
    chain.kubectl("create", "secret", "generic", "holder", "--from-literal=a=b")
    token = chain.kubectl("create", "token", "bound", "--bound-object-kind=Secret",
                          "--bound-object-name=holder").stdout.strip()
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    secret_uid = chain.kubectl("get", "secret", "holder", "-o", "jsonpath={.metadata.uid}").stdout
    assert claims["kubernetes.io"]["secret"] == {"name": "holder", "uid": secret_uid}
    assert whoami(chain, token)[0] == 201
    nothing = chain.kubectl("create", "token", "bound", "--bound-object-kind=Secret",
                            "--bound-object-name=nothing", check=False)
    assert nothing.returncode != 0 and 'secrets "nothing" not found' in nothing.stderr
    for forged in ("not-a-token", token[:-4] + "AAAA", token.split(".")[0] + ".e30." + token.split(".")[2]):
        assert whoami(chain, forged)[0] == 401


def review(chain: ChainHandle, token: str, audiences: list[str] | None = None) -> tuple[int, Any]:
    spec: dict[str, Any] = {"token": token}
    if audiences is not None:
        spec["audiences"] = audiences
    return chain.json("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                      {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec})


def test_token_review_tells_whose_token_it_is(chain: ChainHandle) -> None:
    chain.kubectl("create", "serviceaccount", "reviewed")
    token = chain.kubectl("create", "token", "reviewed").stdout.strip()
    status, body = review(chain, token)
    assert status == 201, body
    assert body["status"]["authenticated"] is True
    assert body["status"]["user"]["username"] == f"system:serviceaccount:{NS}:reviewed"
    assert body["status"]["audiences"] == ["https://kubernetes.default.svc.cluster.local"]
    status, body = review(chain, token, audiences=["someone-else"])
    assert status == 201 and body["status"]["authenticated"] is False and body["status"]["error"]
    status, body = review(chain, "garbage")
    assert status == 201 and body["status"] == {"user": {}, "authenticated": False,
                                                "error": body["status"]["error"]}
    chain.kubectl("delete", "serviceaccount", "reviewed")
    status, body = review(chain, token)
    assert body["status"]["authenticated"] is False
    status, body = chain.json("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                              {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}})
    assert status == 400 and body["message"] == "token is required for TokenReview in authentication"
