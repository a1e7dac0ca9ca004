"""core-api's NamespaceLifecycle: the shared plugin, plus the namespaces that may never be deleted."""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.registry import namespacelifecycle
from genericapi.registry.store import Store

#: Namespaces that always exist for admission purposes (created at bootstrap).
_IMMORTAL = frozenset({"default", "kube-system", "kube-public"})


class NamespaceLifecycle(namespacelifecycle.NamespaceLifecycle):
    async def __call__(self, operation: str, store: Store, namespace: str, obj: dict[str, Any]) -> None:
        info = store.info
        if operation == "DELETE" and (info.group, info.kind) == ("", "Namespace"):
            name = (obj.get("metadata") or {}).get("name", "")
            if name in _IMMORTAL:
                raise apierrors.forbidden_error("", "namespaces", name, "this namespace may not be deleted")
            return
        await super().__call__(operation, store, namespace, obj)
