"""NamespaceLifecycle admission, shared by every service that stores namespaced objects.

Objects are created only in namespaces that exist (404 otherwise) and are not being deleted
(403 with the ``NamespaceTerminating`` cause), as kube-apiserver's admission plugin answers.
Namespaces are core-api's objects: it passes its own store; other services pass a read-only,
watch-cached view of the same etcd keys (``namespace_view``), started but never served.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import admission as adm
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
    """A mutating-phase plugin (kube's ``Admit``): it runs before any webhook is called."""

    def __init__(self, namespaces: Store) -> None:
        self.namespaces = namespaces

    def handles(self, operation: str) -> bool:
        return operation in (adm.CREATE, adm.UPDATE, adm.DELETE)

    async def admit(self, attrs: adm.Attributes) -> None:
        namespace = attrs.namespace
        if attrs.operation != adm.CREATE or not namespace or attrs.subresource:
            return
        ns = await self._namespace(namespace)
        if (ns.get("metadata") or {}).get("deletionTimestamp") or (ns.get("status") or {}).get("phase") == \
                "Terminating":
            obj = attrs.obj or {}
            denied = apierrors.forbidden_error(
                attrs.group, attrs.resource, (obj.get("metadata") or {}).get("name", ""),
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
