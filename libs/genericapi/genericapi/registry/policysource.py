"""ValidatingAdmissionPolicies, their bindings, namespaces and params, watch-cached from the shared etcd.

The policy plugin runs in every service that stores objects (core-api for built-ins,
extensions-api for custom resources), so each follows core-api's keys for policies and bindings
(``<prefix>/validatingadmissionpolicies/``, ``<prefix>/validatingadmissionpolicybindings/``) with
a watch cache of its own, as kube's informers do. Params are read from a watch of the param
kind's keys, started the first time a binding needs it: a ``ParamResolver`` maps a paramKind
(apiVersion, kind) to its key prefix and scope (the service's own stores, or the custom
resources its CRDs define). Implements ``genericapi.apimachinery.policy.plugin.PolicySource``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from genericapi.storage.cacher import WatchCache
from genericapi.storage.etcd import EtcdClient

from .codec import JsonCodec


@dataclass(frozen=True)
class ParamTarget:
    """Where the objects of one param kind are stored, and how."""

    key_prefix: str  # "<prefix>/configmaps", "<prefix>/example.com/widgets"
    namespaced: bool
    cache: WatchCache | None = None  # a store's own (started) cache, when the service has one


#: (apiVersion, kind) -> where that kind is stored, or None when the service knows no such kind.
ParamResolver = Callable[[str, str], "ParamTarget | None"]
NamespaceLookup = Callable[[str], "dict[str, Any] | None"]


class ParamCache:
    """The objects of one param kind (``ParamStore``)."""

    def __init__(self, target: ParamTarget, cache: WatchCache, owned: bool) -> None:
        self.target = target
        self.namespaced = target.namespaced
        self.cache = cache
        self.owned = owned
        self._start: asyncio.Task[None] | None = None

    async def wait_synced(self, wait_seconds: float) -> bool:
        if self.cache.ready:
            return True
        if self._start is None:  # a started cache's start() only waits for its first list
            self._start = asyncio.ensure_future(self.cache.start())
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._start), wait_seconds)
        return self.cache.ready

    def _prefix(self, namespace: str) -> bytes:
        base = self.target.key_prefix.rstrip("/")
        return f"{base}/{namespace}/".encode() if namespace else f"{base}/".encode()

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        base = self.target.key_prefix.rstrip("/")
        key = f"{base}/{namespace}/{name}" if namespace else f"{base}/{name}"
        cached = self.cache.get(key.encode())
        return cached.obj if cached is not None else None

    def list(self, namespace: str) -> list[dict[str, Any]]:
        items, _rev = self.cache.list(self._prefix(namespace))
        return [c.obj for c in items]

    async def stop(self) -> None:
        if self.owned:
            if self._start is not None:
                self._start.cancel()
            await self.cache.stop()


class WatchedPolicySource:
    """Policies and bindings from watch caches; params from caches started on demand."""

    def __init__(self, client: EtcdClient, etcd_prefix: str, namespaces: NamespaceLookup,
                 params: ParamResolver) -> None:
        base = etcd_prefix.rstrip("/")
        self._client = client
        codec = JsonCodec()
        self._policy_prefix = f"{base}/validatingadmissionpolicies/".encode()
        self._binding_prefix = f"{base}/validatingadmissionpolicybindings/".encode()
        self.policy_cache = WatchCache(client, self._policy_prefix, codec, window=100)
        self.binding_cache = WatchCache(client, self._binding_prefix, codec, window=100)
        self._namespaces = namespaces
        self._resolve = params
        self._params: dict[tuple[str, str, str, bool], ParamCache] = {}

    async def start(self) -> None:
        await asyncio.gather(self.policy_cache.start(), self.binding_cache.start())

    async def stop(self) -> None:
        await asyncio.gather(self.policy_cache.stop(), self.binding_cache.stop(),
                             *(p.stop() for p in self._params.values()), return_exceptions=True)

    def revision(self) -> Any:
        return (self.policy_cache.revision, self.binding_cache.revision)

    def policies(self) -> Iterable[dict[str, Any]]:
        items, _rev = self.policy_cache.list(self._policy_prefix)
        return [c.obj for c in items]

    def bindings(self) -> Iterable[dict[str, Any]]:
        items, _rev = self.binding_cache.list(self._binding_prefix)
        return [c.obj for c in items]

    def namespace(self, name: str) -> dict[str, Any] | None:
        return self._namespaces(name)

    def param_store(self, api_version: str, kind: str) -> ParamCache | None:
        target = self._resolve(api_version, kind)
        if target is None:
            return None
        key = (api_version, kind, target.key_prefix, target.namespaced)
        store = self._params.get(key)
        if store is None:
            if target.cache is not None:
                store = ParamCache(target, target.cache, owned=False)
            else:
                cache = WatchCache(self._client, (target.key_prefix.rstrip("/") + "/").encode(), JsonCodec(),
                                   window=1000)
                store = ParamCache(target, cache, owned=True)
            self._params[key] = store
        return store


def crd_param_target(crd: dict[str, Any], api_version: str, kind: str, etcd_prefix: str) -> ParamTarget | None:
    """The custom resources of ``crd`` when it defines ``kind`` at ``api_version`` (served or not)."""
    spec = crd.get("spec") or {}
    group, _, version = api_version.rpartition("/")
    if not group or spec.get("group") != group or (spec.get("names") or {}).get("kind") != kind:
        return None
    if not any(isinstance(v, dict) and v.get("name") == version for v in spec.get("versions") or []):
        return None
    plural = str((spec.get("names") or {}).get("plural") or "")
    return ParamTarget(f"{etcd_prefix.rstrip('/')}/{group}/{plural}", spec.get("scope") == "Namespaced")


class CRDKinds:
    """The cluster's CustomResourceDefinitions (a watch cache of extensions-api's keys), to find where
    a custom param kind is stored from a service that does not serve it."""

    def __init__(self, client: EtcdClient, etcd_prefix: str) -> None:
        self._etcd_prefix = etcd_prefix
        self._prefix = f"{etcd_prefix.rstrip('/')}/apiextensions.k8s.io/customresourcedefinitions/".encode()
        self.cache = WatchCache(client, self._prefix, JsonCodec(), window=100)

    def target(self, api_version: str, kind: str) -> ParamTarget | None:
        items, _rev = self.cache.list(self._prefix)
        for c in items:
            found = crd_param_target(c.obj, api_version, kind, self._etcd_prefix)
            if found is not None:
                return found
        return None


def stores_resolver(stores: Callable[[], Iterable[Any]], *fallbacks: ParamResolver) -> ParamResolver:
    """Resolve a param kind to one of the service's own stores (``Store``: ``info``, ``key_prefix``,
    ``cache``) serving it at that version, else ask ``fallbacks`` in order."""
    def resolve(api_version: str, kind: str) -> ParamTarget | None:
        group, _, version = api_version.rpartition("/")
        for store in stores():
            info = store.info
            if (info.group, info.version, info.kind) == (group, version, kind):
                return ParamTarget(store.key_prefix, info.namespaced, store.cache)
        for fallback in fallbacks:
            found = fallback(api_version, kind)
            if found is not None:
                return found
        return None
    return resolve
