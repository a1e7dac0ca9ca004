"""core-api's MutatingAdmissionWebhook and ValidatingAdmissionWebhook: wired on its own stores.

The configurations come from core-api's own admissionregistration.k8s.io/v1 stores (their watch
caches), namespace labels from its Namespaces store, Services for ``clientConfig.service`` from a
watch-cached view of the cluster's Services and endpoints; matchPolicy Equivalent uses the
served versions that share a storage (core and events.k8s.io Events, autoscaling v1/v2 HPAs).
"""

from __future__ import annotations

import asyncio

from genericapi.admission.equivalents import StoreEquivalents
from genericapi.admission.source import GROUP, WebhookSource
from genericapi.admission.webhooks import MutatingWebhook, ValidatingWebhook, namespace_labels_from
from genericapi.apimachinery.authorization import Authorizer
from genericapi.apimachinery.serviceresolver import ServiceResolver
from genericapi.registry.serviceview import ClusterServiceView
from genericapi.server.apiserver import GenericAPIServer


def install_webhooks(server: GenericAPIServer, authorizer: Authorizer | None) -> None:
    """Append the two webhook plugins to the chain (last of each phase, as kube's order puts them)."""
    mutating_store = server.by_resource[(GROUP, "mutatingwebhookconfigurations")]
    validating_store = server.by_resource[(GROUP, "validatingwebhookconfigurations")]
    services = ClusterServiceView(server.etcd, server.config.etcd_prefix)
    resolver = ServiceResolver(services)
    mutating = WebhookSource(mutating_store, resolver, mutating=True)
    validating = WebhookSource(validating_store, resolver, mutating=False)
    labels = namespace_labels_from(server.by_resource[("", "namespaces")])
    equivalents = StoreEquivalents(lambda: server.stores)
    server.admission.mutating.append(MutatingWebhook(mutating, labels, equivalents, authorizer))
    server.admission.validating.append(ValidatingWebhook(validating, labels, equivalents, authorizer))

    async def start(_s: GenericAPIServer) -> None:
        await services.start()

    async def stop(_s: GenericAPIServer) -> None:
        await asyncio.gather(mutating.close(), validating.close(), services.stop(), return_exceptions=True)

    server.post_start.insert(0, start)
    server.pre_shutdown.append(stop)
