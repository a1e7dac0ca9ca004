"""Which webhook a write reaches: kube's rule, scope, namespace and object selector matching.

Pure functions over the ``Attributes`` record and one webhook's JSON (``admissionregistration.k8s.io/v1``),
written after kube's ``rules.Matcher``, ``namespace.Matcher`` and ``object.Matcher``:

- a rule matches when its scope, operations, apiGroups, apiVersions and resources all do; ``*``
  matches anything, ``pods/*`` pods and every subresource of pods, ``*/status`` every status subresource,
  and a bare resource never matches its subresources;
- a Namespace object counts as cluster-scoped, and for the scope check its namespace is its own name;
- the namespaceSelector is not applied to cluster-scoped objects other than Namespaces, and for a
  Namespace create or update it is matched against the object's own labels;
- the objectSelector matches when the new or the old object's labels match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from genericapi.apimachinery.admission import Attributes
from genericapi.apimachinery.labels import LabelSelector, from_label_selector_object

ALL = "*"
NAMESPACES = ("", "v1", "namespaces")


@dataclass(frozen=True)
class Resource:
    """A group/version/resource (what a request addressed or an equivalent of it)."""

    group: str
    version: str
    resource: str


def request_resource(attrs: Attributes) -> Resource:
    return Resource(attrs.group, attrs.version, attrs.resource)


def scope_namespace(attrs: Attributes) -> str:
    """kube's ``GetNamespace()``: a Namespace object's own name (for requests naming one)."""
    if (attrs.group, attrs.resource) == ("", "namespaces"):
        return attrs.name
    return attrs.namespace


def _listed(items: Sequence[Any] | None, requested: str) -> bool:
    return any(item == ALL or item == requested for item in items or ())


def _split(resource: str) -> tuple[str, str]:
    res, _, sub = resource.partition("/")
    return res, sub


def rule_matches(rule: Mapping[str, Any], attrs: Attributes, resource: Resource | None = None) -> bool:
    """kube's ``rules.Matcher.Matches`` for one RuleWithOperations (``resource`` overrides the
    request's, for matchPolicy Equivalent)."""
    res = resource or request_resource(attrs)
    return (_scope(rule.get("scope"), attrs, res) and _listed(rule.get("operations"), attrs.operation)
            and _listed(rule.get("apiGroups"), res.group) and _listed(rule.get("apiVersions"), res.version)
            and _resource(rule.get("resources"), res.resource, attrs.subresource))


def _scope(scope: Any, attrs: Attributes, res: Resource) -> bool:
    if scope in (None, ALL):
        return True
    is_namespace = (res.group, res.version, res.resource) == NAMESPACES
    namespace = attrs.name if is_namespace else attrs.namespace
    if scope == "Namespaced":
        return not is_namespace and namespace != ""
    if scope == "Cluster":
        return is_namespace or namespace == ""
    return False


def _resource(resources: Sequence[Any] | None, resource: str, subresource: str) -> bool:
    for item in resources or ():
        if not isinstance(item, str):
            continue
        res, sub = _split(item)
        if (res == ALL or res == resource) and (sub == ALL or sub == subresource):
            return True
    return False


def parsed_selector(selector: Any) -> LabelSelector:
    """A webhook's namespaceSelector / objectSelector: absent or ``{}`` selects everything."""
    if not isinstance(selector, dict):
        return LabelSelector.everything()
    return from_label_selector_object(selector)


def is_empty(selector: LabelSelector) -> bool:
    return not selector.requirements and selector.matches({})


def object_labels(obj: Mapping[str, Any] | None) -> dict[str, str] | None:
    if not isinstance(obj, Mapping):
        return None
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}


def object_selector_matches(selector: LabelSelector, attrs: Attributes) -> bool:
    """kube's ``MatchObjectSelector``: the new object's labels, or the old one's."""
    if is_empty(selector):
        return True
    for obj in (attrs.obj, attrs.old_obj):
        labels = object_labels(obj)
        if labels is not None and selector.matches(labels):
            return True
    return False


def namespace_selector_applies(attrs: Attributes) -> bool:
    """False for cluster-scoped objects other than Namespaces: the selector never exempts them."""
    return bool(scope_namespace(attrs)) or attrs.resource == "namespaces"


def own_namespace_labels(attrs: Attributes) -> dict[str, str] | None:
    """A Namespace create or update is matched on the object's own labels (None: look it up)."""
    if (attrs.group, attrs.resource) == ("", "namespaces") and not attrs.subresource \
            and attrs.operation in ("CREATE", "UPDATE"):
        return object_labels(attrs.obj) or {}
    return None


def exempt(attrs: Attributes) -> bool:
    """kube's ``IsExemptAdmissionConfigurationResource``: admission configurations never reach webhooks."""
    return attrs.group == "admissionregistration.k8s.io" and attrs.kind in (
        "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
