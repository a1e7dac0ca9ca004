"""extensions-api's MutatingAdmissionWebhook and ValidatingAdmissionWebhook.

Webhook configurations are core-api's objects: this link follows the same etcd keys with
read-only watch-cached views (as it follows Namespaces and Services), so every write to a custom
resource or a CRD reaches the same webhooks as a write through core-api. matchPolicy Equivalent
maps a CRD's served versions onto each other (converted as a read would convert them).
"""

from __future__ import annotations

import asyncio

from genericapi.admission.equivalents import StoreEquivalents
from genericapi.admission.source import MUTATING, VALIDATING, WebhookSource, configuration_view
from genericapi.admission.webhooks import MutatingWebhook, ValidatingWebhook, namespace_labels_from
from genericapi.apimachinery.authorization import Authorizer
from genericapi.apimachinery.serviceresolver import ServiceResolver
from genericapi.registry.store import Store
from genericapi.server.apiserver import GenericAPIServer


def install_webhooks(server: GenericAPIServer, namespaces: Store, resolver: ServiceResolver,
                     authorizer: Authorizer | None = None) -> None:
    """Append the two webhook plugins to the chain; the views start with the server. ``authorizer``
    is what matchConditions' CEL ``authorizer`` asks (extensions-api's, as core-api's)."""
    views = [configuration_view(server.etcd, server.config.etcd_prefix, info) for info in (MUTATING, VALIDATING)]
    mutating = WebhookSource(views[0], resolver, mutating=True)
    validating = WebhookSource(views[1], resolver, mutating=False)
    labels = namespace_labels_from(namespaces)
    equivalents = StoreEquivalents(lambda: server.stores)
    server.admission.mutating.append(MutatingWebhook(mutating, labels, equivalents, authorizer))
    server.admission.validating.append(ValidatingWebhook(validating, labels, equivalents, authorizer))

    async def start(_s: GenericAPIServer) -> None:
        await asyncio.gather(*(v.start() for v in views))

    async def stop(_s: GenericAPIServer) -> None:
        await asyncio.gather(mutating.close(), validating.close(), *(v.stop() for v in views),
                             return_exceptions=True)

    server.post_start.insert(0, start)
    server.pre_shutdown.append(stop)
