"""The RBAC authorizer: kube's ``plugin/pkg/auth/authorizer/rbac`` over plain Role/Binding dicts.

A request is allowed when some rule of a role bound to the user allows it: ClusterRoleBindings
everywhere, RoleBindings in the request's namespace (to a Role there or a ClusterRole). Subjects
match as kube's ``appliesTo`` does (users by name, groups by membership, service accounts by
``system:serviceaccount:<ns>:<name>``, the namespace defaulting to the binding's), rules as
``RuleAllows``: verbs, API groups, resources (``*``, ``<res>/<sub>``, ``*/<sub>``), resource
names, and non-resource URLs with a trailing ``*``. Nothing allowed is "no opinion"; the reason
then lists what could not be read (a binding to a missing role), as kube's does.

Roles and bindings come from a ``RBACSource`` (watch caches: no etcd read per request). The gateway
asks for every request, so ``authorize`` reads each binding's subjects and each role's rules in a
form compiled once per object (sets; the cache is keyed by the object, which a watch cache replaces
on change) and words the "allowed by" reason only for the rule that allows. A source that can say
which state it is in (``generation``: its watch caches' revisions) also gets each decision
remembered for that state: a decision is a function of the roles, the bindings and the request's
user name, groups and attributes only, so the same request of the same user in the same state is
answered from memory (issue 15: RBAC was ~13% of the gateway's time per GET of a plain user), and
any change to a role or binding starts afresh. kube's RBAC authorizer walks every time; the answers
are the same.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from genericapi.apimachinery.authorization import Attributes, Decision, NonResourceRule, ResourceRule, Rules
from genericapi.apimachinery.user import UserInfo

__all__ = ["RBACAuthorizer", "RBACSource", "rule_allows"]

_GROUP = "rbac.authorization.k8s.io"
_SA_PREFIX = "system:serviceaccount:"


class RBACSource(Protocol):
    """Roles and bindings as plain dicts. A source may also offer ``generation() -> Hashable``, a
    value that changes whenever any role or binding may have changed (decisions are then remembered)."""

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


@dataclass(frozen=True)
class _Rule:
    """One PolicyRule as sets, for ``_allows`` (``rule_allows`` on the dict, precomputed)."""

    verbs: frozenset[str]
    groups: frozenset[str]
    resources: frozenset[str]
    names: frozenset[str]
    #: nonResourceURLs: (exact, prefix or None for a trailing ``*``)
    urls: tuple[tuple[str, str | None], ...]

    @classmethod
    def of(cls, rule: dict[str, Any]) -> _Rule:
        urls = tuple((u, u.rstrip("*") if u.endswith("*") else None) for u in _strings(rule.get("nonResourceURLs")))
        return cls(frozenset(_strings(rule.get("verbs"))), frozenset(_strings(rule.get("apiGroups"))),
                   frozenset(_strings(rule.get("resources"))), frozenset(_strings(rule.get("resourceNames"))), urls)


def _allows(attributes: Attributes, rule: _Rule) -> bool:
    """``rule_allows`` over a compiled rule (the same answers)."""
    if "*" not in rule.verbs and attributes.verb not in rule.verbs:
        return False
    if not attributes.resource_request:
        path = attributes.path
        return any(url == "*" or url == path or (prefix is not None and path.startswith(prefix))
                   for url, prefix in rule.urls)
    if "*" not in rule.groups and attributes.api_group not in rule.groups:
        return False
    resources = rule.resources
    sub = attributes.subresource
    if "*" not in resources and (f"{attributes.resource}/{sub}" if sub else attributes.resource) not in resources \
            and not (sub and f"*/{sub}" in resources):
        return False
    return not rule.names or attributes.name in rule.names


@dataclass(frozen=True)
class _Subjects:
    """A binding's subjects as sets: who it applies to (``_applies`` for any of them)."""

    users: frozenset[str]
    groups: frozenset[str]

    @classmethod
    def of(cls, subjects: Any, namespace: str) -> _Subjects:
        users: set[str] = set()
        groups: set[str] = set()
        for s in subjects if isinstance(subjects, list) else ():
            if not isinstance(s, dict):
                continue
            kind, name = s.get("kind"), s.get("name")
            if kind == "User" and isinstance(name, str):
                users.add(name)
            elif kind == "Group" and isinstance(name, str):
                groups.add(name)
            elif kind == "ServiceAccount":
                sa_namespace = s.get("namespace") or namespace
                if sa_namespace:
                    users.add(f"{_SA_PREFIX}{sa_namespace}:{name}")
        return cls(frozenset(users), frozenset(groups))

    def apply_to(self, user: UserInfo) -> bool:
        """``_applies`` for any subject (what ``_Index`` answers for a whole listing)."""
        return user.name in self.users or not self.groups.isdisjoint(user.groups)


#: Compiled forms kept per object; dropped whole past this many (old versions of changed objects).
_COMPILED_LIMIT = 8192

#: Decisions remembered for one state of the source; dropped whole past this many (~1 MB at most).
_DECIDED_LIMIT = 4096

_DecisionKey = tuple[str, tuple[str, ...], str, bool, str, str, str, str, str, str]


class _Index:
    """One listing of bindings (all ClusterRoleBindings, or one namespace's RoleBindings) by subject:
    which positions name a user or a group, so a request visits only the bindings that apply to its
    user, in the listing's order. Valid while the source hands out the same objects in the same order."""

    def __init__(self, bindings: list[dict[str, Any]], subjects: list[_Subjects]) -> None:
        self.ids = [id(b) for b in bindings]
        self.bindings = bindings
        self.by_user: dict[str, list[int]] = {}
        self.by_group: dict[str, list[int]] = {}
        for position, who in enumerate(subjects):
            for name in who.users:
                self.by_user.setdefault(name, []).append(position)
            for name in who.groups:
                self.by_group.setdefault(name, []).append(position)

    def applying_to(self, user: UserInfo) -> list[dict[str, Any]]:
        positions = set(self.by_user.get(user.name, ()))
        for group in user.groups:
            positions.update(self.by_group.get(group, ()))
        return [self.bindings[i] for i in sorted(positions)]


class RBACAuthorizer:
    def __init__(self, source: RBACSource) -> None:
        self.source = source
        self._rules_of: dict[int, tuple[dict[str, Any], tuple[_Rule, ...]]] = {}
        self._subjects_of: dict[tuple[int, str], tuple[dict[str, Any], _Subjects]] = {}
        self._indexes: dict[str, _Index] = {}
        self._generation: Callable[[], Hashable] | None = getattr(source, "generation", None)
        self._decided_at: Hashable = None
        self._decided: dict[_DecisionKey, tuple[Decision, str]] = {}

    def _applying(self, bindings: Iterable[dict[str, Any]], namespace: str, user: UserInfo) -> list[dict[str, Any]]:
        """The bindings of a listing that apply to ``user``, in order (an index kept per listing)."""
        listed = list(bindings)
        index = self._indexes.get(namespace)
        if index is None or index.ids != [id(b) for b in listed]:
            if len(self._indexes) >= _COMPILED_LIMIT:
                self._indexes.clear()
            index = _Index(listed, [self._compiled_subjects(b, namespace) for b in listed])
            self._indexes[namespace] = index
        return index.applying_to(user)

    def _compiled_rules(self, role: dict[str, Any]) -> tuple[_Rule, ...]:
        hit = self._rules_of.get(id(role))
        if hit is not None and hit[0] is role:
            return hit[1]
        if len(self._rules_of) >= _COMPILED_LIMIT:
            self._rules_of.clear()
        rules = tuple(_Rule.of(r) for r in role.get("rules") or [] if isinstance(r, dict))
        self._rules_of[id(role)] = (role, rules)
        return rules

    def _compiled_subjects(self, binding: dict[str, Any], namespace: str) -> _Subjects:
        key = (id(binding), namespace)
        hit = self._subjects_of.get(key)
        if hit is not None and hit[0] is binding:
            return hit[1]
        if len(self._subjects_of) >= _COMPILED_LIMIT:
            self._subjects_of.clear()
        subjects = _Subjects.of(binding.get("subjects"), namespace)
        self._subjects_of[key] = (binding, subjects)
        return subjects

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
        """``decide``, remembered per request and user while the source's generation stays the same."""
        if self._generation is None:
            return self.decide(attributes)
        generation = self._generation()
        decided = self._decided
        if generation != self._decided_at:
            decided.clear()
            self._decided_at = generation
        user = attributes.user
        groups = user.groups if type(user.groups) is tuple else tuple(user.groups)
        key = (user.name, groups, attributes.verb, attributes.resource_request, attributes.namespace,
               attributes.api_group, attributes.resource, attributes.subresource, attributes.name,
               "" if attributes.resource_request else attributes.path)
        hit = decided.get(key)
        if hit is None:
            hit = self.decide(attributes)
            if len(decided) >= _DECIDED_LIMIT:
                decided.clear()
            decided[key] = hit
        return hit

    def decide(self, attributes: Attributes) -> tuple[Decision, str]:
        """kube's ``VisitRulesFor`` with ``RuleAllows``, in the same order and with the same reasons
        as walking ``_rules``, over compiled bindings and roles."""
        user, namespace = attributes.user, attributes.namespace
        errors: list[str] = []
        for binding in self._applying(self.source.cluster_role_bindings(), "", user):
            decided = self._check(attributes, binding, "", "ClusterRoleBinding", errors)
            if decided is not None:
                return decided
        if namespace:
            for binding in self._applying(self.source.role_bindings(namespace), namespace, user):
                decided = self._check(attributes, binding, namespace, "RoleBinding", errors)
                if decided is not None:
                    return decided
        return Decision.NO_OPINION, f"RBAC: {', '.join(errors)}" if errors else ""

    def _check(self, attributes: Attributes, binding: dict[str, Any], namespace: str, kind: str,
               errors: list[str]) -> tuple[Decision, str] | None:
        """ALLOW with kube's reason when a rule of the bound role allows; errors collected."""
        ref = binding.get("roleRef") if isinstance(binding.get("roleRef"), dict) else {}
        assert isinstance(ref, dict)
        ref_kind, ref_name = ref.get("kind"), str(ref.get("name") or "")
        if ref_kind == "ClusterRole":
            role = self.source.cluster_role(ref_name)
        elif ref_kind == "Role" and namespace:
            role = self.source.role(namespace, ref_name)
        else:
            errors.append(f'unsupported role reference kind: "{ref_kind}"')
            return None
        if role is None:
            errors.append(f'{"clusterrole" if ref_kind == "ClusterRole" else "role"}.rbac.authorization.k8s.io '
                          f'"{ref_name}" not found')
            return None
        if any(_allows(attributes, rule) for rule in self._compiled_rules(role)):
            where = next(w for w, _r, _e in self._bound(attributes.user, binding, namespace, kind))
            return Decision.ALLOW, f"RBAC: allowed by {where}"
        return None

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
