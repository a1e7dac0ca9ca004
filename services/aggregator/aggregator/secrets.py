"""The Secrets the gateway's token authenticators check tokens against, from etcd.

Legacy service account tokens stay valid only while their Secret exists and still holds that very
token; bootstrap tokens live in ``kube-system/bootstrap-token-<id>`` Secrets. kube-apiserver
reads both from a Secret informer; the gateway follows the Secrets' etcd prefix with one watch
cache, so a lookup is in memory and never blocks a request. Secrets may be encrypted at rest:
with the chain's ``--encryption-provider-config`` the cache decrypts them as core-api does.
"""

from __future__ import annotations

from typing import Any

from genericapi.registry.codec import JsonCodec
from genericapi.server import encryptionconfig
from genericapi.storage.cacher import WatchCache
from genericapi.storage.etcd import EtcdClient

from .auth import Authenticator
from .tokenauth import BootstrapTokens, LegacyTokens


class SecretView:
    def __init__(self, client: EtcdClient, prefix: str = "/registry", encryption_provider_config: str = "") -> None:
        self._prefix = f"{prefix.rstrip('/')}/secrets/"
        if encryption_provider_config:
            transformers = encryptionconfig.load(encryption_provider_config).transformers_for("", "secrets")
            if transformers is not None:
                client.set_transformer(self._prefix.encode(), transformers)
        self._cache = WatchCache(client, self._prefix.encode(), JsonCodec(), window=100)

    @property
    def ready(self) -> bool:
        return self._cache.ready

    async def start(self) -> None:
        await self._cache.start()

    async def stop(self) -> None:
        await self._cache.stop()

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Secret (shared: do not change it), or None when there is none (or not listed yet)."""
        cached = self._cache.get(f"{self._prefix}{namespace}/{name}".encode())
        return cached.obj if cached is not None else None


def attach(authenticator: Authenticator, view: SecretView, *, bootstrap: bool) -> None:
    """Give ``authenticator`` the token authenticators that read Secrets from ``view``: legacy
    service account tokens when it checks service account tokens, and bootstrap tokens if asked."""
    accounts = authenticator.service_accounts
    if accounts is not None:
        authenticator.legacy = LegacyTokens(accounts.keys, view.get, accounts.account_uid)
    if bootstrap:
        authenticator.bootstrap = BootstrapTokens(view.get)
