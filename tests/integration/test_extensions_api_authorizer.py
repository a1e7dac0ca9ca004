"""extensions-api's authorizer (``--authorization-mode``), on real etcd: with RBAC it answers from the
Roles and RoleBindings already in etcd as soon as the server is ready (readiness waits for the RBAC watch
caches, as core-api's does), and its admission plugins (ValidatingAdmissionPolicy, the webhooks'
matchConditions) ask that one authorizer; with AlwaysAllow everyone may do everything."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from extensionsapi.server import build_server
from genericapi.admission.webhooks import MutatingWebhook, ValidatingWebhook
from genericapi.apimachinery.authorization import AlwaysAllow, Attributes, Decision
from genericapi.apimachinery.policy.plugin import ValidatingAdmissionPolicyPlugin
from genericapi.apimachinery.user import UserInfo
from genericapi.server.apiserver import ServerConfig

pytestmark = pytest.mark.integration

GROUP = "vapauthz.example.com"
NS = "team"


def delete_widgets(user: str) -> Attributes:
    return Attributes(user=UserInfo(user, ("system:authenticated",)), verb="delete", resource_request=True,
                      namespace=NS, api_group=GROUP, api_version="v1", resource="widgets")


def rbac_objects() -> dict[str, dict[str, Any]]:
    """A Role that may delete widgets in ``team``, bound to alice only (keys under the etcd prefix)."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "widget-admin", "namespace": NS, "uid": str(uuid.uuid4())},
            "rules": [{"apiGroups": [GROUP], "resources": ["widgets"], "verbs": ["create", "delete"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "alice-widgets", "namespace": NS, "uid": str(uuid.uuid4())},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "widget-admin"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}
    return {f"roles/{NS}/widget-admin": role, f"rolebindings/{NS}/alice-widgets": binding}


async def test_rbac_answers_from_etcd_once_ready_and_admission_asks_it(etcd_server: Any) -> None:
    prefix = f"/extauthz-{uuid.uuid4().hex[:8]}"
    server, _controller = build_server(ServerConfig("extensions-api", [etcd_server.endpoint], etcd_prefix=prefix),
                                       authorization_mode="RBAC")
    for key, obj in rbac_objects().items():
        await server.etcd.put(f"{prefix}/{key}".encode(), json.dumps(obj).encode())
    await server.start()  # returns once ready: no waiting below
    try:
        policies = [p for p in server.admission.validating if isinstance(p, ValidatingAdmissionPolicyPlugin)]
        hooks = [p for p in (*server.admission.mutating, *server.admission.validating)
                 if isinstance(p, (MutatingWebhook, ValidatingWebhook))]
        assert len(policies) == 1 and len(hooks) == 2
        authorizer = policies[0].authorizer
        assert authorizer is not None and not isinstance(authorizer, AlwaysAllow)
        assert all(h.authorizer is authorizer for h in hooks)  # one authorizer, as kube-apiserver's
        assert (await authorizer.authorize(delete_widgets("alice")))[0] is Decision.ALLOW
        assert (await authorizer.authorize(delete_widgets("bob")))[0] is not Decision.ALLOW
        admin = Attributes(user=UserInfo("admin", ("system:masters",)), verb="delete", resource_request=True,
                           namespace=NS, api_group=GROUP, resource="widgets")
        assert (await authorizer.authorize(admin))[0] is Decision.ALLOW  # system:masters first
    finally:
        await server.stop()


async def test_always_allow_is_the_default(etcd_server: Any) -> None:
    prefix = f"/extauthz-{uuid.uuid4().hex[:8]}"
    server, _controller = build_server(ServerConfig("extensions-api", [etcd_server.endpoint], etcd_prefix=prefix))
    try:
        policies = [p for p in server.admission.validating if isinstance(p, ValidatingAdmissionPolicyPlugin)]
        assert isinstance(policies[0].authorizer, AlwaysAllow)
        assert (await policies[0].authorizer.authorize(delete_widgets("bob")))[0] is Decision.ALLOW
    finally:
        await server.etcd.close()
