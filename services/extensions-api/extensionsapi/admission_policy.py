"""extensions-api's ValidatingAdmissionPolicy plugin: custom resources are admitted here.

Policies and bindings are core-api's objects, read from watch caches of their etcd keys;
namespaces from the read-only namespace view; params from the stores this service serves (custom
resources, any served version). CEL's ``authorizer`` asks extensions-api's authorizer, built from
its ``--authorization-mode`` as core-api's is (RBAC over watch caches, or AlwaysAllow), for the
request's user (the identity the gateway forwarded).
"""

from __future__ import annotations

from typing import Any

from genericapi.admission.equivalents import StoreEquivalents
from genericapi.apimachinery.authorization import Authorizer
from genericapi.apimachinery.policy.plugin import ValidatingAdmissionPolicyPlugin
from genericapi.registry.policysource import WatchedPolicySource, stores_resolver
from genericapi.registry.store import Store
from genericapi.server.apiserver import GenericAPIServer


def install(server: GenericAPIServer, namespaces: Store,
            authorizer: Authorizer | None = None) -> ValidatingAdmissionPolicyPlugin:
    """The plugin for extensions-api's validating admission phase (caches started before ready)."""

    def namespace(name: str) -> dict[str, Any] | None:
        cached = namespaces.cache.get(namespaces.key("", name))
        return cached.obj if cached is not None else None

    source = WatchedPolicySource(server.etcd, server.config.etcd_prefix, namespace,
                                 stores_resolver(lambda: server.stores))

    async def start(_s: GenericAPIServer) -> None:
        await source.start()

    async def stop(_s: GenericAPIServer) -> None:
        await source.stop()

    server.post_start.insert(0, start)
    server.pre_shutdown.append(stop)
    return ValidatingAdmissionPolicyPlugin(source, authorizer, StoreEquivalents(lambda: server.stores))
