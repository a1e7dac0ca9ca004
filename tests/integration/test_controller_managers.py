"""The field managers our own controllers record, as kube's do.

kube-controller-manager's controllers write with its user agent, so their Update entries say
``kube-controller-manager`` (the namespace controller's status, the root CA publisher's
ConfigMap); the ClusterRole aggregation and ValidatingAdmissionPolicy status controllers
server-side apply, forced, as ``clusterrole-aggregation-controller`` and
``validatingadmissionpolicy-status``; kube-apiserver's own writes (CRD status, the RBAC
bootstrap roles) say ``kube-apiserver``.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration


def get(chain: ChainHandle, *args: str) -> dict[str, Any]:
    return dict(json.loads(chain.kubectl("get", *args, "-o", "json", "--show-managed-fields").stdout))


def by_manager(obj: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"], e.get("subresource", "")): e
            for e in obj["metadata"].get("managedFields") or []}


def eventually(check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except (AssertionError, KeyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def test_root_ca_configmap_is_kube_controller_managers(chain: ChainHandle) -> None:
    chain.kubectl("create", "namespace", "ctl-managers-ca")

    def check() -> dict[str, Any]:
        cm = get(chain, "-n", "ctl-managers-ca", "configmap", "kube-root-ca.crt")
        [entry] = cm["metadata"]["managedFields"]
        return dict(entry)

    entry = eventually(check)
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == ("kube-controller-manager", "Update", "v1")
    assert entry["fieldsV1"] == {"f:data": {".": {}, "f:ca.crt": {}},
                                 "f:metadata": {"f:annotations": {".": {}, "f:kubernetes.io/description": {}}}}
    # the default ServiceAccount names nothing but itself: nothing to own, no entry
    sa = eventually(lambda: get(chain, "-n", "ctl-managers-ca", "serviceaccount", "default"))
    assert "managedFields" not in sa["metadata"]


def test_namespace_controller_writes_status_as_kube_controller_manager(chain: ChainHandle) -> None:
    ns = "ctl-managers-ns"
    chain.kubectl("create", "namespace", ns)
    chain.kubectl("create", "-n", ns, "configmap", "held")
    chain.kubectl("patch", "-n", ns, "configmap", "held", "--type=merge",
                  "-p", '{"metadata":{"finalizers":["example.com/hold"]}}')
    chain.kubectl("delete", "namespace", ns, "--wait=false")
    try:
        def check() -> dict[str, Any]:
            got = by_manager(get(chain, "namespace", ns))
            entry = got[("kube-controller-manager", "Update", "status")]
            assert 'k:{"type":"NamespaceFinalizersRemaining"}' in entry["fieldsV1"]["f:status"]["f:conditions"]
            return entry

        entry = eventually(check)
        assert entry["apiVersion"] == "v1"
    finally:
        chain.kubectl("patch", "-n", ns, "configmap", "held", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')


def test_clusterrole_aggregation_applies_the_rules(chain: ChainHandle) -> None:
    part = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "ctl-managers-part", "labels": {"ctl-managers/agg": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    agg = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": "ctl-managers-agg"},
           "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"ctl-managers/agg": "true"}}]}}
    chain.kubectl("create", "-f", "-", input=json.dumps(part))
    chain.kubectl("create", "-f", "-", input=json.dumps(agg))

    def check() -> dict[str, Any]:
        role = get(chain, "clusterrole", "ctl-managers-agg")
        assert role.get("rules") == part["rules"]
        return by_manager(role)

    got = eventually(check)
    applied = got[("clusterrole-aggregation-controller", "Apply", "")]
    assert applied["fieldsV1"] == {"f:rules": {}}
    assert got[("kubectl-create", "Update", "")]["fieldsV1"] == {
        "f:aggregationRule": {".": {}, "f:clusterRoleSelectors": {}}}
    # the bootstrap roles: kube-apiserver created them, the controller applied the rules
    admin = by_manager(get(chain, "clusterrole", "admin"))
    assert admin[("clusterrole-aggregation-controller", "Apply", "")]["fieldsV1"] == {"f:rules": {}}
    created = admin[("kube-apiserver", "Update", "")]["fieldsV1"]
    assert created["f:aggregationRule"] == {".": {}, "f:clusterRoleSelectors": {}}
    assert "f:rbac.authorization.kubernetes.io/autoupdate" in created["f:metadata"]["f:annotations"]


def test_crd_status_is_kube_apiservers(chain: ChainHandle) -> None:
    group = "ctlmanagers.example.com"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"things.{group}"},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "things", "singular": "thing", "kind": "Thing", "listKind": "ThingList"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    chain.kubectl("create", "-f", "-", input=json.dumps(crd))
    chain.kubectl("wait", "--for", "condition=Established", f"crd/things.{group}", "--timeout=30s")
    got = by_manager(get(chain, "crd", f"things.{group}"))
    status = got[("kube-apiserver", "Update", "status")]
    assert status["apiVersion"] == "apiextensions.k8s.io/v1"
    fields = status["fieldsV1"]["f:status"]
    assert set(fields["f:acceptedNames"]) >= {"f:kind", "f:listKind", "f:plural", "f:singular"}
    assert {'k:{"type":"Established"}', 'k:{"type":"NamesAccepted"}'} <= set(fields["f:conditions"])


def test_validating_admission_policy_status_is_applied(chain: ChainHandle) -> None:
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": "ctl-managers-vap"},
              "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                               "operations": ["CREATE"], "resources": ["configmaps"]}]},
                       "validations": [{"expression": "object.metadata.name != 'forbidden'"}]}}
    chain.kubectl("create", "-f", "-", input=json.dumps(policy))

    def check() -> dict[str, Any]:
        got = by_manager(get(chain, "validatingadmissionpolicy", "ctl-managers-vap"))
        return got[("validatingadmissionpolicy-status", "Apply", "status")]

    entry = eventually(check)
    assert entry["fieldsV1"] == {"f:status": {"f:observedGeneration": {}, "f:typeChecking": {}}}
