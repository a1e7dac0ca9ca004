"""A built-in kind is one strategy class named by its catalog row (coreapi.kinds): every row has one,
a kind's name rule, generation, delete answer, field selectors and Table printer are found through
it, and no table keyed by (group, kind) comes back beside the classes."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import coreapi
import pytest
from coreapi import catalog, defaults, strategies
from coreapi.catalog_build import BuiltinResource
from coreapi.catalog_core import CORE_V1_RESOURCES
from coreapi.catalog_groups import GROUP_RESOURCES
from coreapi.kinds.base import BuiltinStrategy
from genericapi.apimachinery import fields, tables
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.registry import strategy as generic_strategy

SCHEMAS = SchemaCatalog.load()
ROWS = {(i.group, i.version, i.kind): i for i in catalog.BUILTIN_RESOURCES}


def row(group: str, kind: str, version: str = "v1") -> ResourceInfo:
    return ROWS[(group, version, kind)]


def test_every_stored_row_names_its_kinds_class() -> None:
    for info in (*CORE_V1_RESOURCES, *GROUP_RESOURCES):
        assert isinstance(info, BuiltinResource), info.kind
        assert issubclass(info.strategy, BuiltinStrategy)
        strategy = strategies.strategy_for(info, SCHEMAS)
        assert type(strategy) is info.strategy and strategy.info is info


def test_every_row_gets_a_strategy() -> None:
    # Rows without objects of their own (bindings, reviews) are plain ResourceInfo: the generic class.
    for info in catalog.BUILTIN_RESOURCES:
        assert isinstance(strategies.strategy_for(info, SCHEMAS), BuiltinStrategy)
    assert strategies.strategy_class(row("", "Binding")) is BuiltinStrategy


def test_a_resource_info_made_elsewhere_finds_its_rows_class() -> None:
    pods = ResourceInfo("", "v1", "Pod", "pods", "pod", namespaced=True)
    assert strategies.strategy_class(pods) is row("", "Pod").strategy  # type: ignore[attr-defined]
    pod: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    defaults.apply(pods, pod)
    assert pod["spec"]["restartPolicy"] == "Always"
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "Always"


def test_rows_equal_as_resource_info() -> None:
    # The strategy is not part of a row's identity: rows still hash and compare by their fields.
    pods = row("", "Pod")
    assert pods == pods and hash(pods) == hash(row("", "Pod"))
    assert row("autoscaling", "HorizontalPodAutoscaler", "v1") != row("autoscaling", "HorizontalPodAutoscaler", "v2")


@pytest.mark.parametrize(("group", "kind", "name", "ok"), [
    ("", "Namespace", "a.b", False),            # DNS-1123 label
    ("", "Service", "1web", False),             # DNS-1035 label
    ("apps", "StatefulSet", "a.b", False),      # label: its pods are <name>-<ordinal>
    ("rbac.authorization.k8s.io", "ClusterRole", "system:admin", True),  # path segment
    ("rbac.authorization.k8s.io", "RoleBinding", "a/b", False),
    ("", "ConfigMap", "a.b", True),              # DNS-1123 subdomain
    ("", "ConfigMap", "A", False),
])
def test_name_rule_comes_from_the_kind(group: str, kind: str, name: str, ok: bool) -> None:
    strategy = strategies.strategy_for(row(group, kind), SCHEMAS)
    assert (strategy.name_validator(name, False) == []) is ok


def test_generation_and_delete_answer_are_the_kinds() -> None:
    def kinds(attr: str) -> set[tuple[str, str]]:
        return {(i.group, i.kind) for i in catalog.BUILTIN_RESOURCES
                if getattr(strategies.strategy_for(i, SCHEMAS), attr)}

    assert kinds("returns_deleted_object") == {("", "Pod"), ("", "Service"), ("", "Namespace")}
    assert kinds("tracks_generation") == {
        ("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"), ("apps", "DaemonSet"),
        ("", "ReplicationController"), ("batch", "Job"), ("batch", "CronJob"),
        ("policy", "PodDisruptionBudget"), ("networking.k8s.io", "NetworkPolicy"),
        ("networking.k8s.io", "Ingress"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    }


def test_pod_printer_and_field_selectors_come_from_its_strategy() -> None:
    strategy = strategies.strategy_for(row("", "Pod"), SCHEMAS)
    assert strategy.field_support is not None and strategy.table_printer is not None
    assert strategy.field_support.accepted["spec.host"] == "spec.nodeName"
    pod = {"metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}, "status": {"phase": "Running"}}
    assert strategy.field_support.values is not None
    assert strategy.field_support.values(pod)["spec.nodeName"] == "n1"
    table = tables.build_table("", "pods", [pod], "None", now=datetime(2026, 1, 2, tzinfo=UTC),
                               printer=strategy.table_printer)
    assert [c["name"] for c in table["columnDefinitions"]][:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert table["rows"][0]["cells"][:3] == ["web", "0/1", "Running"]


def test_deployment_printer_comes_from_its_strategy() -> None:
    strategy = strategies.strategy_for(row("apps", "Deployment"), SCHEMAS)
    assert strategy.table_printer is not None
    assert [c["name"] for c in strategy.table_printer.columns][:4] == ["Name", "Ready", "Up-to-date", "Available"]


def test_a_strategys_field_support_is_registered_for_the_handlers() -> None:
    support = fields.FieldSupport({"metadata.name": "metadata.name", "spec.color": "spec.color"},
                                  lambda label: f"field label not supported: {label}",
                                  lambda o: {"spec.color": str((o.get("spec") or {}).get("color") or "")})

    class WidgetStrategy(BuiltinStrategy):
        field_support = support

    info = ResourceInfo("kinds.test.example", "v1", "Widget", "widgets", "widget", namespaced=True)
    selector = fields.parse_field_selector("spec.color=red")
    with pytest.raises(APIError):
        fields.convert_field_selector(info.group, "v1", info.plural, selector)
    try:
        WidgetStrategy(info)
        assert fields.convert_field_selector(info.group, "v1", info.plural, selector) == selector
        values = fields.field_values(info.group, info.plural, {"metadata": {"name": "w"}, "spec": {"color": "red"}})
        assert values["spec.color"] == "red"
    finally:
        fields.unregister_selectable_fields(info.group, info.plural)


def test_hpa_defaults_follow_the_served_version() -> None:
    def defaulted(version: str) -> dict[str, Any]:
        obj: dict[str, Any] = {"metadata": {"name": "h"}, "spec": {"maxReplicas": 3}}
        strategies.strategy_for(row("autoscaling", "HorizontalPodAutoscaler", version), SCHEMAS).apply_defaults(obj)
        return obj

    assert defaulted("v1")["spec"]["minReplicas"] == 1
    assert "metrics" not in defaulted("v1")["spec"]  # v1 has targetCPUUtilizationPercentage, no default
    assert defaulted("v2")["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 80


def test_zero_status_counters_are_the_kinds() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "d"}}
    strategies.strategy_for(row("apps", "DaemonSet"), SCHEMAS).apply_defaults(obj)
    assert obj["status"] == {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                             "desiredNumberScheduled": 0, "numberReady": 0}
    cm: dict[str, Any] = {"metadata": {"name": "c"}}
    strategies.strategy_for(row("", "ConfigMap"), SCHEMAS).apply_defaults(cm)
    assert cm == {"metadata": {"name": "c"}}


def test_csr_strategy_derives_from_the_rows_class() -> None:
    # csr.py's CSRStrategy extends the CSR row's class: its defaults, printer and field selectors.
    from coreapi.csr import CSRStrategy
    from coreapi.kinds.groups import CertificateSigningRequestStrategy

    csr = row("certificates.k8s.io", "CertificateSigningRequest")
    assert csr.strategy is CertificateSigningRequestStrategy
    assert issubclass(CSRStrategy, CertificateSigningRequestStrategy)
    strategy = CSRStrategy(csr, SCHEMAS)
    obj: dict[str, Any] = {"metadata": {"name": "c"}, "status": {"conditions": [{"type": "Approved"}]}}
    strategy.default(obj)
    assert obj["status"]["conditions"][0]["status"] == "True"
    assert strategy.table_printer is strategies.strategy_for(csr, SCHEMAS).table_printer is not None


# -- no table keyed by kind beside the classes ------------------------------------------------------

_KINDS = {info.kind for info in catalog.BUILTIN_RESOURCES}
_PLURALS = {info.plural for info in catalog.BUILTIN_RESOURCES}
_CORE_API = Path(coreapi.__file__).parent
_APIMACHINERY = Path(fields.__file__).parent
#: core-api keys other things by (group, resource) (stores, conversions); the shared library's
#: selectors, printers and validators may key nothing by a built-in kind or resource.
_SCANNED = [*_CORE_API.rglob("*.py"), Path(generic_strategy.__file__)]
_SCANNED_FOR_RESOURCES = [_APIMACHINERY / "fields.py", _APIMACHINERY / "validation_meta.py",
                          *_APIMACHINERY.glob("tables*.py")]


def _kind_pair(node: ast.AST, names: set[str]) -> bool:
    """A literal ("<group>", "<Kind or resource>") naming one of ``names``."""
    return (isinstance(node, ast.Tuple) and len(node.elts) in (2, 3)
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
            and node.elts[-1].value in names)  # type: ignore[attr-defined]


def _kind_tables(source: str, names: set[str] = _KINDS) -> list[int]:
    """Lines of dict/set literals with three or more (group, kind) keys (or of ``names``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        elements: list[ast.AST] = []
        if isinstance(node, ast.Dict):
            elements = [k for k in node.keys if k is not None]
        elif isinstance(node, ast.Set):
            elements = list(node.elts)
        if sum(_kind_pair(e, names) for e in elements) >= 3:
            found.append(getattr(node, "lineno", 0))
    return found


def test_the_scan_finds_kind_tables() -> None:
    assert _kind_tables('T = {("", "Pod"): f, ("apps", "Deployment"): g, ("batch", "Job"): h}\n') == [1]
    assert _kind_tables('S = frozenset({("", "Pod"), ("", "Service"),\n ("", "Namespace")})\n') == [1]
    assert _kind_tables('V = {("autoscaling", "v1", "HorizontalPodAutoscaler"): f, ("", "v1", "Pod"): g,'
                        ' ("apps", "v1", "Deployment"): h}\n') == [1]
    assert _kind_tables('T = {("", "Pod"): f, ("", "pods"): g, ("x", "y"): h}\n') == []
    assert _kind_tables('T = {("", "pods"): f, ("apps", "deployments"): g, ("batch", "jobs"): h}\n',
                        _PLURALS) == [1]


def test_no_lookup_table_keyed_by_kind() -> None:
    found = [f"{path}:{line}" for path in _SCANNED for line in _kind_tables(path.read_text())]
    found += [f"{path}:{line}" for path in _SCANNED_FOR_RESOURCES
              for line in _kind_tables(path.read_text(), _KINDS | _PLURALS)]
    assert found == [], f"a kind's behaviour belongs in its strategy class (coreapi.kinds): {found}"
