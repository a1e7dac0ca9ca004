"""kube 1.33's default RBAC policy as data, its reconciliation rules and ClusterRole aggregation.

The reconcile rules are kube's (``reconciliation`` and ``validation.Covers``): union, never removal,
``autoupdate: "false"`` protects; aggregation follows kube's order (selectors, then roles by name)
and de-duplication.
"""

from __future__ import annotations

import copy
from typing import Any

from coreapi import rbac_policy as policy
from coreapi.controllers.clusterroleaggregation import aggregated_rules
from coreapi.rbac_bootstrap import defaults
from coreapi.rbac_policy import AUTOUPDATE, BOOTSTRAP_LABEL, rule
from coreapi.rbac_reconcile import (
    breakdown,
    missing_rules,
    needs_recreate,
    protected,
    reconcile_binding,
    reconcile_role,
)


def by_name(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o for o in objs}


def test_every_default_has_kubes_label_and_annotation_and_unique_name() -> None:
    for plural, objs in defaults().items():
        names = [f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in objs]
        assert len(names) == len(set(names)), plural
        for o in objs:
            assert o["metadata"]["labels"][BOOTSTRAP_LABEL] == "rbac-defaults"
            assert o["metadata"]["annotations"][AUTOUPDATE] == "true"


def test_known_defaults_present() -> None:
    roles = by_name(defaults()["clusterroles"])
    for name in ("cluster-admin", "admin", "edit", "view", "system:aggregate-to-admin", "system:aggregate-to-edit",
                 "system:aggregate-to-view", "system:discovery", "system:basic-user", "system:public-info-viewer",
                 "system:monitoring", "system:service-account-issuer-discovery", "system:auth-delegator",
                 "system:kube-aggregator", "system:heapster", "system:node-proxier", "system:kube-controller-manager",
                 "system:kube-scheduler", "system:volume-scheduler", "system:node",
                 "system:certificates.k8s.io:kube-apiserver-client-approver",
                 "system:controller:namespace-controller", "system:controller:generic-garbage-collector",
                 "system:controller:clusterrole-aggregation-controller"):
        assert f"/{name}" in roles, name
    assert roles["/view"]["aggregationRule"] == {
        "clusterRoleSelectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]}
    assert roles["/view"]["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert roles["/edit"]["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    assert roles["/system:aggregate-to-admin"]["rules"] == [
        {"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings", "roles"],
         "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]}]
    assert roles["/system:public-info-viewer"]["rules"] == [
        {"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]
    bindings = by_name(defaults()["clusterrolebindings"])
    assert bindings["/cluster-admin"]["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}]
    assert [s["name"] for s in bindings["/system:public-info-viewer"]["subjects"]] == [
        "system:authenticated", "system:unauthenticated"]
    assert bindings["/system:service-account-issuer-discovery"]["subjects"][0]["name"] == "system:serviceaccounts"
    assert bindings["/system:controller:namespace-controller"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "namespace-controller", "namespace": "kube-system"}]
    nsroles = by_name(defaults()["roles"])
    assert "kube-system/extension-apiserver-authentication-reader" in nsroles
    assert "kube-public/system:controller:bootstrap-signer" in nsroles
    assert "kube-system/system::extension-apiserver-authentication-reader" in by_name(defaults()["rolebindings"])


def test_rule_builder_sorts_like_kube() -> None:
    assert rule(("watch", "get", "list"), "", ("pods", "configmaps")) == {
        "apiGroups": [""], "resources": ["configmaps", "pods"], "verbs": ["get", "list", "watch"]}
    assert rule("get", urls=("/b", "/a")) == {"nonResourceURLs": ["/a", "/b"], "verbs": ["get"]}


def test_breakdown_and_covers() -> None:
    r = rule(("get", "list"), ("", "apps"), ("pods",), names=("a",))
    assert len(breakdown(r)) == 4
    # wildcards cover; subresource wildcards cover; URL prefixes cover
    assert missing_rules([rule("*", "*", "*")], [r]) == []
    assert missing_rules([rule("get", "", "*/scale")], [rule("get", "", "deployments/scale")]) == []
    assert missing_rules([rule("get", urls=("/api/*",))], [rule("get", urls=("/api/v1",))]) == []
    # a name-restricted owner does not cover an unrestricted rule
    assert missing_rules([rule("get", "", "pods", names=("a",))], [rule("get", "", "pods")]) == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    assert missing_rules([rule("get", "", "pods")], [rule(("get", "delete"), "", "pods")]) == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]


def test_reconcile_role_unions_and_keeps_user_additions() -> None:
    expected = policy.cluster_role("r", [rule(("get", "list"), "", "pods")])
    stored = copy.deepcopy(expected)
    assert reconcile_role(stored, expected) is None  # nothing to do
    stored["rules"] = [rule("get", "", "pods"), rule("delete", "", "secrets")]
    stored["metadata"]["labels"] = {"mine": "yes"}
    fixed = reconcile_role(stored, expected)
    assert fixed is not None
    assert fixed["rules"] == [rule("get", "", "pods"), rule("delete", "", "secrets"),
                              {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    assert fixed["metadata"]["labels"] == {BOOTSTRAP_LABEL: "rbac-defaults", "mine": "yes"}
    stored["metadata"]["annotations"] = {AUTOUPDATE: "false"}
    assert protected(stored) and reconcile_role(stored, expected) is None


def test_reconcile_role_adds_aggregation_selectors() -> None:
    expected = policy.cluster_role("view", [], aggregate_from="view")
    stored = copy.deepcopy(expected)
    stored["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}
    fixed = reconcile_role(stored, expected)
    assert fixed is not None
    assert fixed["aggregationRule"]["clusterRoleSelectors"] == [
        {"matchLabels": {"x": "y"}}, {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]


def test_reconcile_role_drops_an_aggregation_rule_the_default_lacks() -> None:
    expected = policy.cluster_role("system:discovery", [rule("get", urls=("/api",))])
    stored = copy.deepcopy(expected)
    stored["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}
    fixed = reconcile_role(stored, expected)
    assert fixed is not None and "aggregationRule" not in fixed


def test_reconcile_binding() -> None:
    expected = policy.cluster_binding("system:discovery", policy.group("system:authenticated"))
    stored = copy.deepcopy(expected)
    stored["subjects"] = [policy.user("alice")]
    fixed = reconcile_binding(stored, expected)
    assert fixed is not None and fixed["subjects"] == [policy.user("alice"), policy.group("system:authenticated")]
    assert reconcile_binding(fixed, expected) is None
    moved = copy.deepcopy(stored)
    moved["roleRef"]["name"] = "other"
    assert needs_recreate(moved, expected)
    moved["metadata"]["annotations"][AUTOUPDATE] = "false"
    assert not needs_recreate(moved, expected) and reconcile_binding(moved, expected) is None


def _cr(name: str, labels: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "rules": rules}


def test_aggregation_union_order_and_dedup() -> None:
    agg = {"metadata": {"name": "agg"}, "rules": [rule("*", "*", "*")], "aggregationRule": {"clusterRoleSelectors": [
        {"matchLabels": {"b": "1"}}, {"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}}
    r_a = rule("get", "", "pods")
    r_b = rule("list", "", "pods")
    r_c = rule("get", "", "secrets")
    roles = [agg, _cr("zz", {"a": "1"}, [r_a]), _cr("yy", {"b": "1"}, [r_b, r_a]), _cr("aa", {"a": "1", "b": "1"},
                                                                                        [r_c]),
             _cr("other", {}, [rule("*", "*", "*")])]
    # selector 1 matches aa, yy (by name); selector 2 matches aa, zz; duplicates once; agg's own rules ignored
    assert aggregated_rules(agg, roles) == [r_c, r_b, r_a]
    assert aggregated_rules(roles[1], roles) is None  # no aggregationRule
    empty = {"metadata": {"name": "e"}, "aggregationRule": {"clusterRoleSelectors": []}}
    assert aggregated_rules(empty, roles) == []
    everything = {"metadata": {"name": "e"}, "aggregationRule": {"clusterRoleSelectors": [{}]}}
    assert len(aggregated_rules(everything, roles) or []) == 4  # {} selects every role, agg's rules too


def test_default_view_edit_admin_chain() -> None:
    roles = defaults()["clusterroles"]
    names = {r["metadata"]["name"]: r for r in roles}
    view = aggregated_rules(names["view"], roles) or []
    assert view == names["system:aggregate-to-view"]["rules"]
    assert not any("secrets" in r.get("resources", []) for r in view)
    names["view"]["rules"] = view
    edit = aggregated_rules(names["edit"], roles) or []
    assert edit[: len(names["system:aggregate-to-edit"]["rules"])] == names["system:aggregate-to-edit"]["rules"]
    names["edit"]["rules"] = edit
    admin = aggregated_rules(names["admin"], roles) or []
    assert any("rolebindings" in r.get("resources", []) and "create" in r["verbs"] for r in admin)


def test_validatingadmissionpolicy_status_controller_role_is_kubes() -> None:
    """As kube's testdata/controller-roles.yaml and controller-role-bindings.yaml list it (1.33)."""
    name = "system:controller:validatingadmissionpolicy-status-controller"
    role = by_name(defaults()["clusterroles"])["/" + name]
    assert role["metadata"]["labels"] == {"kubernetes.io/bootstrapping": "rbac-defaults"}
    assert role["metadata"]["annotations"] == {"rbac.authorization.kubernetes.io/autoupdate": "true"}
    assert role["rules"] == [
        {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingadmissionpolicies"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingadmissionpolicies/status"],
         "verbs": ["get", "patch", "update"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]}]
    binding = by_name(defaults()["clusterrolebindings"])["/" + name]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "validatingadmissionpolicy-status-controller",
         "namespace": "kube-system"}]
