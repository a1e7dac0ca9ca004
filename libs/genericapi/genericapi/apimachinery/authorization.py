"""Authorization: kube's ``authorizer.Authorizer``, its attributes and decisions, in one place.

The gateway asks it for every request (with the request's ``RequestInfo``), core-api's access
reviews ask it on a client's behalf; ``AlwaysAllow`` and the RBAC authorizer (``rbac.py``) answer,
in a union as kube's ``--authorization-mode`` builds it. ``forbidden`` words the 403 exactly as
kube-apiserver's ``responsewriters.Forbidden`` does.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.user import UserInfo


class Decision(enum.Enum):
    ALLOW = "Allow"
    DENY = "Deny"
    NO_OPINION = "NoOpinion"


@dataclass(frozen=True)
class Attributes:
    """``authorizer.AttributesRecord``: a resource request or a non-resource one (``path``)."""

    user: UserInfo
    verb: str
    resource_request: bool
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""


@dataclass(frozen=True)
class ResourceRule:
    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class NonResourceRule:
    verbs: tuple[str, ...]
    non_resource_urls: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rules:
    """``RulesFor``: what a user may do in a namespace; ``incomplete`` when a rule could not be read."""

    resource_rules: tuple[ResourceRule, ...]
    non_resource_rules: tuple[NonResourceRule, ...]
    incomplete: bool = False
    evaluation_error: str = ""


class Authorizer(Protocol):
    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        """The decision and its reason (shown in a SubjectAccessReview's status)."""
        ...

    async def rules_for(self, user: UserInfo, namespace: str) -> Rules:
        """The rules ``user`` has in ``namespace`` (a SelfSubjectRulesReview)."""
        ...


class AlwaysAllow:
    """``authorizerfactory.NewAlwaysAllowAuthorizer``: allow, no reason; every verb on everything."""

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return Decision.ALLOW, ""

    async def rules_for(self, user: UserInfo, namespace: str) -> Rules:
        return Rules((ResourceRule(("*",), ("*",), ("*",)),), (NonResourceRule(("*",), ("*",)),))


class Union:
    """kube's union authorizer: the first Allow or Deny decides; reasons of the others are kept."""

    def __init__(self, *authorizers: Authorizer) -> None:
        self.authorizers = authorizers

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        reasons: list[str] = []
        for authorizer in self.authorizers:
            decision, reason = await authorizer.authorize(attributes)
            if decision is not Decision.NO_OPINION:
                return decision, reason
            if reason:
                reasons.append(reason)
        return Decision.NO_OPINION, "\n".join(reasons)

    async def rules_for(self, user: UserInfo, namespace: str) -> Rules:
        resource: list[ResourceRule] = []
        non_resource: list[NonResourceRule] = []
        incomplete, errors = False, []
        for authorizer in self.authorizers:
            rules = await authorizer.rules_for(user, namespace)
            resource.extend(rules.resource_rules)
            non_resource.extend(rules.non_resource_rules)
            incomplete = incomplete or rules.incomplete
            if rules.evaluation_error:
                errors.append(rules.evaluation_error)
        return Rules(tuple(resource), tuple(non_resource), incomplete, ", ".join(errors))


class PrivilegedGroups:
    """``authorizerfactory.NewPrivilegedGroups``: members of ``system:masters`` may do anything."""

    def __init__(self, *groups: str) -> None:
        self.groups = frozenset(groups or ("system:masters",))

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        if self.groups.intersection(attributes.user.groups):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""

    async def rules_for(self, user: UserInfo, namespace: str) -> Rules:
        # kube does not list it among the rule resolvers: a superuser's rules are RBAC's.
        return Rules((), ())


def forbidden_message(attributes: Attributes) -> str:
    """``responsewriters.forbiddenMessage``."""
    name = attributes.user.name
    if not attributes.resource_request:
        return f'User "{name}" cannot {attributes.verb} path "{attributes.path}"'
    resource = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
    if attributes.namespace:
        return (f'User "{name}" cannot {attributes.verb} resource "{resource}" in API group '
                f'"{attributes.api_group}" in the namespace "{attributes.namespace}"')
    return (f'User "{name}" cannot {attributes.verb} resource "{resource}" in API group "{attributes.api_group}" '
            "at the cluster scope")


def forbidden(attributes: Attributes, reason: str) -> APIError:
    """kube's 403 for a request the authorizer did not allow (``NewForbidden`` around the message)."""
    message = forbidden_message(attributes) + (f": {reason}" if reason else "")
    if not attributes.resource_request or not attributes.resource:
        return APIError(403, "Forbidden", f"forbidden: {message}", {})
    qualified = f"{attributes.resource}.{attributes.api_group}" if attributes.api_group else attributes.resource
    details: dict[str, object] = {}
    if attributes.name:
        details["name"] = attributes.name
    if attributes.api_group:
        details["group"] = attributes.api_group
    details["kind"] = attributes.resource
    head = f'{qualified} "{attributes.name}"' if attributes.name else qualified
    return APIError(403, "Forbidden", f"{head} is forbidden: {message}", details)
