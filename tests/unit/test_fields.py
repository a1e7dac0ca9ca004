"""Field selector parsing, per-kind support and selectable values (k8s.io/apimachinery/pkg/fields)."""

from __future__ import annotations

import pytest
from coreapi import catalog
from coreapi.strategies import strategy_class
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.fields import (
    FieldSelectorError,
    check_supported,
    convert_field_selector,
    escape_value,
    field_values,
    parse_field_selector,
    register_selectable_fields,
    unescape_value,
    unregister_selectable_fields,
)


@pytest.fixture(autouse=True, scope="module")
def builtin_field_selectors() -> None:
    """core-api registers its kinds' field selectors as it builds their strategies: do the same."""
    for info in catalog.BUILTIN_RESOURCES:
        strategy_class(info)(info)


def test_parse_operators_and_sorting() -> None:
    selector = parse_field_selector("status.phase!=Running,metadata.name==a,spec.nodeName=n1")
    assert [(r.field, r.operator, r.value) for r in selector.requirements] == [
        ("metadata.name", "=", "a"),
        ("spec.nodeName", "=", "n1"),
        ("status.phase", "!=", "Running"),
    ]
    assert str(selector) == "metadata.name=a,spec.nodeName=n1,status.phase!=Running"


def test_empty_and_blank_terms() -> None:
    assert parse_field_selector("").empty
    assert parse_field_selector(",,").empty
    assert parse_field_selector("").matches({"anything": "x"})


def test_escaping_round_trip() -> None:
    selector = parse_field_selector(r"metadata.name=a\,b\=c\\d")
    assert selector.requirements[0].value == "a,b=c\\d"
    assert str(selector) == r"metadata.name=a\,b\=c\\d"
    assert escape_value("x,y=z\\") == r"x\,y\=z\\"
    assert unescape_value("plain") == "plain"


def test_first_operator_wins_and_value_may_be_empty() -> None:
    selector = parse_field_selector("a==b")
    assert selector.requirements[0].value == "b"
    selector = parse_field_selector("spec.nodeName=")
    assert selector.requirements[0].value == ""
    assert selector.matches({})
    assert not selector.matches({"spec.nodeName": "n"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("foo", "invalid selector: 'foo'; can't understand 'foo'"),
        ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
        ("a in (b)", "invalid selector: 'a in (b)'; can't understand 'a in (b)'"),
        (r"a=b\x", r"invalid field selector: invalid escape sequence: \x"),
        ("a=b\\", "invalid field selector: invalid escape sequence: \\"),
        ("a=b=c", "invalid field selector: unescaped character in value: 61"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(FieldSelectorError) as info:
        parse_field_selector(text)
    assert str(info.value) == message


def test_matching_equal_and_not_equal() -> None:
    selector = parse_field_selector("status.phase!=Running,spec.restartPolicy=Always")
    assert selector.matches({"status.phase": "Pending", "spec.restartPolicy": "Always"})
    assert not selector.matches({"status.phase": "Running", "spec.restartPolicy": "Always"})
    assert not selector.matches({"status.phase": "Pending", "spec.restartPolicy": "Never"})
    assert selector.requires_exact_match("spec.restartPolicy") == "Always"
    assert selector.requires_exact_match("status.phase") is None


def _bad_request(group: str, resource: str, text: str) -> APIError:
    with pytest.raises(APIError) as info:
        check_supported(group, "v1", resource, parse_field_selector(text))
    assert info.value.code == 400
    assert info.value.reason == "BadRequest"
    return info.value


def test_unsupported_field_messages() -> None:
    assert _bad_request("", "pods", "spec.foo=x").message == "field label not supported: spec.foo"
    assert _bad_request("", "configmaps", "data.x=1").message == (
        '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"'
    )
    assert _bad_request("networking.k8s.io", "ingresses", "foo.bar=baz").message == (
        '"foo.bar" is not a known field selector: only "metadata.name", "metadata.namespace"'
    )
    assert _bad_request("batch", "jobs", "status.active=1").message == (
        'field label "status.active" not supported for Job'
    )
    # cluster-scoped core kinds do not accept metadata.namespace
    assert _bad_request("", "nodes", "metadata.namespace=x").message == (
        "field label not supported: metadata.namespace"
    )
    assert _bad_request("", "namespaces", "metadata.namespace=x").message == (
        "field label not supported: metadata.namespace"
    )
    # apps/v1 registers no conversion: status.replicas is rejected at the handler
    assert "is not a known field selector" in _bad_request("apps", "replicasets", "status.replicas=1").message


@pytest.mark.parametrize(
    ("group", "resource", "text"),
    [
        ("", "pods", "spec.nodeName=n,status.phase=Running,spec.hostNetwork=true,status.podIPs=1.2.3.4"),
        ("", "pods", "spec.schedulerName=s,spec.serviceAccountName=sa,status.nominatedNodeName=x"),
        ("", "events", "involvedObject.kind=Pod,reason=Failed,type=Warning,source=kubelet"),
        ("events.k8s.io", "events", "regarding.name=x,reportingController=c,type=Normal"),
        ("", "secrets", "type=Opaque,metadata.namespace=default"),
        ("", "services", "spec.clusterIP=None,spec.type=ClusterIP"),
        ("", "nodes", "spec.unschedulable=false,metadata.name=n"),
        ("", "namespaces", "status.phase=Active"),
        ("", "replicationcontrollers", "status.replicas=2"),
        ("batch", "jobs", "status.successful=1"),
        ("certificates.k8s.io", "certificatesigningrequests", "spec.signerName=x"),
        ("apps", "deployments", "metadata.name=x,metadata.namespace=y"),
    ],
)
def test_supported_fields(group: str, resource: str, text: str) -> None:
    check_supported(group, "v1", resource, parse_field_selector(text))


def test_conversion_renames_labels() -> None:
    converted = convert_field_selector("", "v1", "pods", parse_field_selector("spec.host=n1"))
    assert str(converted) == "spec.nodeName=n1"
    converted = convert_field_selector(
        "events.k8s.io", "v1", "events", parse_field_selector("regarding.name=p,reportingController=k")
    )
    assert str(converted) == "involvedObject.name=p,reportingComponent=k"


POD = {
    "metadata": {"name": "web-0", "namespace": "default"},
    "spec": {
        "nodeName": "n1",
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "hostNetwork": True,
    },
    "status": {"phase": "Running", "podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}]},
}


def test_pod_field_values() -> None:
    values = field_values("", "pods", POD)
    assert values == {
        "metadata.name": "web-0",
        "metadata.namespace": "default",
        "spec.nodeName": "n1",
        "spec.restartPolicy": "Always",
        "spec.schedulerName": "default-scheduler",
        "spec.serviceAccountName": "default",
        "spec.hostNetwork": "true",
        "status.phase": "Running",
        "status.podIP": "10.0.0.5",
        "status.nominatedNodeName": "",
    }
    bare = field_values("", "pods", {"metadata": {"name": "p", "namespace": "ns"}})
    assert bare["spec.hostNetwork"] == "false"
    assert bare["status.podIP"] == ""
    assert parse_field_selector("status.podIPs=10.0.0.5").matches(values) is False  # not in the field set


def test_other_field_values() -> None:
    node = field_values("", "nodes", {"metadata": {"name": "n"}, "spec": {"unschedulable": True}})
    assert node == {"metadata.name": "n", "spec.unschedulable": "true"}
    job = field_values(
        "batch", "jobs", {"metadata": {"name": "j", "namespace": "d"}, "status": {"succeeded": 3}}
    )
    assert job["status.successful"] == "3"
    assert field_values("", "replicationcontrollers", {"metadata": {"name": "r"}})["status.replicas"] == "0"
    event = field_values(
        "",
        "events",
        {
            "metadata": {"name": "e", "namespace": "d"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "Started",
            "reportingComponent": "kubelet",
            "type": "Normal",
        },
    )
    assert event["involvedObject.kind"] == "Pod"
    assert event["source"] == "kubelet"  # falls back to the reporting controller
    new_event = field_values(
        "events.k8s.io",
        "events",
        {
            "metadata": {"name": "e", "namespace": "d"},
            "regarding": {"kind": "Node", "name": "n"},
            "reportingController": "ctl",
            "deprecatedSource": {"component": "old"},
        },
    )
    assert new_event["involvedObject.name"] == "n"
    assert new_event["reportingComponent"] == "ctl"
    assert new_event["source"] == "old"
    cm = field_values("", "configmaps", {"metadata": {"name": "c", "namespace": "d"}})
    assert cm == {"metadata.name": "c", "metadata.namespace": "d"}
    pv = field_values("", "persistentvolumes", {"metadata": {"name": "pv"}}, namespaced=False)
    assert pv == {"metadata.name": "pv"}


def test_custom_resource_selectable_fields() -> None:
    register_selectable_fields(
        "example.com", "widgets", [".spec.color", "spec.size", "spec.ready"], namespaced=False
    )
    try:
        check_supported("example.com", "v1", "widgets", parse_field_selector("spec.color=red"))
        with pytest.raises(APIError) as info:
            check_supported("example.com", "v1", "widgets", parse_field_selector("metadata.namespace=x"))
        assert info.value.message == "field label not supported: metadata.namespace"
        values = field_values(
            "example.com",
            "widgets",
            {"metadata": {"name": "w"}, "spec": {"color": "red", "size": 3, "ready": False}},
        )
        assert values == {"metadata.name": "w", "spec.color": "red", "spec.size": "3", "spec.ready": "false"}
    finally:
        unregister_selectable_fields("example.com", "widgets")
    with pytest.raises(APIError) as info:
        check_supported("example.com", "v1", "widgets", parse_field_selector("spec.color=red"))
    assert "is not a known field selector" in info.value.message
