"""Controllers that keep something in every active namespace (a ServiceAccount, a ConfigMap).

Several of kube-controller-manager's controllers have the same skeleton: keyed by namespace name,
every namespace enqueued once the informers are synced (level-triggered), nothing done in a
namespace that is being deleted, and a create refused by NamespaceLifecycle not retried. That
skeleton lives here; a subclass adds its own informers, event handlers and ``reconcile``.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from genericapi.apimachinery.errors import APIError

from .clientset import ClientSet
from .controller import Controller
from .informer import Informer


def namespace_active(ns: dict[str, Any]) -> bool:
    """Active: not being deleted (phase Active; a namespace stored before defaulting has none)."""
    if (ns.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (ns.get("status") or {}).get("phase", "Active") in ("Active", "")


def namespace_terminating(err: APIError) -> bool:
    """A create refused because the namespace is being deleted (NamespaceLifecycle admission)."""
    causes = (err.details or {}).get("causes") or []
    return err.code == 403 and any(c.get("reason") == "NamespaceTerminating" for c in causes)


class PerNamespaceController(Controller):
    """A controller keyed by namespace name, with a namespaces informer (registered first)."""

    def __init__(self, clients: ClientSet) -> None:
        super().__init__()
        self.namespaces = Informer(clients.client("", "namespaces"))
        self.informers.append(self.namespaces)

    async def on_synced(self) -> None:
        for ns in self.namespaces.items():
            self.queue.add(ns["metadata"]["name"])

    def active_namespace(self, key: Hashable) -> str | None:
        """The namespace named by ``key`` if it exists and is active, else None (nothing to do)."""
        namespace = str(key)
        ns = self.namespaces.get("", namespace)
        if ns is None or not namespace_active(ns):
            return None
        return namespace
