"""Which webhook a write reaches (genericapi.admission.rules) and the review checks (admission.review)."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from genericapi.admission import rules
from genericapi.admission.review import (
    InvalidResponse,
    Invocation,
    build_review,
    denial,
    review_version,
    verify_response,
)
from genericapi.apimachinery.admission import Attributes
from genericapi.apimachinery.user import UserInfo


def attrs(operation: str = "CREATE", group: str = "", version: str = "v1", resource: str = "pods",
          subresource: str = "", namespace: str = "ns", name: str = "p", obj: dict[str, Any] | None = None,
          old: dict[str, Any] | None = None, kind: str = "Pod") -> Attributes:
    return Attributes(operation, group, version, kind, resource, subresource, namespace, name,
                      obj if obj is not None else {"metadata": {"name": name}}, old, UserInfo("alice", ("dev",)))


def rule(**fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
    out.update(fields)
    return out


@pytest.mark.parametrize(("r", "a", "matches"), [
    (rule(), attrs(), True),
    (rule(operations=["*"]), attrs("DELETE"), True),
    (rule(operations=["UPDATE"]), attrs(), False),
    (rule(apiGroups=["*"], apiVersions=["*"]), attrs(group="apps", version="v1beta1"), True),
    (rule(apiGroups=["apps"]), attrs(), False),
    (rule(resources=["*"]), attrs(), True),
    (rule(resources=["*"]), attrs(subresource="status"), False),  # a bare resource never matches subresources
    (rule(resources=["pods"]), attrs(subresource="status"), False),
    (rule(resources=["pods/status"]), attrs(subresource="status"), True),
    (rule(resources=["pods/*"]), attrs(subresource="exec"), True),
    (rule(resources=["pods/*"]), attrs(), True),  # kube: sub "*" matches the resource itself too
    (rule(resources=["*/status"]), attrs(resource="deployments", subresource="status"), True),
    (rule(resources=["*/*"]), attrs(subresource="log"), True),
    (rule(resources=["*/*"]), attrs(), True),
    (rule(scope="Namespaced"), attrs(), True),
    (rule(scope="Cluster"), attrs(), False),
    (rule(scope="Cluster", resources=["nodes"]), attrs(resource="nodes", namespace=""), True),
    (rule(scope="Namespaced", resources=["nodes"]), attrs(resource="nodes", namespace=""), False),
    # a Namespace is cluster-scoped, whatever its own name says
    (rule(scope="Cluster", resources=["namespaces"]), attrs(resource="namespaces", namespace="", name="x"), True),
    (rule(scope="Namespaced", resources=["namespaces"]), attrs(resource="namespaces", namespace="", name="x"), False),
    (rule(scope="*"), attrs(), True),
])
def test_rule_matching(r: dict[str, Any], a: Attributes, matches: bool) -> None:
    assert rules.rule_matches(r, a) is matches


def test_equivalent_resource_override() -> None:
    r = rule(apiGroups=["apps"], apiVersions=["v1"], resources=["deployments"])
    a = attrs(group="apps", version="v1beta1", resource="deployments")
    assert not rules.rule_matches(r, a)
    assert rules.rule_matches(r, a, rules.Resource("apps", "v1", "deployments"))


def test_object_selector_matches_new_or_old_labels() -> None:
    sel = rules.parsed_selector({"matchLabels": {"team": "a"}})
    new = {"metadata": {"labels": {"team": "a"}}}
    assert rules.object_selector_matches(sel, attrs(obj=new))
    assert rules.object_selector_matches(sel, attrs("DELETE", obj={}, old=new))
    assert not rules.object_selector_matches(sel, attrs(obj={"metadata": {}}))
    assert rules.object_selector_matches(rules.parsed_selector({}), attrs(obj={"metadata": {}}))
    assert rules.object_selector_matches(rules.parsed_selector(None), attrs())


def test_namespace_selector_scope() -> None:
    assert rules.namespace_selector_applies(attrs())
    assert not rules.namespace_selector_applies(attrs(resource="nodes", namespace=""))
    ns = attrs(resource="namespaces", namespace="", name="team-a", obj={"metadata": {"labels": {"env": "prod"}}})
    assert rules.namespace_selector_applies(ns)
    assert rules.own_namespace_labels(ns) == {"env": "prod"}
    assert rules.own_namespace_labels(attrs("DELETE", resource="namespaces", namespace="", name="x")) is None
    assert rules.scope_namespace(ns) == "team-a"


def test_admission_configurations_are_exempt() -> None:
    assert rules.exempt(attrs(group="admissionregistration.k8s.io", kind="ValidatingWebhookConfiguration",
                              resource="validatingwebhookconfigurations", namespace=""))
    assert not rules.exempt(attrs())


def test_review_request_and_versions() -> None:
    a = attrs("UPDATE", subresource="status", old={"metadata": {"name": "p"}})
    a.options = {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}
    inv = Invocation("", "v1", "pods", "Pod", a.obj, a.old_obj)
    uid, body = build_review(a, inv, "v1")
    review = orjson.loads(body)
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    req = review["request"]
    assert req["uid"] == uid and req["operation"] == "UPDATE" and req["subResource"] == "status"
    assert req["requestSubResource"] == "status" and req["namespace"] == "ns" and req["name"] == "p"
    assert req["userInfo"] == {"username": "alice", "groups": ["dev"]}
    assert req["options"]["kind"] == "UpdateOptions" and req["dryRun"] is False
    assert review_version(["v2", "v1beta1", "v1"]) == "v1beta1"
    assert review_version(["v2"]) == ""


def _review(uid: str, **response: Any) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": uid, **response}}


def test_response_checks_with_kubes_words() -> None:
    patch = base64.b64encode(b'[{"op":"add","path":"/x","value":1}]').decode()
    verdict = verify_response("u", "v1", True, _review("u", allowed=True, patch=patch, patchType="JSONPatch",
                                                       warnings=["w"], auditAnnotations={"k": "v"}))
    assert verdict.allowed and verdict.patch.startswith(b"[") and verdict.warnings == ["w"]
    cases = [
        (_review("other", allowed=True), 'expected response.uid="u", got "other"'),
        ({**_review("u"), "apiVersion": "admission.k8s.io/v1beta1"},
         "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got "
         "admission.k8s.io/v1beta1, Kind=AdmissionReview"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "webhook response was absent"),
        (_review("u", allowed=True, patch=patch), "webhook returned response.patch but not response.patchType"),
        (_review("u", allowed=True, patchType="MergePatch"), 'webhook returned invalid response.patchType of '
                                                             '"MergePatch"'),
    ]
    for doc, message in cases:
        with pytest.raises(InvalidResponse) as err:
            verify_response("u", "v1", True, doc)
        assert str(err.value) == message
    with pytest.raises(InvalidResponse, match=r"validating webhook may not return response\.patchType"):
        verify_response("u", "v1", False, _review("u", allowed=True, patch=patch, patchType="JSONPatch"))


def test_denial_status() -> None:
    err = denial("x.example.com", {"code": 200, "message": "nope"})
    assert (err.code, err.message) == (400, 'admission webhook "x.example.com" denied the request: nope')
    err = denial("x.example.com", {"code": 403, "reason": "Forbidden"})
    assert (err.code, err.reason, err.message) == (
        403, "Forbidden", 'admission webhook "x.example.com" denied the request: Forbidden')
    assert denial("x.example.com", None).message == \
        'admission webhook "x.example.com" denied the request without explanation'
