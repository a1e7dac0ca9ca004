"""``kubectl auth can-i --list`` and ``auth whoami`` for someone who is not the admin, as on a kubeadm cluster.

A service account's token (``kubectl create token``) lists what kube 1.33's bootstrap policy gives
every authenticated user (system:basic-user's self reviews, system:discovery's and
system:public-info-viewer's URLs, service account issuer discovery for service accounts) plus its
RoleBinding's rules in that namespace only; ``can-i`` answers each verb as the gateway enforces it;
``whoami`` names the account. kubectl 1.27 and 1.33 (1.27's whoami needs authentication v1beta1,
test_runtime_config covers it).
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


def as_token(chain: ChainHandle, token: str, *args: str, version: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl_binary(version), "--kubeconfig=/dev/null", f"--server={chain.url}",
                           f"--certificate-authority={chain.chain.pki.ca}", f"--token={token}", *args],
                          capture_output=True, text=True, timeout=60)


def rows(listed: str) -> list[list[str]]:
    lines = listed.splitlines()
    assert lines[0].split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"], listed
    return [line.split() for line in lines[1:]]


def eventually(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_a_service_account_lists_its_rules(chain: ChainHandle, version: str) -> None:
    ns, other = f"cani-{uuid.uuid4().hex[:6]}", f"cani-{uuid.uuid4().hex[:6]}"
    for name in (ns, other):
        chain.kubectl("create", "namespace", name)
    chain.kubectl("create", "serviceaccount", "lister", "-n", ns)
    token = chain.kubectl("create", "token", "lister", "-n", ns).stdout.strip()
    chain.kubectl("create", "role", "cm-reader", "-n", ns, "--verb=get,list", "--resource=configmaps",
                  version=version)
    chain.kubectl("create", "rolebinding", "lister-cm-reader", "-n", ns, "--role=cm-reader",
                  f"--serviceaccount={ns}:lister", version=version)

    def listed(namespace: str) -> list[list[str]]:
        out = as_token(chain, token, "auth", "can-i", "--list", "-n", namespace, version=version)
        assert out.returncode == 0, out.stderr
        return rows(out.stdout)

    assert eventually(lambda: ["configmaps", "[]", "[]", "[get", "list]"] in listed(ns))
    mine = listed(ns)
    for expected in (["selfsubjectreviews.authentication.k8s.io", "[]", "[]", "[create]"],
                     ["selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]"],
                     ["selfsubjectrulesreviews.authorization.k8s.io", "[]", "[]", "[create]"],
                     ["[/api/*]", "[]", "[get]"], ["[/healthz]", "[]", "[get]"], ["[/version]", "[]", "[get]"],
                     ["[/openid/v1/jwks]", "[]", "[get]"]):
        assert expected in mine, (expected, mine)
    assert not any(row[0] in ("secrets", "*.*") for row in mine), mine
    # The RoleBinding counts in its namespace only.
    elsewhere = listed(other)
    assert ["configmaps", "[]", "[]", "[get", "list]"] not in elsewhere
    assert ["selfsubjectrulesreviews.authorization.k8s.io", "[]", "[]", "[create]"] in elsewhere

    def can_i(*args: str) -> str:
        out = as_token(chain, token, "auth", "can-i", *args, version=version)
        return out.stdout.strip()

    assert can_i("list", "configmaps", "-n", ns) == "yes"
    assert can_i("delete", "configmaps", "-n", ns) == "no"
    assert can_i("list", "configmaps", "-n", other) == "no"
    assert can_i("get", "/version") == "yes"
    assert can_i("get", "/metrics") == "no"
    # What can-i says is what the gateway does.
    assert as_token(chain, token, "get", "configmaps", "-n", ns, version=version).returncode == 0
    refused = as_token(chain, token, "delete", "configmap", "kube-root-ca.crt", "-n", ns, version=version)
    assert (f'configmaps "kube-root-ca.crt" is forbidden: User "system:serviceaccount:{ns}:lister" cannot delete '
            f'resource "configmaps" in API group "" in the namespace "{ns}"') in refused.stderr
    if version == "1.33":
        who = as_token(chain, token, "auth", "whoami", "-o", "json", version=version)
        assert who.returncode == 0, who.stderr
        info = json.loads(who.stdout)["status"]["userInfo"]
        assert info["username"] == f"system:serviceaccount:{ns}:lister"
        assert info["groups"] == ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"]
