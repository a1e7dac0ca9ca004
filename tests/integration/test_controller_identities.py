"""core-api's controllers act as their own service accounts, authorized by RBAC as kube's are.

kube-controller-manager with ``--use-service-account-credentials`` runs each controller as
``system:serviceaccount:kube-system:<controller>``, bound to ``system:controller:<controller>``.
Take a permission out of one controller's ClusterRole (``autoupdate: "false"`` so the bootstrap
reconciler leaves it) and that controller's writes are refused with kube's 403, logged as it
retries, while the other controllers go on; put it back and the controller catches up.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
from support.procs import ChainHandle
from support.waiting import eventually

pytestmark = pytest.mark.integration

ROLE = "system:controller:service-account-controller"
ROLE_PATH = f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{ROLE}"
SA_USER = "system:serviceaccount:kube-system:service-account-controller"


def get(chain: ChainHandle, path: str) -> dict[str, Any] | None:
    status, body = chain.json("GET", path)
    return body if status == 200 else None


def core_api_log(chain: ChainHandle) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted((chain.chain.data_dir / "logs").glob("core-api*.log")))


def can_i(chain: ChainHandle, verb: str, resource: str, ns: str, user: str) -> str:
    out = chain.kubectl("auth", "can-i", verb, resource, "-n", ns, "--as", user, check=False)
    return out.stdout.strip()


def put_role(chain: ChainHandle, role: dict[str, Any]) -> None:
    status, body = chain.json("PUT", ROLE_PATH, role)
    assert status == 200, body


def test_a_controller_acts_as_its_service_account_and_rbac_decides(chain: ChainHandle) -> None:
    original = get(chain, ROLE_PATH)
    assert original is not None
    assert {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["create"]} in original["rules"]
    assert can_i(chain, "create", "serviceaccounts", "default", SA_USER) == "yes"
    # The controllers are no superusers: the service account controller may not, e.g., delete them.
    assert can_i(chain, "delete", "serviceaccounts", "default", SA_USER) == "no"

    reduced = copy.deepcopy(original)
    reduced["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] = "false"
    reduced["rules"] = [r for r in original["rules"] if "serviceaccounts" not in r.get("resources", [])]
    put_role(chain, reduced)
    try:
        eventually(lambda: can_i(chain, "create", "serviceaccounts", "default", SA_USER) == "no",
                   timeout=30, what="the reduced role in force")
        ns = f"ident-{uuid.uuid4().hex[:6]}"
        chain.kubectl("create", "namespace", ns)
        message = (f'serviceaccounts is forbidden: User "{SA_USER}" cannot create resource "serviceaccounts" '
                   f'in API group "" in the namespace "{ns}"')
        eventually(lambda: message in core_api_log(chain), timeout=30, what="the controller's 403 in core-api's log")
        # Other controllers, under their own roles, still do their work in that namespace.
        eventually(lambda: get(chain, f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"), timeout=30)
        assert get(chain, f"/api/v1/namespaces/{ns}/serviceaccounts/default") is None
    finally:
        current = get(chain, ROLE_PATH)
        assert current is not None
        restored = copy.deepcopy(original)
        restored["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        put_role(chain, restored)
    eventually(lambda: can_i(chain, "create", "serviceaccounts", ns, SA_USER) == "yes", timeout=30)
    chain.kubectl("label", "namespace", ns, "touched=yes")  # an event: the controller tries again at once
    sa = eventually(lambda: get(chain, f"/api/v1/namespaces/{ns}/serviceaccounts/default"), timeout=90)
    assert sa["metadata"]["namespace"] == ns
