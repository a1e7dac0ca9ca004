"""Serving a stored CRD: rules that no longer compile refuse objects instead of skipping validation."""

from __future__ import annotations

from typing import Any

from extensionsapi import crd_serving


def _crd(rule: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"replicas": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": rule}]}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com", "uid": "u1"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]},
            "status": {"acceptedNames": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                                         "listKind": "WidgetList"}, "storedVersions": ["v1"]}}


def _obj(replicas: int) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"},
            "spec": {"replicas": replicas}}


def test_compiled_rules_validate_objects() -> None:
    strategy = crd_serving.build(_crd("self.replicas <= 3"), lambda: False).versions[0].strategy
    assert strategy.validate(_obj(2)) == []
    assert [e.detail for e in strategy.validate(_obj(5))] == ["failed rule: self.replicas <= 3"]


def test_a_stored_rule_that_does_not_compile_refuses_objects() -> None:
    strategy = crd_serving.build(_crd("self.replicas <= "), lambda: False).versions[0].strategy
    errs = strategy.validate(_obj(2))
    assert len(errs) == 1 and errs[0].detail.startswith("rule compile error: compilation failed")
    assert errs[0].field.endswith("x-kubernetes-validations[0].rule")
