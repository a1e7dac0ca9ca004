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
from genericapi.controllers import ClientSet, Informer
from genericapi.controllers.namespaces import PerNamespaceController, namespace_terminating

#: The accounts every namespace gets.
SERVICE_ACCOUNTS = ("default",)


class ServiceAccountsController(PerNamespaceController):
    name = "serviceaccount"

    def __init__(self, clients: ClientSet) -> None:
        super().__init__(clients)
        self.accounts = Informer(clients.client("", "serviceaccounts"))
        self.sa_client = clients.client("", "serviceaccounts")
        self.informers.append(self.accounts)
        self.namespaces.add_handler(self._namespace_event)
        self.accounts.add_handler(self._account_event)

    def _namespace_event(self, etype: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if etype in ("ADDED", "MODIFIED"):
            self.queue.add(obj["metadata"]["name"])

    def _account_event(self, etype: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        meta = obj.get("metadata") or {}
        if etype == "DELETED" and meta.get("name") in SERVICE_ACCOUNTS:
            self.queue.add(meta.get("namespace") or "")

    async def reconcile(self, key: Hashable) -> None:
        namespace = self.active_namespace(key)
        if namespace is None:
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
