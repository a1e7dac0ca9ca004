"""core-api's ValidatingAdmissionPolicy plugin: policies, bindings and params from watch caches.

Built-in objects are admitted here, so this is where kube-apiserver's policy plugin runs for
them. Params of a built-in kind come from core-api's own store caches (ConfigMaps, ...); params
of a custom kind from a watch of that kind's keys, found through a watch cache of the CRDs
(extensions-api's objects on the same etcd). CEL's ``authorizer`` asks core-api's authorizer
(RBAC over watch caches, or AlwaysAllow). ``matchPolicy: Equivalent`` converts objects between
the stores this service serves (``StoreEquivalents``, as the webhooks do).
"""

from __future__ import annotations

import asyncio
from typing import Any

from genericapi.admission.equivalents import StoreEquivalents
from genericapi.apimachinery.authorization import Authorizer
from genericapi.apimachinery.policy.plugin import ValidatingAdmissionPolicyPlugin
from genericapi.registry.policysource import CRDKinds, WatchedPolicySource, stores_resolver
from genericapi.server.apiserver import GenericAPIServer


def install(server: GenericAPIServer, authorizer: Authorizer | None) -> ValidatingAdmissionPolicyPlugin:
    """The plugin for core-api's validating admission phase; its caches start before the server is ready."""
    prefix = server.config.etcd_prefix
    namespaces = server.by_resource[("", "namespaces")]

    def namespace(name: str) -> dict[str, Any] | None:
        cached = namespaces.cache.get(namespaces.key("", name))
        return cached.obj if cached is not None else None

    crds = CRDKinds(server.etcd, prefix)
    source = WatchedPolicySource(server.etcd, prefix, namespace, stores_resolver(lambda: server.stores, crds.target))

    async def start(_s: GenericAPIServer) -> None:
        await asyncio.gather(source.start(), crds.cache.start())

    async def stop(_s: GenericAPIServer) -> None:
        await asyncio.gather(source.stop(), crds.cache.stop(), return_exceptions=True)

    server.post_start.insert(0, start)
    server.pre_shutdown.append(stop)
    return ValidatingAdmissionPolicyPlugin(source, authorizer, StoreEquivalents(lambda: server.stores))
