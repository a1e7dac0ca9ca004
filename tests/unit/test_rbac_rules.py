"""RBAC rule evaluation as kube's RuleAllows and VisitRulesFor decide it."""

from __future__ import annotations

from typing import Any

import pytest
from genericapi.apimachinery.authorization import Attributes, Decision, forbidden
from genericapi.apimachinery.rbac import RBACAuthorizer, rule_allows
from genericapi.apimachinery.user import UserInfo
from support.rbac_source import DictSource

ALICE = UserInfo("alice", ("devs", "system:authenticated"))
ROBOT = UserInfo("system:serviceaccount:team:robot", ("system:serviceaccounts", "system:authenticated"))


def attrs(verb: str, resource: str = "", sub: str = "", group: str = "", ns: str = "", name: str = "",
          path: str = "", user: UserInfo = ALICE) -> Attributes:
    return Attributes(user, verb, bool(resource), namespace=ns, api_group=group, resource=resource,
                      subresource=sub, name=name, path=path)


@pytest.mark.parametrize(("rule", "request_", "allowed"), [
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, attrs("get", "pods"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, attrs("list", "pods"), False),
    ({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, attrs("delete", "deployments", group="apps"), True),
    ({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["pods"]}, attrs("get", "pods"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, attrs("get", "pods", sub="log"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}, attrs("get", "pods", sub="log"), True),
    ({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["*/scale"]},
     attrs("update", "deployments", sub="scale", group="apps"), True),
    ({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments/*"]},
     attrs("update", "deployments", sub="scale", group="apps"), False),  # not a wildcard in kube
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]},
     attrs("get", "configmaps", name="a"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]},
     attrs("get", "configmaps", name="b"), False),
    ({"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]},
     attrs("list", "configmaps"), False),
    ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, attrs("get", path="/healthz"), True),
    ({"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}, attrs("get", path="/apis/apps/v1"), True),
    ({"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}, attrs("get", path="/api"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, attrs("get", path="/api"), False),
])
def test_rule_allows(rule: dict[str, Any], request_: Attributes, allowed: bool) -> None:
    assert rule_allows(request_, rule) is allowed


def binding(name: str, kind: str, role: str, *subjects: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "roleRef": {"kind": kind, "name": role}, "subjects": list(subjects)}


async def test_bindings_grant_in_their_scope_only() -> None:
    src = DictSource()
    src.cluster_roles["reader"] = {"rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]}
    src.roles[("team", "cm")] = {"rules": [{"verbs": ["*"], "apiGroups": [""], "resources": ["configmaps"]}]}
    src.rbs["team"] = [binding("r1", "ClusterRole", "reader", {"kind": "Group", "name": "devs"}),
                       binding("r2", "Role", "cm", {"kind": "ServiceAccount", "name": "robot"})]
    rbac = RBACAuthorizer(src)
    decision, reason = await rbac.authorize(attrs("list", "pods", ns="team"))
    assert decision is Decision.ALLOW
    assert reason == 'RBAC: allowed by RoleBinding "r1/team" of ClusterRole "reader" to Group "devs"'
    assert (await rbac.authorize(attrs("list", "pods", ns="other")))[0] is Decision.NO_OPINION
    assert (await rbac.authorize(attrs("list", "pods")))[0] is Decision.NO_OPINION  # cluster scope
    assert (await rbac.authorize(attrs("delete", "configmaps", ns="team", user=ROBOT)))[0] is Decision.ALLOW
    assert (await rbac.authorize(attrs("delete", "configmaps", ns="team")))[0] is Decision.NO_OPINION
    src.crbs.append(binding("ghost", "ClusterRole", "missing", {"kind": "User", "name": "alice"}))
    decision, reason = await rbac.authorize(attrs("get", "secrets", ns="team"))
    assert decision is Decision.NO_OPINION
    assert reason == 'RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found'
    rules = await rbac.rules_for(ALICE, "team")
    assert rules.incomplete and rules.resource_rules[0].resources == ("pods",)


def test_forbidden_wording_is_kubes() -> None:
    err = forbidden(attrs("list", "configmaps", ns="default"), "")
    assert (err.code, err.reason) == (403, "Forbidden")
    assert err.message == ('configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" '
                           'in the namespace "default"')
    err = forbidden(attrs("get", "deployments", sub="scale", group="apps", name="web"), "")
    assert err.message == ('deployments.apps "web" is forbidden: User "alice" cannot get resource '
                           '"deployments/scale" in API group "apps" at the cluster scope')
    assert err.details == {"name": "web", "group": "apps", "kind": "deployments"}
    err = forbidden(attrs("get", path="/metrics"), "RBAC: x")
    assert err.message == 'forbidden: User "alice" cannot get path "/metrics": RBAC: x' and err.details == {}
