"""kube 1.33's validation of the authorization.k8s.io/v1 access reviews, and the AlwaysAllow authorizer."""

from __future__ import annotations

import asyncio

from coreapi import accessreviews
from coreapi import accessreviews_validation as v
from coreapi.authorizer import AlwaysAllow, Decision
from genericapi.apimachinery.user import UserInfo

ONE_OF = "exactly one of nonResourceAttributes or resourceAttributes must be specified"


def messages(errs: list[object]) -> list[str]:
    return [str(e) for e in errs]


def test_exactly_one_kind_of_attributes() -> None:
    assert messages(v.validate_self_subject_access_review({"spec": {}})) == [
        f'spec.resourceAttributes: Invalid value: "null": {ONE_OF}']
    both = {"spec": {"resourceAttributes": {}, "nonResourceAttributes": {"path": "/a\"b", "verb": "get"}}}
    assert messages(v.validate_self_subject_access_review(both)) == [
        'spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:"/a\\"b", Verb:"get"}: '
        "cannot be specified in combination with resourceAttributes"]
    assert v.validate_self_subject_access_review({"spec": {"resourceAttributes": {"verb": "get"}}}) == []


def test_subject_needs_a_user_or_group() -> None:
    spec = {"resourceAttributes": {"verb": "get"}}
    assert messages(v.validate_subject_access_review({"spec": spec})) == [
        'spec.user: Invalid value: "": at least one of user or group must be specified']
    assert v.validate_subject_access_review({"spec": {**spec, "groups": ["g"]}}) == []
    assert v.validate_subject_access_review({"spec": {**spec, "user": "u"},
                                             "metadata": {"creationTimestamp": None}}) == []


def test_metadata_must_be_empty() -> None:
    errs = v.validate_subject_access_review({"spec": {"user": "u", "resourceAttributes": {}},
                                             "metadata": {"name": "n", "labels": {"a": "b"}}})
    assert len(errs) == 1 and errs[0].field == "metadata"
    assert str(errs[0]).startswith('metadata: Invalid value: v1.ObjectMeta{Name:"n", GenerateName:"", Namespace:""')
    assert 'Labels:map[string]string{"a":"b"}' in str(errs[0])
    assert str(errs[0]).endswith(": must be empty")


def test_local_review_namespace_rules() -> None:
    ok = {"metadata": {"namespace": "ns"}, "spec": {"user": "u", "resourceAttributes": {"namespace": "ns"}}}
    assert v.validate_local_subject_access_review(ok) == []
    moved = {**ok, "spec": {"user": "u", "resourceAttributes": {"namespace": "other"}}}
    assert messages(v.validate_local_subject_access_review(moved)) == [
        'spec.resourceAttributes.namespace: Invalid value: "other": must match metadata.namespace']
    non_resource = {**ok, "spec": {"user": "u", "nonResourceAttributes": {"path": "/x", "verb": "get"}}}
    assert messages(v.validate_local_subject_access_review(non_resource)) == [
        'spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:"/x", Verb:"get"}: '
        "disallowed on this kind of request"]
    named = {**ok, "metadata": {"namespace": "ns", "name": "x"}}
    assert messages(v.validate_local_subject_access_review(named))[0].endswith(": must be empty except for namespace")


def test_selector_attributes() -> None:
    def errs(attrs: dict[str, object]) -> list[str]:
        return messages(v.validate_self_subject_access_review({"spec": {"resourceAttributes": attrs}}))

    assert errs({"labelSelector": {}}) == [
        "spec.resourceAttributes.labelSelector.requirements: Required value: when "
        "spec.resourceAttributes.labelSelector is specified, requirements or rawSelector is required"]
    assert errs({"fieldSelector": {"rawSelector": "a=b", "requirements": [{"key": "a", "operator": "In",
                                                                            "values": ["b"]}]}}) == [
        'spec.resourceAttributes.fieldSelector.rawSelector: Invalid value: "a=b": may not specified at the same time '
        "as requirements"]
    assert errs({"fieldSelector": {"requirements": [{"key": "", "operator": "In"}]}}) == [
        "spec.resourceAttributes.fieldSelector.requirements[0].key: Required value: must be specified",
        "spec.resourceAttributes.fieldSelector.requirements[0].values: Required value: must be specified when "
        "`operator` is 'In' or 'NotIn'"]
    assert errs({"labelSelector": {"requirements": [{"key": "-bad", "operator": "In"}]}})[-1].startswith(
        'spec.resourceAttributes.labelSelector.requirements[0].key: Invalid value: "-bad": name part must consist')
    assert errs({"labelSelector": {"requirements": [{"key": "a", "operator": "Exists", "values": ["x"]}]}}) == [
        "spec.resourceAttributes.labelSelector.requirements[0].values: Forbidden: may not be specified when "
        "`operator` is 'Exists' or 'DoesNotExist'"]
    # an operator this server does not know is allowed (newer clients)
    assert errs({"labelSelector": {"requirements": [{"key": "a", "operator": "Near", "values": ["x"]}]}}) == []


def test_always_allow() -> None:
    who = UserInfo("alice", ("devs",))
    attrs = accessreviews.attributes_from({"resourceAttributes": {"verb": "delete", "resource": "nodes"}}, who)
    assert attrs.resource_request and attrs.verb == "delete" and attrs.resource == "nodes"
    decision, reason = asyncio.run(AlwaysAllow().authorize(attrs))
    assert (decision, reason) == (Decision.ALLOW, "")
    assert accessreviews.review_status(decision, reason) == {"allowed": True}
    assert accessreviews.review_status(Decision.DENY, "no") == {"allowed": False, "denied": True, "reason": "no"}
    rules = asyncio.run(AlwaysAllow().rules_for(who, "default"))
    assert accessreviews.rules_status(rules) == {
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}], "incomplete": False}
    subject = accessreviews.spec_user({"user": "bob", "groups": ["g"], "uid": "1", "extra": {"k": ["v"]}})
    assert subject == UserInfo("bob", ("g",), "1", {"k": ["v"]})
