"""Bootstrap tokens as kubeadm makes them (``kubeadm token create``'s Secret), through the gateway.

``kube-system/bootstrap-token-<id>`` of type ``bootstrap.kubernetes.io/token`` authenticates
``<id>.<secret>`` as ``system:bootstrap:<id>`` in ``system:bootstrappers`` and its extra groups
(kubectl 1.27 and 1.33 ``--token``), only while usable for authentication and not expired; the
tokencleaner deletes an expired one. Wrong secrets, malformed tokens, a Secret of another type or
namespace, bad extra groups: 401 with kube's Status.
"""

from __future__ import annotations

import json
import secrets
import string
import subprocess
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support.procs import ChainHandle, kubectl_binary

pytestmark = pytest.mark.integration

ALPHABET = string.ascii_lowercase + string.digits
UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


def new_token() -> tuple[str, str]:
    return "".join(secrets.choice(ALPHABET) for _ in range(6)), "".join(secrets.choice(ALPHABET) for _ in range(16))


def token_secret(token_id: str, token_secret: str, *, namespace: str = "kube-system", usage: str = "true",
                 groups: str = "system:bootstrappers:kubeadm:default-node-token", expires: str | None = None,
                 kind: str = "bootstrap.kubernetes.io/token") -> dict[str, Any]:
    data = {"token-id": token_id, "token-secret": token_secret, "usage-bootstrap-authentication": usage,
            "usage-bootstrap-signing": "true", "auth-extra-groups": groups,
            "description": "made by test_bootstrap_tokens"}
    if expires is not None:
        data["expiration"] = expires
    return {"apiVersion": "v1", "kind": "Secret", "type": kind, "stringData": data,
            "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": namespace}}


def create(chain: ChainHandle, body: dict[str, Any]) -> None:
    ns = body["metadata"]["namespace"]
    status, created = chain.json("POST", f"/api/v1/namespaces/{ns}/secrets", body)
    assert status == 201, created


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


def as_token(chain: ChainHandle, token: str, *args: str, version: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl_binary(version), "--kubeconfig=/dev/null", f"--server={chain.url}",
                           f"--certificate-authority={chain.chain.pki.ca}", f"--token={token}", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_bootstrap_token_authenticates(chain: ChainHandle, version: str) -> None:
    token_id, secret = new_token()
    later = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    create(chain, token_secret(token_id, secret, expires=later))
    token = f"{token_id}.{secret}"
    status, review = until(lambda: (r := whoami(chain, token))[0] == 201 and r, 10) or whoami(chain, token)
    assert status == 201, review
    assert review["status"]["userInfo"] == {
        "username": f"system:bootstrap:{token_id}",
        "groups": ["system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token",
                   "system:authenticated"]}
    if version == "1.33":
        shown = as_token(chain, token, "auth", "whoami", "-o", "json", version=version)
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["status"]["userInfo"]["username"] == f"system:bootstrap:{token_id}"
    refused = as_token(chain, token, "get", "secrets", "-n", "kube-system", version=version)
    assert (f'secrets is forbidden: User "system:bootstrap:{token_id}" cannot list resource "secrets" in API '
            'group "" in the namespace "kube-system"') in refused.stderr
    # Usage turned off: no longer a credential.
    patch = json.dumps({"stringData": {"usage-bootstrap-authentication": "false"}})
    chain.kubectl("patch", "secret", f"bootstrap-token-{token_id}", "-n", "kube-system", "-p", patch,
                  version=version)
    assert until(lambda: whoami(chain, token)[0] == 401, 10)
    unauthorized = as_token(chain, token, "get", "namespaces", version=version)
    assert unauthorized.returncode != 0 and "Unauthorized" in unauthorized.stderr


def test_expired_tokens_are_refused_and_cleaned_up(chain: ChainHandle) -> None:
    token_id, secret = new_token()
    soon = (datetime.now(UTC) + timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    create(chain, token_secret(token_id, secret, expires=soon))
    token = f"{token_id}.{secret}"
    assert until(lambda: whoami(chain, token)[0] == 201, 10)
    name = f"/api/v1/namespaces/kube-system/secrets/bootstrap-token-{token_id}"
    assert until(lambda: chain.json("GET", name)[0] == 404, 30), "the tokencleaner left an expired token"
    assert whoami(chain, token) == (401, UNAUTHORIZED)
    # Already expired when made (and an expiration kube cannot parse): refused, then deleted.
    for expires in ("2020-01-01T00:00:00Z", "next tuesday"):
        token_id, secret = new_token()
        create(chain, token_secret(token_id, secret, expires=expires))
        assert whoami(chain, f"{token_id}.{secret}") == (401, UNAUTHORIZED)
        gone = f"/api/v1/namespaces/kube-system/secrets/bootstrap-token-{token_id}"
        assert until(lambda gone=gone: chain.json("GET", gone)[0] == 404, 30), expires


def test_bad_bootstrap_tokens_are_401(chain: ChainHandle) -> None:
    token_id, secret = new_token()
    create(chain, token_secret(token_id, secret))
    assert until(lambda: whoami(chain, f"{token_id}.{secret}")[0] == 201, 10)
    wrong = "0" * 16 if secret != "0" * 16 else "1" * 16
    for bad in (f"{token_id}.{wrong}", f"{token_id.upper()}.{secret}", f"{token_id}.{secret}x", f"{token_id}{secret}",
                f"{token_id}:{secret}", f"{new_token()[0]}.{secret}"):
        assert whoami(chain, bad) == (401, UNAUTHORIZED), bad
    # The Secret must be of the bootstrap type, in kube-system, with valid extra groups.
    other_id, other_secret = new_token()
    create(chain, token_secret(other_id, other_secret, kind="Opaque"))
    ns = f"boot-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", ns)
    third_id, third_secret = new_token()
    create(chain, token_secret(third_id, third_secret, namespace=ns))
    fourth_id, fourth_secret = new_token()
    create(chain, token_secret(fourth_id, fourth_secret, groups="system:masters"))
    time.sleep(1)  # the gateway's Secret cache has seen them
    for bad in (f"{other_id}.{other_secret}", f"{third_id}.{third_secret}", f"{fourth_id}.{fourth_secret}"):
        assert whoami(chain, bad) == (401, UNAUTHORIZED), bad
