"""The serviceaccounts controller: a ``default`` ServiceAccount in every active namespace.

As kube-controller-manager's: a namespace that appears or changes is checked, and so is the
namespace of a ServiceAccount that is deleted, so a deleted ``default`` comes back. Namespaces
that are not active (being deleted) are left alone, and a create that races with termination
(403 NamespaceTerminating) or with deletion of the namespace (404) is not retried.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from genericapi.apimachinery.errors import APIError
from genericapi.controllers import ClientSet, Controller, Informer

#: The accounts every namespace gets.
SERVICE_ACCOUNTS = ("default",)


def namespace_active(ns: dict[str, Any]) -> bool:
    """Active: not being deleted (phase Active; a namespace stored before defaulting has none)."""
    if (ns.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (ns.get("status") or {}).get("phase", "Active") in ("Active", "")


def namespace_terminating(err: APIError) -> bool:
    """A create refused because the namespace is being deleted (NamespaceLifecycle admission)."""
    causes = (err.details or {}).get("causes") or []
    return err.code == 403 and any(c.get("reason") == "NamespaceTerminating" for c in causes)


class ServiceAccountsController(Controller):
    name = "serviceaccount"

    def __init__(self, clients: ClientSet) -> None:
        super().__init__()
        self.namespaces = Informer(clients.client("", "namespaces"))
        self.accounts = Informer(clients.client("", "serviceaccounts"))
        self.sa_client = clients.client("", "serviceaccounts")
        self.informers += [self.namespaces, self.accounts]
        self.namespaces.add_handler(self._namespace_event)
        self.accounts.add_handler(self._account_event)

    def _namespace_event(self, etype: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if etype in ("ADDED", "MODIFIED"):
            self.queue.add(obj["metadata"]["name"])

    def _account_event(self, etype: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        meta = obj.get("metadata") or {}
        if etype == "DELETED" and meta.get("name") in SERVICE_ACCOUNTS:
            self.queue.add(meta.get("namespace") or "")

    async def on_synced(self) -> None:
        for ns in self.namespaces.items():
            self.queue.add(ns["metadata"]["name"])

    async def reconcile(self, key: Hashable) -> None:
        namespace = str(key)
        ns = self.namespaces.get("", namespace)
        if ns is None or not namespace_active(ns):
            return
        failures: list[APIError] = []
        for name in SERVICE_ACCOUNTS:
            if self.accounts.get(namespace, name) is not None:
                continue
            body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}
            try:
                await self.sa_client.create(namespace, body)
            except APIError as err:
                if err.code in (404, 409) or namespace_terminating(err):
                    continue  # exists already, namespace gone, or namespace ending: nothing to retry
                failures.append(err)
        if failures:
            raise failures[0]
