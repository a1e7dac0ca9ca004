"""The ``scale`` subresource: an ``autoscaling/v1`` Scale view of a resource's replicas."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery import labels
from genericapi.apimachinery.nested import get_path, set_path
from genericapi.registry.admissionchain import RequestAdmission, options_object, request_admission
from genericapi.registry.fieldtracking import Writer
from genericapi.registry.store import Store
from genericapi.registry.subresourceview import SubresourceView


def _paths(store: Store) -> tuple[str, str, str]:
    return store.info.scale_paths or (".spec.replicas", ".status.replicas", ".spec.selector")


def to_scale(store: Store, obj: dict[str, Any]) -> dict[str, Any]:
    spec_path, status_path, selector_path = _paths(store)
    meta = obj.get("metadata") or {}
    selector = get_path(obj, selector_path)
    if isinstance(selector, dict):
        selector_text = str(labels.from_label_selector_object(selector))
    else:
        selector_text = selector or ""
    scale_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                  if k in meta}
    status: dict[str, Any] = {"replicas": int(get_path(obj, status_path) or 0)}
    if selector_text:
        status["selector"] = selector_text
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": scale_meta,
            "spec": {"replicas": int(get_path(obj, spec_path) or 0)}, "status": status}


def _to_parent(store: Store, name: str) -> Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]:
    """kube's ``scaleUpdatedObjectInfo.UpdatedObject`` after the request's change and mutating
    admission: validate the Scale (``ValidateScale``), check its UID precondition, move its
    replicas and resourceVersion to the parent."""
    spec_path = _paths(store)[0]

    def to_parent(parent: dict[str, Any], scale: dict[str, Any]) -> dict[str, Any]:
        replicas = (scale.get("spec") or {}).get("replicas") if isinstance(scale.get("spec"), dict) else None
        if not isinstance(replicas, int) or isinstance(replicas, bool):
            raise apierrors.invalid_object("autoscaling", "Scale", name, [
                apierrors.invalid("spec.replicas", replicas, "must be an integer")])
        if replicas < 0:
            raise apierrors.invalid_object("autoscaling", "Scale", name, [
                apierrors.invalid("spec.replicas", replicas, "must be greater than or equal to 0")])
        meta = scale.get("metadata") if isinstance(scale.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        parent_meta = parent["metadata"]
        uid = meta.get("uid")
        if uid and uid != parent_meta.get("uid"):
            raise apierrors.conflict(store.info.group, f"{store.info.plural}/scale", name,
                                     f"Precondition failed: UID in precondition: {uid}, "
                                     f"UID in object meta: {parent_meta.get('uid') or ''}")
        set_path(parent, spec_path, replicas)
        rv = meta.get("resourceVersion")
        if rv:
            parent_meta["resourceVersion"] = rv
        return parent

    return to_parent


def scale_view(store: Store, name: str) -> SubresourceView:
    """The ``scale`` subresource of ``store`` as admission sees it: an ``autoscaling/v1`` Scale
    (kube uses that kind for apps/v1 workloads, ReplicationControllers and custom resources)."""
    return SubresourceView("scale", ("autoscaling", "v1", "Scale"), lambda obj: to_scale(store, obj),
                           _to_parent(store, name))


async def update_scale(store: Store, namespace: str, name: str,
                       change: Callable[[dict[str, Any]], dict[str, Any]], dry_run: bool,
                       writer: Writer | None = None) -> dict[str, Any]:
    """Apply ``change`` to the Scale view, admit the Scale, and write the replicas back to the
    parent object (kube's ``ScaleREST.Update``)."""
    token = None
    if request_admission.get() is None:
        # the request's options as kube's AdmissionReview carries them (a handler may set its own)
        token = request_admission.set(RequestAdmission(options_object("UpdateOptions", dry_run)))
    try:
        updated = await store.guaranteed_update(namespace, name, change, dry_run=dry_run, writer=writer,
                                                view=scale_view(store, name))
    finally:
        if token is not None:
            request_admission.reset(token)
    return to_scale(store, updated)
