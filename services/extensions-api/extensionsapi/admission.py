"""NamespaceLifecycle for custom resources: created only in namespaces that exist and are not ending.

Namespaces are core-api's objects; extensions-api follows their etcd keys with a read-only watch
cache (not served) and answers as kube-apiserver's admission plugin does: 404 for a missing
namespace, 403 ``NamespaceTerminating`` for one being deleted. (core-api has the same plugin over
its own Namespace store; services do not share code except through the shared library.)
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.storage.etcd import EtcdClient

NAMESPACES = ResourceInfo("", "v1", "Namespace", "namespaces", "namespace", namespaced=False)


def namespace_store(client: EtcdClient, etcd_prefix: str) -> Store:
    """A read-only view of the cluster's Namespaces (start it; never install it)."""
    return Store(NAMESPACES, Strategy(NAMESPACES), client, f"{etcd_prefix.rstrip('/')}/namespaces",
                 watch_cache_size=100)


class NamespaceLifecycle:
    def __init__(self, namespaces: Store) -> None:
        self.namespaces = namespaces

    async def __call__(self, operation: str, store: Store, namespace: str, obj: dict[str, Any]) -> None:
        if operation != "CREATE" or not store.info.namespaced or not namespace:
            return
        cached = self.namespaces.cache.get(self.namespaces.key("", namespace)) if self.namespaces.cache.ready else None
        if cached is not None:
            ns = cached.obj
        else:
            try:
                ns = await self.namespaces.get("", namespace)  # a namespace created a moment ago
            except apierrors.APIError as err:
                if err.code == 404:
                    raise apierrors.not_found("", "namespaces", namespace) from None
                raise
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
