"""RBAC escalation prevention: nobody grants, through a role or a binding, what they do not hold.

As kube's RBAC storage (``policybased``): creating or updating a Role or ClusterRole needs every
one of its rules to be held by the writer already, unless the writer may ``escalate`` that role;
a ClusterRole with an ``aggregationRule`` needs cluster-admin's powers. Creating or updating a
RoleBinding or ClusterRoleBinding needs the writer to hold every rule of the role it binds, unless
the writer may ``bind`` that role. ``system:masters`` (kube-apiserver's loopback user, which the
bootstrap hooks write as) is exempt; core-api's controllers are not: the ClusterRole aggregation
controller writes as its service account, allowed by its role's ``escalate``. Refused: kube's 403
listing the permissions not held.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from genericapi.apimachinery import admission as adm
from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery import user as request_user
from genericapi.apimachinery.authorization import Attributes, Authorizer, Decision, Rules
from genericapi.apimachinery.user import UserInfo
from genericapi.registry.store import Store

from .rbac_reconcile import missing_rules

GROUP = "rbac.authorization.k8s.io"
FULL_AUTHORITY: list[dict[str, Any]] = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                                        {"nonResourceURLs": ["*"], "verbs": ["*"]}]


def _go_list(values: list[str]) -> str:
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def compact_string(rule: dict[str, Any]) -> str:
    """``rbacv1helpers.CompactString``: ``{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}``."""
    parts = [f"{label}:{_go_list(rule[key])}" for key, label in
             (("apiGroups", "APIGroups"), ("resources", "Resources"), ("nonResourceURLs", "NonResourceURLs"),
              ("resourceNames", "ResourceNames"), ("verbs", "Verbs")) if rule.get(key)]
    return "{" + ", ".join(parts) + "}"


def _compact(missing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """kube's ``CompactRules``: atomic rules differing only in their verb become one rule."""
    out: list[dict[str, Any]] = []
    for rule in missing:
        same = next((r for r in out if {k: v for k, v in r.items() if k != "verbs"}
                     == {k: v for k, v in rule.items() if k != "verbs"}), None)
        if same is None:
            out.append({**rule, "verbs": list(rule.get("verbs") or [])})
        else:
            same["verbs"] += [v for v in rule.get("verbs") or [] if v not in same["verbs"]]
    return out


def _owned(rules: Rules) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"apiGroups": list(r.api_groups), "resources": list(r.resources),
                                  "resourceNames": list(r.resource_names), "verbs": list(r.verbs)}
                                 for r in rules.resource_rules]
    out += [{"nonResourceURLs": list(r.non_resource_urls), "verbs": list(r.verbs)} for r in rules.non_resource_rules]
    return out


@dataclass(frozen=True)
class _Target:
    kind: str
    plural: str


class RBACEscalation:
    """An admission hook on the four RBAC stores (run for the writes of the objects themselves)."""

    def __init__(self, authorizer: Authorizer, stores: dict[str, Store]) -> None:
        self.authorizer = authorizer
        self.stores = stores

    def handles(self, operation: str) -> bool:
        return operation in (adm.CREATE, adm.UPDATE)

    async def admit(self, attrs: adm.Attributes) -> None:
        """kube checks escalation in the RBAC storage, before the admission chain: this plugin
        is first in the mutating list (it changes nothing)."""
        obj, namespace = attrs.obj, attrs.namespace
        if obj is None or attrs.group != GROUP or attrs.subresource:
            return
        info = _Target(attrs.kind, attrs.resource)
        who = request_user.current_user.get()
        if who is None or "system:masters" in who.groups:
            return  # kube's EscalationAllowed
        name = str((obj.get("metadata") or {}).get("name") or "")
        if info.kind in ("Role", "ClusterRole"):
            if await self._may(who, "escalate", info.plural, namespace, name):
                return
            await self._confirm(who, namespace, list(obj.get("rules") or []), info.plural, name)
            if info.kind == "ClusterRole" and obj.get("aggregationRule"):
                owned = _owned(await self.authorizer.rules_for(who, namespace))
                if missing_rules(owned, FULL_AUTHORITY):
                    raise apierrors.forbidden_error(GROUP, info.plural, name,
                                                    "must have cluster-admin privileges to use the aggregationRule")
        elif info.kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = obj.get("roleRef") if isinstance(obj.get("roleRef"), dict) else {}
            assert isinstance(ref, dict)
            kind, ref_name = ref.get("kind"), str(ref.get("name") or "")
            plural = "clusterroles" if kind == "ClusterRole" else "roles"
            ref_namespace = namespace if kind == "Role" else ""
            # Asked in the binding's namespace (kube's BindingAuthorized): a RoleBinding may be allowed
            # to bind a ClusterRole within its namespace only.
            if await self._may(who, "bind", plural, namespace, ref_name):
                return
            role = await self.stores[plural].get(ref_namespace, ref_name)  # 404 as kube's rule lookup
            await self._confirm(who, namespace, list(role.get("rules") or []), info.plural, name)

    async def _may(self, who: UserInfo, verb: str, plural: str, namespace: str, name: str) -> bool:
        decision, _reason = await self.authorizer.authorize(
            Attributes(who, verb, True, namespace=namespace, api_group=GROUP, api_version="v1", resource=plural,
                       name=name))
        return decision is Decision.ALLOW

    async def _confirm(self, who: UserInfo, namespace: str, rules: list[dict[str, Any]], plural: str,
                       name: str) -> None:
        """kube's ``ConfirmNoEscalation``."""
        held = await self.authorizer.rules_for(who, namespace)
        missing = missing_rules(_owned(held), [r for r in rules if isinstance(r, dict)])
        if not missing:
            return
        lines = sorted({compact_string(r) for r in _compact(missing)})
        groups = _go_list(list(who.groups))
        message = (f'user "{who.name}" (groups={groups}) is attempting to grant RBAC permissions not currently '
                   "held:\n" + "\n".join(lines))
        if held.evaluation_error:
            message += f"; resolution errors: [{held.evaluation_error}]"
        raise apierrors.forbidden_error(GROUP, plural, name, message)
