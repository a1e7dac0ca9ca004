"""Whether a policy's ``matchConstraints`` or a binding's ``matchResources`` cover a request.

kube's ``policy/generic.Matcher`` over the webhook predicates: the namespace selector (the
request's namespace's labels; a Namespace request uses the object's own), the object selector
(the new or the old object's labels), ``excludeResourceRules`` then ``resourceRules`` (operations,
apiGroups, apiVersions, ``resource/subresource`` with ``*``, scope, resourceNames). With
``matchPolicy: Equivalent`` (the default) a rule naming an equivalent resource (another served
version of the same storage, as the plugin's equivalents say; without them any version of the same
group and resource) matches too, and ``matched_resource`` says which one (kube's ``matchResource`` /
``matchKind``: the plugin then converts the objects to it). Selector errors count only when the
rules match.
The equivalents may be handed over as a function computing them: they are then asked for only when
a rule does not name the request's own resource (most requests never need them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from genericapi.apimachinery.admission import Attributes
from genericapi.apimachinery.labels import LabelSelector, LabelSelectorError, from_label_selector_object

#: Resources the expression-based admission plugins never see (kube's admission exclusion list).
EXCLUDED = frozenset({
    ("authentication.k8s.io", "selfsubjectreviews"), ("authentication.k8s.io", "tokenreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"), ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"), ("authorization.k8s.io", "subjectaccessreviews"),
})

NamespaceLookup = Callable[[str], "dict[str, Any] | None"]
#: A request's equivalent resources but its own (None: not known), or a function giving them.
Others = list[tuple[str, str, str, str]] | None
LazyOthers = Others | Callable[[], Others]


def resolve_others(others: LazyOthers) -> Others:
    """The equivalents ``others`` holds or computes."""
    return others() if callable(others) else others


class MatchError(Exception):
    """A selector that cannot be evaluated (kube: a configuration error of the policy or binding)."""


@dataclass(frozen=True)
class Rule:
    operations: tuple[str, ...]
    groups: tuple[str, ...]
    versions: tuple[str, ...]
    resources: tuple[tuple[str, str], ...]
    scope: str
    names: tuple[str, ...]


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _split(resource: str) -> tuple[str, str]:
    res, _, sub = resource.partition("/")
    return res, sub


def parse_rules(rules: Any) -> tuple[Rule, ...]:
    out = []
    for r in rules if isinstance(rules, list) else ():
        if isinstance(r, dict):
            out.append(Rule(_strings(r.get("operations")), _strings(r.get("apiGroups")),
                            _strings(r.get("apiVersions")), tuple(_split(x) for x in _strings(r.get("resources"))),
                            str(r.get("scope") or "*"), _strings(r.get("resourceNames"))))
    return tuple(out)


def _any(allowed: tuple[str, ...], value: str) -> bool:
    return "*" in allowed or value in allowed


def _scope(rule: Rule, attrs: Attributes) -> bool:
    is_namespace = attrs.group == "" and attrs.resource == "namespaces"
    if rule.scope == "Namespaced":
        return not is_namespace and attrs.namespace != ""
    if rule.scope == "Cluster":
        return is_namespace or attrs.namespace == ""
    return True


def _resource(rule: Rule, attrs: Attributes) -> bool:
    return any((res == "*" or res == attrs.resource) and (sub == "*" or sub == attrs.subresource)
               for res, sub in rule.resources)


def _name(rule: Rule, attrs: Attributes) -> bool:
    if not rule.names:
        return True
    return attrs.name in rule.names  # kube: the request's name ("" for a generateName create)


def equivalent_matches(rule: Rule, attrs: Attributes, lazy: LazyOthers) -> bool:
    """Whether ``rule`` names one of the request's equivalent resources (kube's
    ``EquivalentResourcesFor``); unknown equivalents: any version of the same group and resource."""
    others = resolve_others(lazy)
    if others is None:
        return rule_matches(rule, attrs, True)
    return any(rule_matches(rule, replace(attrs, group=g, version=v, resource=r), False) for g, v, r, _k in others)


def rule_matches(rule: Rule, attrs: Attributes, equivalent: bool) -> bool:
    if not (_any(rule.operations, attrs.operation) and _any(rule.groups, attrs.group) and _scope(rule, attrs)
            and _resource(rule, attrs) and _name(rule, attrs)):
        return False
    return equivalent or _any(rule.versions, attrs.version)


@dataclass(frozen=True)
class MatchResources:
    """A parsed ``matchResources``: selectors and rules ready for every request."""

    namespace_selector: LabelSelector | None
    object_selector: LabelSelector | None
    selector_error: str
    rules: tuple[Rule, ...]
    exclude: tuple[Rule, ...]
    equivalent: bool

    @classmethod
    def parse(cls, spec: Any) -> MatchResources:
        spec = spec if isinstance(spec, dict) else {}
        err = ""
        ns_sel = obj_sel = None
        try:
            ns_sel = from_label_selector_object(spec.get("namespaceSelector") or {})
            obj_sel = from_label_selector_object(spec.get("objectSelector") or {})
        except (LabelSelectorError, ValueError) as e:
            err = str(e)
        return cls(ns_sel, obj_sel, err, parse_rules(spec.get("resourceRules")),
                   parse_rules(spec.get("excludeResourceRules")), spec.get("matchPolicy", "Equivalent") != "Exact")

    def matches(self, attrs: Attributes, namespaces: NamespaceLookup, others: LazyOthers = None) -> bool:
        """Whether the request is covered (no ``resourceRules``: every resource), ``others`` being
        its equivalent resources; raises ``MatchError`` for a selector kube could not use on a
        request its rules match."""
        return self.match(attrs, namespaces, others)[0]

    def match(self, attrs: Attributes, namespaces: NamespaceLookup,
              others: LazyOthers = None) -> tuple[bool, tuple[str, str, str, str] | None]:
        """``matches`` and, for a covered request, ``matched_resource`` (the rules checked once)."""
        ns_ok, ns_err = self._namespace(attrs, namespaces)
        if not ns_ok and not ns_err:
            return False, None
        obj_ok, obj_err = self._object(attrs)
        if not obj_ok and not obj_err:
            return False, None
        if any(rule_matches(r, attrs, False) for r in self.exclude) or (
                self.equivalent and any(equivalent_matches(r, attrs, others) for r in self.exclude)):
            return False, None
        own = not self.rules or any(rule_matches(r, attrs, False) for r in self.rules)
        if not own and not (self.equivalent and any(equivalent_matches(r, attrs, others) for r in self.rules)):
            return False, None
        if ns_err or obj_err:
            raise MatchError(ns_err or obj_err)
        return True, (None if own or not self.equivalent else self._first_equivalent(attrs, others))

    def matched_resource(self, attrs: Attributes, lazy: LazyOthers) -> tuple[str, str, str, str] | None:
        """Which (group, version, resource, kind) the rules matched, given a request ``matches``
        accepted and ``lazy``, the request's equivalent resources: None when a rule names the
        request's own version (or there are no rules, or no known equivalents), else the first
        equivalent, rule by rule (kube's ``matchesResourceRules``)."""
        if not self.rules or not self.equivalent or any(rule_matches(r, attrs, False) for r in self.rules):
            return None
        return self._first_equivalent(attrs, lazy)

    def _first_equivalent(self, attrs: Attributes, lazy: LazyOthers) -> tuple[str, str, str, str] | None:
        others = resolve_others(lazy)
        if not others:
            return None
        for rule in self.rules:
            for group, version, resource, kind in others:
                if rule_matches(rule, replace(attrs, group=group, version=version, resource=resource), False):
                    return group, version, resource, kind
        return None

    def _namespace(self, attrs: Attributes, namespaces: NamespaceLookup) -> tuple[bool, str]:
        is_namespace = attrs.group == "" and attrs.resource == "namespaces"
        if not attrs.namespace and not is_namespace:
            return True, ""  # cluster-scoped, not a Namespace: never exempted
        if self.selector_error:
            return False, self.selector_error
        if self.namespace_selector is None or self.namespace_selector.empty:
            return True, ""
        if is_namespace:
            obj = attrs.old_obj if attrs.operation == "DELETE" else attrs.obj
            labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
        else:
            ns = namespaces(attrs.namespace)
            if ns is None:
                return False, f'namespaces "{attrs.namespace}" not found'
            labels = (ns.get("metadata") or {}).get("labels") or {}
        return self.namespace_selector.matches(labels), ""

    def _object(self, attrs: Attributes) -> tuple[bool, str]:
        if self.selector_error:
            return False, self.selector_error
        sel = self.object_selector
        if sel is None or sel.empty:
            return True, ""
        for obj in (attrs.obj, attrs.old_obj):
            if obj is not None and sel.matches(((obj.get("metadata") or {}).get("labels")) or {}):
                return True, ""
        return False, ""
