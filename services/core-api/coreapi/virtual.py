"""The base of stores whose resources keep nothing in etcd (reviews, bindings, evictions).

Such a resource serves only the verbs its row lists (the router refuses the others with 405
before a store is asked); the store has no watch cache to start. The helpers are the small
steps kube's create handler takes for every such resource.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.registry.store import Store


class VirtualStore(Store):
    """Nothing is written to etcd and there is nothing to watch."""

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def created_status() -> dict[str, Any]:
    """The ``metav1.Status{Status: Success}`` a create answers, its code set to 201 by the handler."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def ensure_namespace(obj: dict[str, Any], namespace: str) -> None:
    """``EnsureObjectNamespaceMatchesRequestNamespace``: an empty namespace takes the request's,
    a cluster-scoped request clears it, a different one is a 400."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    current = meta.get("namespace") or ""
    if current == namespace:
        return
    if not current:
        meta["namespace"] = namespace
    elif not namespace:
        meta.pop("namespace", None)
    else:
        raise apierrors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request")


def mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (absent or malformed sections)."""
    return value if isinstance(value, dict) else {}
