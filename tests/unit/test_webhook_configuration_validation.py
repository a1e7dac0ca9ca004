"""kube's validation of webhook configurations (services/core-api/coreapi/validation/webhooks.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from coreapi.validation.webhooks import validate_mutating_configuration, validate_validating_configuration


def hook(**extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": "check.example.com", "clientConfig": {"url": "https://hooks.example.com/check"},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        "sideEffects": "None", "admissionReviewVersions": ["v1"]}
    out.update(extra)
    return out


def messages(*hooks: dict[str, Any], mutating: bool = False) -> list[str]:
    obj = {"metadata": {"name": "c"}, "webhooks": [copy.deepcopy(h) for h in hooks]}
    check = validate_mutating_configuration if mutating else validate_validating_configuration
    return [str(e) for e in check(obj)]


def test_a_good_configuration_passes() -> None:
    assert messages(hook()) == []
    assert messages(hook(reinvocationPolicy="IfNeeded", timeoutSeconds=30,
                         clientConfig={"service": {"namespace": "ns", "name": "svc", "path": "/mutate", "port": 8443}},
                         matchConditions=[{"name": "not-system",
                                           "expression": "!object.metadata.name.startsWith('system-')"}]),
                    mutating=True) == []


@pytest.mark.parametrize(("change", "expected"), [
    ({"name": "check"}, 'webhooks[0].name: Invalid value: "check": should be a domain with at least three '
                        "segments separated by dots"),
    ({"name": ""}, "webhooks[0].name: Required value"),
    ({"sideEffects": "Unknown"}, 'webhooks[0].sideEffects: Unsupported value: "Unknown": supported values: '
                                 '"None", "NoneOnDryRun"'),
    ({"sideEffects": None}, "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"),
    ({"timeoutSeconds": 31}, "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between "
                             "1 and 30 seconds"),
    ({"failurePolicy": "Sometimes"}, 'webhooks[0].failurePolicy: Unsupported value: "Sometimes": supported values: '
                                     '"Fail", "Ignore"'),
    ({"admissionReviewVersions": ["v2"]}, 'webhooks[0].admissionReviewVersions: Invalid value: []string{"v2"}: '
                                          "must include at least one of v1, v1beta1"),
    ({"admissionReviewVersions": []}, "webhooks[0].admissionReviewVersions: Required value: must specify one of "
                                      "v1, v1beta1"),
    ({"clientConfig": {}}, "webhooks[0].clientConfig: Required value: exactly one of url or service is required"),
    ({"clientConfig": {"url": "http://hooks.example.com/x"}},
     'webhooks[0].clientConfig.url: Invalid value: "http": \'https\' is the only allowed URL scheme; desired format: '
     "https://host[/path]"),
    ({"clientConfig": {"url": "https://hooks.example.com/x?a=b"}},
     'webhooks[0].clientConfig.url: Invalid value: "a=b": query parameters are not permitted in the URL'),
    ({"clientConfig": {"service": {"namespace": "ns", "name": "svc", "path": "/a/B_c"}}},
     'webhooks[0].clientConfig.service.path: Invalid value: "/a/B_c": segment[1]: a lowercase RFC 1123 subdomain'),
    ({"clientConfig": {"service": {"name": "svc", "port": 0}}},
     "webhooks[0].clientConfig.service.namespace: Required value: service namespace is required"),
    ({"rules": [{"operations": ["PATCH"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]},
     'webhooks[0].rules[0].operations[0]: Unsupported value: "PATCH"'),
    ({"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}},
     "webhooks[0].namespaceSelector.matchExpressions[0].operator"),
])
def test_kubes_refusals(change: dict[str, Any], expected: str) -> None:
    h = hook(**change)
    if change.get("sideEffects", "x") is None:
        h.pop("sideEffects")
    found = messages(h)
    assert any(m.startswith(expected) for m in found), found


def test_duplicate_names_and_reinvocation_policy() -> None:
    assert 'webhooks[1].name: Duplicate value: "check.example.com"' in messages(hook(), hook())
    assert messages(hook(reinvocationPolicy="Always"), mutating=True) == [
        'webhooks[0].reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never"']
