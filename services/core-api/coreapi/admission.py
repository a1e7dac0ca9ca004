"""core-api's NamespaceLifecycle: the shared plugin, plus the namespaces that may never be deleted."""

from __future__ import annotations

from genericapi.apimachinery import admission as adm
from genericapi.apimachinery import errors as apierrors
from genericapi.registry import namespacelifecycle

#: Namespaces that always exist for admission purposes (created at bootstrap).
_IMMORTAL = frozenset({"default", "kube-system", "kube-public"})


class NamespaceLifecycle(namespacelifecycle.NamespaceLifecycle):
    async def admit(self, attrs: adm.Attributes) -> None:
        if attrs.operation == adm.DELETE and (attrs.group, attrs.resource) == ("", "namespaces"):
            if attrs.name in _IMMORTAL:
                raise apierrors.forbidden_error("", "namespaces", attrs.name, "this namespace may not be deleted")
            return
        await super().admit(attrs)
