"""Roles, ClusterRoles and their bindings, watch-cached from the shared etcd for the authorizer.

The gateway authorizes every request, so RBAC's inputs must be in memory: one watch cache per
kind over core-api's keys (``<prefix>/roles/<ns>/<name>``, ``<prefix>/clusterroles/<name>``,
...). Lookups never block; a change in etcd is seen within the watch's latency, as kube's
informer-fed RBAC authorizer sees it. Implements ``genericapi.apimachinery.rbac.RBACSource``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from genericapi.apimachinery.authorization import PrivilegedGroups, Union
from genericapi.apimachinery.rbac import RBACAuthorizer
from genericapi.storage.cacher import WatchCache
from genericapi.storage.etcd import EtcdClient

from .codec import JsonCodec

_KINDS = ("roles", "clusterroles", "rolebindings", "clusterrolebindings")


class RBACView:
    def __init__(self, client: EtcdClient, prefix: str = "/registry") -> None:
        base = prefix.rstrip("/")
        self._prefixes = {k: f"{base}/{k}/".encode() for k in _KINDS}
        codec = JsonCodec()
        self._caches = {k: WatchCache(client, p, codec, window=100) for k, p in self._prefixes.items()}
        self._roles, self._cluster_roles, self._bindings, self._cluster_bindings = \
            (self._caches[k] for k in _KINDS)
        #: (kind, key prefix) -> (cache revision, objects): a listing is made once per change, not per request.
        self._lists: dict[tuple[str, str], tuple[int, list[dict[str, Any]]]] = {}

    @property
    def ready(self) -> bool:
        return all(c.ready for c in self._caches.values())

    async def start(self) -> None:
        await asyncio.gather(*(c.start() for c in self._caches.values()))

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self._caches.values()), return_exceptions=True)

    def _get(self, kind: str, key: str) -> dict[str, Any] | None:
        cached = self._caches[kind].get(self._prefixes[kind] + key.encode())
        return cached.obj if cached is not None else None

    def _list(self, kind: str, within: str = "") -> Iterable[dict[str, Any]]:
        cache = self._caches[kind]
        hit = self._lists.get((kind, within))
        if hit is not None and hit[0] == cache.revision:
            return hit[1]
        items, revision = cache.list(self._prefixes[kind] + within.encode())
        objs = [c.obj for c in items]
        self._lists[(kind, within)] = (revision, objs)
        return objs

    def generation(self) -> tuple[int, int, int, int]:
        """The four caches' revisions: any role or binding change moves one (RBACSource's optional
        ``generation``: the authorizer remembers decisions while it stays the same)."""
        return (self._roles.revision, self._cluster_roles.revision, self._bindings.revision,
                self._cluster_bindings.revision)

    def authorizer(self) -> Union:
        """kube's ``--authorization-mode=RBAC``: ``system:masters`` first, then RBAC over this view."""
        return Union(PrivilegedGroups("system:masters"), RBACAuthorizer(self))

    def cluster_role(self, name: str) -> dict[str, Any] | None:
        return self._get("clusterroles", name)

    def role(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get("roles", f"{namespace}/{name}")

    def cluster_role_bindings(self) -> Iterable[dict[str, Any]]:
        return self._list("clusterrolebindings")

    def role_bindings(self, namespace: str) -> Iterable[dict[str, Any]]:
        return self._list("rolebindings", f"{namespace}/")
