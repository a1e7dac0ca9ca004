"""The one place core-api asks "may this user do this?": kube's ``authorizer.Authorizer``.

kubechain enforces no authorization today: every authenticated request may do everything, which
is what kube-apiserver answers with ``--authorization-mode=AlwaysAllow``. The access reviews ask
this interface, so when RBAC arrives only the authorizer behind it changes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

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
