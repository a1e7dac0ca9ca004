"""The ``authorization.k8s.io/v1`` reviews: create-only, nothing stored, answered by the authorizer.

``kubectl auth can-i`` posts a SelfSubjectAccessReview (``--list``: a SelfSubjectRulesReview);
controllers and webhooks post SubjectAccessReviews about other users. Each store validates the
review as kube does (422 Invalid, the kind qualified by the group, an empty name), takes the
attributes from the spec (or, for the self reviews, the requesting user) and asks the
``Authorizer``. The review comes back with its status filled in (201).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery import user as users
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.user import UserInfo
from genericapi.registry.fieldtracking import Writer
from genericapi.registry.strategy import Strategy
from genericapi.storage.etcd import EtcdClient

from . import accessreviews_validation as validation
from .authorizer import Attributes, Authorizer, Decision, Rules
from .virtual import VirtualStore, ensure_namespace, mapping

_GROUP = "authorization.k8s.io"


def attributes_from(spec: dict[str, Any], who: UserInfo) -> Attributes:
    """``ResourceAttributesFrom`` / ``NonResourceAttributesFrom`` for ``who``."""
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        return Attributes(user=who, verb=str(resource.get("verb") or ""), resource_request=True,
                          namespace=str(resource.get("namespace") or ""), api_group=str(resource.get("group") or ""),
                          api_version=str(resource.get("version") or ""),
                          resource=str(resource.get("resource") or ""),
                          subresource=str(resource.get("subresource") or ""), name=str(resource.get("name") or ""))
    non_resource = spec.get("nonResourceAttributes") or {}
    return Attributes(user=who, verb=str(non_resource.get("verb") or ""), resource_request=False,
                      path=str(non_resource.get("path") or ""))


def spec_user(spec: dict[str, Any]) -> UserInfo:
    """The subject a SubjectAccessReview asks about (``AuthorizationAttributesFrom``)."""
    extra = mapping(spec.get("extra"))
    return UserInfo(str(spec.get("user") or ""), tuple(str(g) for g in spec.get("groups") or ()),
                    str(spec.get("uid") or ""), {str(k): [str(v) for v in vs or []] for k, vs in extra.items()})


def review_status(decision: Decision, reason: str, evaluation_error: str = "") -> dict[str, Any]:
    """``SubjectAccessReviewStatus`` as v1 serializes it (false/empty fields omitted, allowed kept)."""
    status: dict[str, Any] = {"allowed": decision is Decision.ALLOW}
    if decision is Decision.DENY:
        status["denied"] = True
    if reason:
        status["reason"] = reason
    if evaluation_error:
        status["evaluationError"] = evaluation_error
    return status


def rules_status(rules: Rules) -> dict[str, Any]:
    """``SubjectRulesReviewStatus``: the rules in v1's shape (empty lists omitted)."""
    resource_rules = []
    for r in rules.resource_rules:
        rule: dict[str, Any] = {"verbs": list(r.verbs)}
        for key, values in (("apiGroups", r.api_groups), ("resources", r.resources),
                            ("resourceNames", r.resource_names)):
            if values:
                rule[key] = list(values)
        resource_rules.append(rule)
    non_resource_rules = []
    for n in rules.non_resource_rules:
        entry: dict[str, Any] = {"verbs": list(n.verbs)}
        if n.non_resource_urls:
            entry["nonResourceURLs"] = list(n.non_resource_urls)
        non_resource_rules.append(entry)
    status: dict[str, Any] = {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                              "incomplete": rules.incomplete}
    if rules.evaluation_error:
        status["evaluationError"] = rules.evaluation_error
    return status


def _requester() -> UserInfo:
    """The requesting user; a request without one is anonymous (as kube's authentication chain)."""
    return users.current_user.get() or users.ANONYMOUS_USER


def _echo(obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    meta = mapping(obj.get("metadata"))
    out_meta = {k: v for k, v in meta.items() if k != "managedFields"}
    out_meta.setdefault("creationTimestamp", None)
    spec = mapping(obj.get("spec"))
    return {"kind": obj["kind"], "apiVersion": obj["apiVersion"], "metadata": out_meta, "spec": spec,
            "status": status}


class ReviewStore(VirtualStore):
    """A review kind: its validation and how it asks the authorizer."""

    def __init__(self, info: ResourceInfo, strategy: Strategy, client: EtcdClient, key_prefix: str,
                 authorizer: Authorizer,
                 validate: Callable[[dict[str, Any]], list[FieldError]] | None = None) -> None:
        super().__init__(info, strategy, client, key_prefix)
        self.authorizer = authorizer
        self.validate = validate

    def _check(self, obj: dict[str, Any]) -> None:
        if self.validate is not None:
            errs = self.validate(obj)
            if errs:
                raise apierrors.invalid_object(_GROUP, self.info.kind, "", errs)

    async def create(self, namespace: str, obj: dict[str, Any], dry_run: bool = False,
                     writer: Writer | None = None) -> dict[str, Any]:
        ensure_namespace(obj, namespace)
        if not isinstance(obj.get("spec"), dict):
            obj["spec"] = {}
        return await self.review(namespace, obj)

    async def review(self, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


class SubjectAccessReviewStore(ReviewStore):
    async def review(self, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        self._check(obj)
        spec = obj["spec"]
        decision, reason = await self.authorizer.authorize(attributes_from(spec, spec_user(spec)))
        return _echo(obj, review_status(decision, reason))


class LocalSubjectAccessReviewStore(ReviewStore):
    async def review(self, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        self._check(obj)
        if not namespace:
            raise apierrors.bad_request(f"namespace is required on this type: {namespace}")
        if namespace != (obj.get("metadata") or {}).get("namespace"):
            raise apierrors.bad_request(f"spec.resourceAttributes.namespace must match namespace: {namespace}")
        spec = obj["spec"]
        decision, reason = await self.authorizer.authorize(attributes_from(spec, spec_user(spec)))
        return _echo(obj, review_status(decision, reason))


class SelfSubjectAccessReviewStore(ReviewStore):
    async def review(self, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        self._check(obj)
        who = _requester()
        decision, reason = await self.authorizer.authorize(attributes_from(obj["spec"], who))
        return _echo(obj, review_status(decision, reason))


class SelfSubjectRulesReviewStore(ReviewStore):
    async def review(self, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        who = _requester()
        rules_namespace = str(obj["spec"].get("namespace") or "")
        if not rules_namespace:
            raise apierrors.bad_request("no namespace on request")
        rules = await self.authorizer.rules_for(who, rules_namespace)
        # kube answers a new review: its spec is not echoed.
        return {"kind": obj["kind"], "apiVersion": obj["apiVersion"], "metadata": {"creationTimestamp": None},
                "spec": {}, "status": rules_status(rules)}


#: Store class and validation of each review resource, by plural.
REVIEW_STORES: dict[str, tuple[type[ReviewStore], Callable[[dict[str, Any]], list[FieldError]] | None]] = {
    "subjectaccessreviews": (SubjectAccessReviewStore, validation.validate_subject_access_review),
    "localsubjectaccessreviews": (LocalSubjectAccessReviewStore, validation.validate_local_subject_access_review),
    "selfsubjectaccessreviews": (SelfSubjectAccessReviewStore, validation.validate_self_subject_access_review),
    "selfsubjectrulesreviews": (SelfSubjectRulesReviewStore, None),
}
