"""The ``scale`` subresource: an ``autoscaling/v1`` Scale view of a resource's replicas."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery import labels
from genericapi.apimachinery.nested import get_path, set_path
from genericapi.registry.fieldtracking import Writer
from genericapi.registry.store import Store


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


async def update_scale(store: Store, namespace: str, name: str,
                       change: Callable[[dict[str, Any]], dict[str, Any]], dry_run: bool,
                       writer: Writer | None = None) -> dict[str, Any]:
    """Apply ``change`` to the Scale view and write the replicas back to the parent object."""
    spec_path = _paths(store)[0]

    def produce(old: dict[str, Any]) -> dict[str, Any]:
        scale = change(to_scale(store, old))
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool):
            raise apierrors.invalid_object("autoscaling", "Scale", name, [
                apierrors.invalid("spec.replicas", replicas, "must be an integer")])
        if replicas < 0:
            raise apierrors.invalid_object("autoscaling", "Scale", name, [
                apierrors.invalid("spec.replicas", replicas, "must be greater than or equal to 0")])
        new = copy.deepcopy(old)
        set_path(new, spec_path, replicas)
        rv = (scale.get("metadata") or {}).get("resourceVersion")
        if rv:
            new["metadata"]["resourceVersion"] = rv
        return new

    updated = await store.guaranteed_update(namespace, name, produce, dry_run=dry_run, writer=writer)
    return to_scale(store, updated)
