"""Legacy service account token Secrets, as in kube's docs ("Manually create a long-lived API token").

A ``kubernetes.io/service-account-token`` Secret naming an account is filled by core-api's tokens
controller (``token`` with kube's legacy claims, ``ca.crt``, ``namespace``, the uid annotation);
the token authenticates at the gateway (kubectl 1.27 and 1.33 ``--token``) while the Secret holds
it and the account lives; the Secret goes with the account; a Secret for a missing account is
deleted; one without the annotation is kube's 422.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from support.procs import ChainHandle, kubectl_binary

pytestmark = pytest.mark.integration

NS = "default"


def as_token(chain: ChainHandle, token: str, *args: str, version: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl_binary(version), "--kubeconfig=/dev/null", f"--server={chain.url}",
                           f"--certificate-authority={chain.chain.pki.ca}", f"--token={token}", *args],
                          capture_output=True, text=True, timeout=60)


def whoami(chain: ChainHandle, token: str) -> tuple[int, Any]:
    status, _h, body = chain.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                     {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                                     headers={"Authorization": f"Bearer {token}"}, auth=False)
    return status, json.loads(body)


def until(check: Callable[[], Any], limit: float = 20.0) -> Any:
    deadline = time.monotonic() + limit
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def secret(chain: ChainHandle, name: str) -> dict[str, Any] | None:
    status, body = chain.json("GET", f"/api/v1/namespaces/{NS}/secrets/{name}")
    return body if status == 200 else None


def token_secret_yaml(name: str, account: str) -> str:
    return f"""apiVersion: v1
kind: Secret
metadata:
  name: {name}
  annotations:
    kubernetes.io/service-account.name: {account}
type: kubernetes.io/service-account-token
"""


def filled(chain: ChainHandle, name: str) -> dict[str, Any]:
    found = until(lambda: (s := secret(chain, name)) is not None and "token" in (s.get("data") or {}) and s)
    assert found, f"the tokens controller did not fill {name}: {secret(chain, name)}"
    return found  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_long_lived_token_as_kube_docs_make_it(chain: ChainHandle, version: str) -> None:
    account, name = f"build-{uuid.uuid4().hex[:6]}", f"tok-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "serviceaccount", account, version=version)
    chain.kubectl("apply", "-f", "-", input=token_secret_yaml(name, account), version=version)
    obj = filled(chain, name)
    data = {k: base64.b64decode(v).decode() for k, v in obj["data"].items()}
    assert sorted(data) == ["ca.crt", "namespace", "token"]
    assert data["namespace"] == NS
    with open(chain.chain.pki.ca) as f:
        assert data["ca.crt"] == f.read()
    uid = chain.kubectl("get", "serviceaccount", account, "-o", "jsonpath={.metadata.uid}").stdout
    assert obj["metadata"]["annotations"]["kubernetes.io/service-account.uid"] == uid
    token = data["token"]
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert list(header) == ["alg", "kid"] and header["alg"] == "ES256"
    assert claims == {"iss": "kubernetes/serviceaccount", "kubernetes.io/serviceaccount/namespace": NS,
                      "kubernetes.io/serviceaccount/secret.name": name,
                      "kubernetes.io/serviceaccount/service-account.name": account,
                      "kubernetes.io/serviceaccount/service-account.uid": uid,
                      "sub": f"system:serviceaccount:{NS}:{account}"}
    # kubectl describe shows the token as kube's docs show it.
    described = chain.kubectl("describe", "secret", name, version=version).stdout
    assert "Type:  kubernetes.io/service-account-token" in described and "token:" in described

    status, review = whoami(chain, token)
    assert status == 201, review
    assert review["status"]["userInfo"] == {
        "username": f"system:serviceaccount:{NS}:{account}", "uid": uid,
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"]}
    refused = as_token(chain, token, "get", "configmaps", "-n", NS, version=version)
    assert (f'configmaps is forbidden: User "system:serviceaccount:{NS}:{account}" cannot list resource '
            f'"configmaps" in API group "" in the namespace "{NS}"') in refused.stderr

    # The token is good only while the Secret holds it: changed, it is a 401 ...
    changed = dict(obj, data=dict(obj["data"], token=base64.b64encode(b"not-the-token").decode()))
    status, _b = chain.json("PUT", f"/api/v1/namespaces/{NS}/secrets/{name}", changed)
    assert status == 200
    assert until(lambda: whoami(chain, token)[0] == 401, 10)
    unauthorized = as_token(chain, token, "get", "configmaps", version=version)
    assert unauthorized.returncode != 0 and "Unauthorized" in unauthorized.stderr

    # ... and a new Secret's token stops working when the account goes (the Secret with it).
    other = f"tok-{uuid.uuid4().hex[:6]}"
    chain.kubectl("apply", "-f", "-", input=token_secret_yaml(other, account), version=version)
    token2 = base64.b64decode(filled(chain, other)["data"]["token"]).decode()
    assert token2 != token and whoami(chain, token2)[0] == 201
    chain.kubectl("delete", "serviceaccount", account, version=version)
    assert until(lambda: secret(chain, other) is None and secret(chain, name) is None), "token Secrets not deleted"
    status, body = whoami(chain, token2)
    assert status == 401 and body["reason"] == "Unauthorized"


def test_deleting_the_secret_revokes_the_token(chain: ChainHandle) -> None:
    account, name = f"rev-{uuid.uuid4().hex[:6]}", f"tok-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "serviceaccount", account)
    chain.kubectl("apply", "-f", "-", input=token_secret_yaml(name, account))
    token = base64.b64decode(filled(chain, name)["data"]["token"]).decode()
    assert whoami(chain, token)[0] == 201
    chain.kubectl("delete", "secret", name)
    assert until(lambda: whoami(chain, token)[0] == 401, 10)
    # The account itself stays.
    assert chain.kubectl("get", "serviceaccount", account, check=False).returncode == 0


def test_a_token_secret_for_a_missing_account_is_deleted(chain: ChainHandle) -> None:
    name = f"tok-{uuid.uuid4().hex[:6]}"
    chain.kubectl("apply", "-f", "-", input=token_secret_yaml(name, "no-such-account"))
    assert until(lambda: secret(chain, name) is None), "the tokens controller kept a token for a missing account"


def test_a_token_secret_for_another_uid_is_deleted(chain: ChainHandle) -> None:
    account, name = f"uid-{uuid.uuid4().hex[:6]}", f"tok-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "serviceaccount", account)
    body = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": name, "annotations": {"kubernetes.io/service-account.name": account,
                                                       "kubernetes.io/service-account.uid": str(uuid.uuid4())}}}
    assert chain.json("POST", f"/api/v1/namespaces/{NS}/secrets", body)[0] == 201
    assert until(lambda: secret(chain, name) is None), "a token Secret naming another uid was kept"


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_bad_token_secrets_and_tokens(chain: ChainHandle, version: str) -> None:
    # kubectl create secret generic --type without the annotation: kube's 422.
    name = f"tok-{uuid.uuid4().hex[:6]}"
    made = chain.kubectl("create", "secret", "generic", name, "--type=kubernetes.io/service-account-token",
                         version=version, check=False)
    assert made.returncode != 0
    assert (f'Secret "{name}" is invalid: metadata.annotations[kubernetes.io/service-account.name]: '
            "Required value") in made.stderr
    # The type may not change afterwards (kube: immutable).
    chain.kubectl("create", "secret", "generic", name, "--from-literal=a=b", version=version)
    status, obj = chain.json("GET", f"/api/v1/namespaces/{NS}/secrets/{name}")
    obj["type"] = "kubernetes.io/service-account-token"
    obj["metadata"]["annotations"] = {"kubernetes.io/service-account.name": "default"}
    status, body = chain.json("PUT", f"/api/v1/namespaces/{NS}/secrets/{name}", obj)
    assert status == 422 and body["details"]["causes"][0]["field"] == "type"
    # Malformed and forged legacy tokens are 401.
    account, tok = f"bad-{uuid.uuid4().hex[:6]}", f"tok-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "serviceaccount", account)
    chain.kubectl("apply", "-f", "-", input=token_secret_yaml(tok, account))
    token = base64.b64decode(filled(chain, tok)["data"]["token"]).decode()
    head, payload, sig = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["kubernetes.io/serviceaccount/service-account.name"] = "default"
    claims["sub"] = f"system:serviceaccount:{NS}:default"
    forged_payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    for bad in (f"{head}.{forged_payload}.{sig}", token[:-4] + "AAAA", "a.b.c", token + "x"):
        status, body = whoami(chain, bad)
        assert (status, body["reason"], body["message"]) == (401, "Unauthorized", "Unauthorized"), bad
