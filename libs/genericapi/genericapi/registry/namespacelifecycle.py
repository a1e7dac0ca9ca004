"""NamespaceLifecycle admission, shared by every service that stores namespaced objects.

Objects are created only in namespaces that exist (404 otherwise) and are not being deleted
(403 with the ``NamespaceTerminating`` cause), as kube-apiserver's admission plugin answers.
Namespaces are core-api's objects: it passes its own store; other services pass a read-only,
watch-cached view of the same etcd keys (``namespace_view``), started but never served.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.storage.etcd import EtcdClient

from .store import Store
from .strategy import Strategy

NAMESPACES = ResourceInfo("", "v1", "Namespace", "namespaces", "namespace", namespaced=False)


def namespace_view(client: EtcdClient, etcd_prefix: str) -> Store:
    """A read-only view of the cluster's Namespaces (start it; never install it)."""
    return Store(NAMESPACES, Strategy(NAMESPACES), client, f"{etcd_prefix.rstrip('/')}/namespaces",
                 watch_cache_size=100)


class NamespaceLifecycle:
    def __init__(self, namespaces: Store) -> None:
        self.namespaces = namespaces

    async def __call__(self, operation: str, store: Store, namespace: str, obj: dict[str, Any]) -> None:
        if operation != "CREATE" or not store.info.namespaced or not namespace:
            return
        ns = await self._namespace(namespace)
        if (ns.get("metadata") or {}).get("deletionTimestamp") or (ns.get("status") or {}).get("phase") == \
                "Terminating":
            info = store.info
            denied = apierrors.forbidden_error(
                info.group, info.plural, (obj.get("metadata") or {}).get("name", ""),
                f"unable to create new content in namespace {namespace} because it is being terminated")
            assert denied.details is not None
            denied.details["causes"] = [{"reason": "NamespaceTerminating",
                                         "message": f"namespace {namespace} is being terminated",
                                         "field": "metadata.namespace"}]
            raise denied

    async def _namespace(self, namespace: str) -> dict[str, Any]:
        cached = self.namespaces.cache.get(self.namespaces.key("", namespace)) if self.namespaces.cache.ready else None
        if cached is not None:
            return cached.obj
        try:
            return await self.namespaces.get("", namespace)  # a namespace created a moment ago
        except apierrors.APIError as err:
            if err.code == 404:
                raise apierrors.not_found("", "namespaces", namespace) from None
            raise
