"""The ServiceAccounts the gateway's token authenticator checks tokens against, from etcd.

A service account token stays valid only while its account exists with the uid the token names
(kube's authenticator looks the account up on every request). The gateway follows the accounts'
etcd prefix with one watch cache, so the lookup is in memory and never blocks a request.
"""

from __future__ import annotations

from genericapi.registry.codec import JsonCodec
from genericapi.storage.cacher import WatchCache
from genericapi.storage.etcd import EtcdClient


class ServiceAccountView:
    def __init__(self, client: EtcdClient, prefix: str = "/registry") -> None:
        self._prefix = f"{prefix.rstrip('/')}/serviceaccounts/"
        self._cache = WatchCache(client, self._prefix.encode(), JsonCodec(), window=100)

    @property
    def ready(self) -> bool:
        return self._cache.ready

    async def start(self) -> None:
        await self._cache.start()

    async def stop(self) -> None:
        await self._cache.stop()

    def uid(self, namespace: str, name: str) -> str | None:
        """The account's uid, or None when there is no such account (or the view is not listed yet)."""
        cached = self._cache.get(f"{self._prefix}{namespace}/{name}".encode())
        return str(cached.obj.get("metadata", {}).get("uid") or "") if cached is not None else None
