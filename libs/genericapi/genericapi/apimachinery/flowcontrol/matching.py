"""Which FlowSchema a request belongs to: kube's ``matchesFlowSchema`` (util/flowcontrol/rule.go).

A schema matches when one of its rules does: a subject (user, group or service account, ``*`` for
any) and, for a resource request, a resource rule (verb, group, ``resource/subresource``,
namespace or cluster scope), for any other request a non-resource rule (verb, URL with a ``/*``
suffix glob). Schemas are tried in ``matchingPrecedence`` order, then by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from genericapi.apimachinery.requestinfo import RequestInfo
from genericapi.apimachinery.user import UserInfo

Obj = dict[str, Any]

SA_PREFIX = "system:serviceaccount:"


def schema_order(fs: Obj) -> tuple[int, str]:
    """Sort key: matchingPrecedence ascending, then name (kube's FlowSchemaSequence)."""
    spec = fs.get("spec") or {}
    return int(spec.get("matchingPrecedence") or 0), str((fs.get("metadata") or {}).get("name") or "")


def matches_flow_schema(fs: Obj, user: UserInfo, info: RequestInfo) -> bool:
    return any(_matches_rule(rule or {}, user, info) for rule in (fs.get("spec") or {}).get("rules") or ())


def _matches_rule(rule: Obj, user: UserInfo, info: RequestInfo) -> bool:
    if not any(matches_subject(s or {}, user) for s in rule.get("subjects") or ()):
        return False
    if info.is_resource_request:
        return any(_matches_resource_rule(r or {}, info) for r in rule.get("resourceRules") or ())
    return any(_matches_non_resource_rule(r or {}, info) for r in rule.get("nonResourceRules") or ())


def matches_subject(subject: Obj, user: UserInfo) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        who = subject.get("user")
        return who is not None and who.get("name") in ("*", user.name)
    if kind == "Group":
        group = subject.get("group")
        if group is None:
            return False
        return group.get("name") == "*" or group.get("name") in user.groups
    if kind == "ServiceAccount":
        account = subject.get("serviceAccount")
        if account is None:
            return False
        namespace, name = str(account.get("namespace") or ""), str(account.get("name") or "")
        if name == "*":
            return user.name.startswith(f"{SA_PREFIX}{namespace}:")
        return user.name == f"{SA_PREFIX}{namespace}:{name}"
    return False


def _contains(value: str, items: Sequence[str], wildcard: str = "*") -> bool:
    if len(items) == 1 and items[0] == wildcard:
        return True
    return value in items


def _matches_resource_rule(rule: Obj, info: RequestInfo) -> bool:
    if not _contains(info.verb, rule.get("verbs") or []):
        return False
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    if not _contains(resource, rule.get("resources") or []):
        return False
    if not _contains(info.api_group, rule.get("apiGroups") or []):
        return False
    if not info.namespace:
        return bool(rule.get("clusterScope"))
    return _contains(info.namespace, rule.get("namespaces") or [])


def _matches_non_resource_rule(rule: Obj, info: RequestInfo) -> bool:
    if not _contains(info.verb, rule.get("verbs") or []):
        return False
    return non_resource_url_matches(rule.get("nonResourceURLs") or [], info.path)


def non_resource_url_matches(urls: Iterable[str], path: str) -> bool:
    """kube's matchPolicyRuleNonResourceURL: ``*``, the exact path, or anything below the rule's path
    (``/healthz`` and ``/healthz/*`` both match ``/healthz/etcd``; only the former ``/healthz``)."""
    for url in urls:
        if url == "*" or url == path:
            return True
        prefix = url.removesuffix("*")
        if not prefix.endswith("/"):
            prefix += "/"
        if path.startswith(prefix):
            return True
    return False


def flow_distinguisher(fs: Obj, user: UserInfo, info: RequestInfo) -> str:
    """kube's computeFlowDistinguisher: the user's name (ByUser), the namespace (ByNamespace), or ""."""
    method = (fs.get("spec") or {}).get("distinguisherMethod")
    if not method:
        return ""
    if method.get("type") == "ByUser":
        return user.name
    if method.get("type") == "ByNamespace":
        return info.namespace
    return ""
