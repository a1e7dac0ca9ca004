"""The tokencleaner: expired bootstrap tokens are deleted, as kube-controller-manager's tokencleaner.

Watches ``bootstrap.kubernetes.io/token`` Secrets in ``kube-system``; one past its ``expiration``
(or with an expiration that is not RFC 3339, which kube counts as expired) is deleted with its uid
as precondition; one not yet expired is looked at again when it expires.
"""

from __future__ import annotations

from collections.abc import Hashable
from datetime import UTC, datetime
from typing import Any

from genericapi.apimachinery import bootstraptoken
from genericapi.apimachinery.errors import APIError
from genericapi.controllers import ClientSet, Controller, Informer


class TokenCleaner(Controller):
    name = "tokencleaner"

    def __init__(self, clients: ClientSet) -> None:
        super().__init__()
        self.client = clients.client("", "secrets")
        self.secrets = Informer(self.client, namespace=bootstraptoken.NAMESPACE)
        self.informers.append(self.secrets)
        self.secrets.add_handler(self._event)

    def _event(self, etype: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if etype != "DELETED" and obj.get("type") == bootstraptoken.SECRET_TYPE:
            self.queue.add(obj["metadata"]["name"])

    async def on_synced(self) -> None:
        for secret in self.secrets.items():
            self._event("ADDED", secret, None)

    async def reconcile(self, key: Hashable) -> None:
        name = str(key)
        secret = self.secrets.get(bootstraptoken.NAMESPACE, name)
        if secret is None or secret.get("type") != bootstraptoken.SECRET_TYPE \
                or secret["metadata"].get("deletionTimestamp"):
            return
        now = datetime.now(UTC)
        if bootstraptoken.expired(secret, now):
            try:
                await self.client.delete(bootstraptoken.NAMESPACE, name, uid=secret["metadata"].get("uid"))
            except APIError as err:
                if err.code not in (404, 409):  # gone, or a new Secret of that name: nothing to do
                    raise
            return
        when = bootstraptoken.expiration(secret)
        if when is not None:
            self.queue.add_after(name, max((when - now).total_seconds(), 0.0) + 0.01)
