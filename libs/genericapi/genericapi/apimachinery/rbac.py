"""The RBAC authorizer: kube's ``plugin/pkg/auth/authorizer/rbac`` over plain Role/Binding dicts.

A request is allowed when some rule of a role bound to the user allows it: ClusterRoleBindings
everywhere, RoleBindings in the request's namespace (to a Role there or a ClusterRole). Subjects
match as kube's ``appliesTo`` does (users by name, groups by membership, service accounts by
``system:serviceaccount:<ns>:<name>``, the namespace defaulting to the binding's), rules as
``RuleAllows``: verbs, API groups, resources (``*``, ``<res>/<sub>``, ``*/<sub>``), resource
names, and non-resource URLs with a trailing ``*``. Nothing allowed is "no opinion"; the reason
then lists what could not be read (a binding to a missing role), as kube's does.

Roles and bindings come from a ``RBACSource`` (watch caches: no etcd read per request).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from genericapi.apimachinery.authorization import Attributes, Decision, NonResourceRule, ResourceRule, Rules
from genericapi.apimachinery.user import UserInfo

__all__ = ["RBACAuthorizer", "RBACSource", "rule_allows"]

_GROUP = "rbac.authorization.k8s.io"
_SA_PREFIX = "system:serviceaccount:"


class RBACSource(Protocol):
    def cluster_role(self, name: str) -> dict[str, Any] | None: ...

    def role(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def cluster_role_bindings(self) -> Iterable[dict[str, Any]]: ...

    def role_bindings(self, namespace: str) -> Iterable[dict[str, Any]]: ...


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _applies(user: UserInfo, subject: Any, namespace: str) -> bool:
    if not isinstance(subject, dict):
        return False
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        return bool(sa_namespace) and user.name == f"{_SA_PREFIX}{sa_namespace}:{name}"
    return False


def rule_allows(attributes: Attributes, rule: dict[str, Any]) -> bool:
    """``RuleAllows``."""
    verbs = _strings(rule.get("verbs"))
    if "*" not in verbs and attributes.verb not in verbs:
        return False
    if not attributes.resource_request:
        for url in _strings(rule.get("nonResourceURLs")):
            if url in ("*", attributes.path) or (url.endswith("*") and attributes.path.startswith(url.rstrip("*"))):
                return True
        return False
    groups = _strings(rule.get("apiGroups"))
    if "*" not in groups and attributes.api_group not in groups:
        return False
    combined = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
    resources = _strings(rule.get("resources"))
    if not any(r == "*" or r == combined or (attributes.subresource and r == f"*/{attributes.subresource}")
               for r in resources):
        return False
    names = _strings(rule.get("resourceNames"))
    return not names or attributes.name in names


class RBACAuthorizer:
    def __init__(self, source: RBACSource) -> None:
        self.source = source

    def _rules(self, user: UserInfo, namespace: str) -> Iterator[tuple[str, dict[str, Any] | None, str]]:
        """(where it came from, rule, error) for every rule bound to the user (kube's VisitRulesFor)."""
        for binding in self.source.cluster_role_bindings():
            yield from self._bound(user, binding, "", "ClusterRoleBinding")
        if namespace:
            for binding in self.source.role_bindings(namespace):
                yield from self._bound(user, binding, namespace, "RoleBinding")

    def _bound(self, user: UserInfo, binding: dict[str, Any], namespace: str,
               kind: str) -> Iterator[tuple[str, dict[str, Any] | None, str]]:
        subjects = binding.get("subjects")
        subject = next((s for s in subjects if _applies(user, s, namespace)), None) \
            if isinstance(subjects, list) else None
        if subject is None:
            return
        ref = binding.get("roleRef") if isinstance(binding.get("roleRef"), dict) else {}
        assert isinstance(ref, dict)
        ref_kind, ref_name = ref.get("kind"), str(ref.get("name") or "")
        role: dict[str, Any] | None
        if ref_kind == "ClusterRole":
            role = self.source.cluster_role(ref_name)
            missing = f'clusterrole.rbac.authorization.k8s.io "{ref_name}" not found'
        elif ref_kind == "Role" and namespace:
            role = self.source.role(namespace, ref_name)
            missing = f'role.rbac.authorization.k8s.io "{ref_name}" not found'
        else:
            yield "", None, f'unsupported role reference kind: "{ref_kind}"'
            return
        if role is None:
            yield "", None, missing
            return
        name = str(binding.get("metadata", {}).get("name", ""))
        if namespace:
            name = f"{name}/{namespace}"
        shown = subject.get("name", "")
        if subject.get("kind") == "ServiceAccount":
            shown = f'{shown}/{subject.get("namespace") or namespace}'
        where = f'{kind} "{name}" of {ref_kind} "{ref_name}" to {subject.get("kind")} "{shown}"'
        for rule in role.get("rules") or []:
            if isinstance(rule, dict):
                yield where, rule, ""

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        errors: list[str] = []
        for where, rule, error in self._rules(attributes.user, attributes.namespace):
            if rule is None:
                errors.append(error)
            elif rule_allows(attributes, rule):
                return Decision.ALLOW, f"RBAC: allowed by {where}"
        return Decision.NO_OPINION, f"RBAC: {', '.join(errors)}" if errors else ""

    async def rules_for(self, user: UserInfo, namespace: str) -> Rules:
        resource: list[ResourceRule] = []
        non_resource: list[NonResourceRule] = []
        errors: list[str] = []
        for _where, rule, error in self._rules(user, namespace):
            if rule is None:
                errors.append(error)
                continue
            verbs = tuple(_strings(rule.get("verbs")))
            if rule.get("nonResourceURLs"):
                non_resource.append(NonResourceRule(verbs, tuple(_strings(rule.get("nonResourceURLs")))))
            if rule.get("resources"):
                resource.append(ResourceRule(verbs, tuple(_strings(rule.get("apiGroups"))),
                                             tuple(_strings(rule.get("resources"))),
                                             tuple(_strings(rule.get("resourceNames")))))
        return Rules(tuple(resource), tuple(non_resource), bool(errors), ", ".join(errors))
