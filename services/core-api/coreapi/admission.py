"""NamespaceLifecycle admission: objects live only in namespaces that exist and are not ending."""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.registry.store import Store

#: Namespaces that always exist for admission purposes (created at bootstrap).
_IMMORTAL = frozenset({"default", "kube-system", "kube-public"})


class NamespaceLifecycle:
    def __init__(self, namespaces: Store) -> None:
        self.namespaces = namespaces

    async def __call__(self, operation: str, store: Store, namespace: str, obj: dict[str, Any]) -> None:
        info = store.info
        if operation == "DELETE" and (info.group, info.kind) == ("", "Namespace"):
            name = (obj.get("metadata") or {}).get("name", "")
            if name in _IMMORTAL:
                raise apierrors.forbidden_error("", "namespaces", name, "this namespace may not be deleted")
            return
        if operation != "CREATE" or not store.info.namespaced or not namespace:
            return
        ns = None
        if self.namespaces.cache.ready:
            cached = self.namespaces.cache.get(self.namespaces.key("", namespace))
            ns = cached.obj if cached is not None else None
        if ns is None:
            try:
                ns = await self.namespaces.get("", namespace)
            except apierrors.APIError as err:
                if err.code == 404:
                    raise apierrors.not_found("", "namespaces", namespace) from None
                raise
        meta = ns.get("metadata") or {}
        phase = (ns.get("status") or {}).get("phase")
        if meta.get("deletionTimestamp") or phase == "Terminating":
            info = store.info
            name = (obj.get("metadata") or {}).get("name", "")
            denied = apierrors.forbidden_error(
                info.group, info.plural, name,
                f"unable to create new content in namespace {namespace} because it is being terminated")
            assert denied.details is not None
            denied.details["causes"] = [{"reason": "NamespaceTerminating",
                                      "message": f"namespace {namespace} is being terminated",
                                      "field": "metadata.namespace"}]
            raise denied
