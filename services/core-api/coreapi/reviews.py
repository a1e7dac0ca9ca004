"""SelfSubjectReview (``kubectl auth whoami``): a create-only resource that stores nothing and
answers with the user the request came from, as kube-apiserver's authentication API does."""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import user
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry.fieldtracking import Writer
from genericapi.registry.store import Store

SELF_SUBJECT_REVIEW = ResourceInfo("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews",
                                   "selfsubjectreview", False, verbs=("create",))
#: Every version kube 1.33 serves it at; v1beta1 and v1alpha1 only with ``--runtime-config``.
SELF_SUBJECT_REVIEWS: tuple[ResourceInfo, ...] = tuple(
    ResourceInfo("authentication.k8s.io", version, "SelfSubjectReview", "selfsubjectreviews",
                 "selfsubjectreview", False, verbs=("create",))
    for version in ("v1", "v1beta1", "v1alpha1"))


class SelfSubjectReviewStore(Store):
    """Nothing is written to etcd and there is nothing to watch."""

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def create(self, namespace: str, obj: dict[str, Any], dry_run: bool = False,
                     writer: Writer | None = None) -> dict[str, Any]:
        who = user.current_user.get() or user.ANONYMOUS_USER
        return {"kind": "SelfSubjectReview", "apiVersion": self.info.api_version,
                "metadata": {"creationTimestamp": None}, "status": {"userInfo": who.to_dict()}}
