"""Webhook configurations as the dispatcher needs them, compiled once per change of the watch cache.

kube's ``configuration.NewMutatingWebhookConfigurationManager`` keeps the configurations from an
informer, sorted by name, each webhook with its parsed selectors, compiled matchConditions and
REST client. ``WebhookSource`` does that over a store's watch cache (core-api passes its own
stores; another process passes a read-only view of the same etcd keys): a request only checks
the cache's revision, and rebuilds the list only after a configuration changed. A webhook keeps
its client (and its pooled connections) while its ``clientConfig`` stays the same.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import orjson

from genericapi.apimachinery.labels import LabelSelector, LabelSelectorError
from genericapi.apimachinery.matchconditions import MatchConditions
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.serviceresolver import ServiceResolver
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.storage.etcd import EtcdClient

from . import rules
from .client import WebhookClient
from .review import review_version

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10
GROUP = "admissionregistration.k8s.io"
MUTATING = ResourceInfo(GROUP, "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
                        "mutatingwebhookconfiguration", namespaced=False)
VALIDATING = ResourceInfo(GROUP, "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
                          "validatingwebhookconfiguration", namespaced=False)


def configuration_view(client: EtcdClient, etcd_prefix: str, info: ResourceInfo) -> Store:
    """A read-only, watch-cached view of core-api's webhook configurations (start it; never serve it)."""
    return Store(info, Strategy(info), client, f"{etcd_prefix.rstrip('/')}/{info.plural}", watch_cache_size=100)


@dataclass
class Hook:
    """One webhook of one configuration, ready to match and call."""

    uid: str  # kube's accessor uid: <configuration>/<webhook>/<index>
    configuration: str
    name: str
    rules: list[dict[str, Any]]
    namespace_selector: LabelSelector
    object_selector: LabelSelector
    selector_error: str
    match_conditions: MatchConditions | None
    match_policy: str
    failure_policy: str
    side_effects: str
    timeout: int
    review_version: str
    reinvoke: bool
    client: WebhookClient


def _selector(value: Any) -> tuple[LabelSelector, str]:
    try:
        return rules.parsed_selector(value), ""
    except LabelSelectorError as err:
        return LabelSelector.nothing(), str(err)


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


class WebhookSource:
    """The webhooks of every Mutating- or ValidatingWebhookConfiguration in ``store``'s cache."""

    def __init__(self, store: Store, resolver: ServiceResolver | None, *, mutating: bool) -> None:
        self.store = store
        self.resolver = resolver
        self.mutating = mutating
        self._revision = -1
        self._signature: tuple[tuple[str, str], ...] = ()
        self._hooks: list[Hook] = []
        self._clients: dict[tuple[str, bytes], WebhookClient] = {}

    def hooks(self) -> list[Hook]:
        cache = self.store.cache
        if not cache.ready or cache.revision == self._revision:
            return self._hooks
        self._revision = cache.revision
        items, _ = cache.list(self.store.scope_prefix(""))
        objs = sorted((c.obj for c in items), key=lambda o: str((o.get("metadata") or {}).get("name") or ""))
        signature = tuple((str(o["metadata"].get("name") or ""), str(o["metadata"].get("resourceVersion") or ""))
                          for o in objs)
        if signature != self._signature:
            self._signature = signature
            self._hooks = self._compile(objs)
        return self._hooks

    def _compile(self, configurations: list[dict[str, Any]]) -> list[Hook]:
        hooks: list[Hook] = []
        clients: dict[tuple[str, bytes], WebhookClient] = {}
        for config in configurations:
            config_name = str((config.get("metadata") or {}).get("name") or "")
            for index, webhook in enumerate(config.get("webhooks") or ()):
                if not isinstance(webhook, dict):
                    continue
                try:
                    hooks.append(self._hook(config_name, index, webhook, clients))
                except Exception:  # a configuration the validation let through must not break every write
                    log.exception("webhook %s of %s could not be loaded", webhook.get("name"), config_name)
        stale = [c for key, c in self._clients.items() if key not in clients]
        self._clients = clients
        for client in stale:
            asyncio.get_running_loop().create_task(client.close())
        return hooks

    def _hook(self, config_name: str, index: int, webhook: dict[str, Any],
              clients: dict[tuple[str, bytes], WebhookClient]) -> Hook:
        name = str(webhook.get("name") or "")
        client_config = webhook.get("clientConfig") if isinstance(webhook.get("clientConfig"), dict) else {}
        assert isinstance(client_config, dict)
        key = (f"{config_name}/{name}/{index}", orjson.dumps(client_config, option=orjson.OPT_SORT_KEYS))
        client = self._clients.get(key) or clients.get(key) or WebhookClient(client_config, self.resolver)
        clients[key] = client
        ns_selector, ns_err = _selector(webhook.get("namespaceSelector"))
        obj_selector, obj_err = _selector(webhook.get("objectSelector"))
        failure_policy = str(webhook.get("failurePolicy") or "Fail")
        conditions = webhook.get("matchConditions")
        return Hook(
            uid=key[0], configuration=config_name, name=name,
            rules=[r for r in webhook.get("rules") or () if isinstance(r, dict)],
            namespace_selector=ns_selector, object_selector=obj_selector, selector_error=ns_err or obj_err,
            match_conditions=MatchConditions(conditions, failure_policy) if conditions else None,
            match_policy=str(webhook.get("matchPolicy") or "Equivalent"),
            failure_policy=failure_policy,
            side_effects=str(webhook.get("sideEffects") or ""),
            timeout=_int(webhook.get("timeoutSeconds"), DEFAULT_TIMEOUT),
            review_version=review_version(webhook.get("admissionReviewVersions")),
            reinvoke=self.mutating and webhook.get("reinvocationPolicy") == "IfNeeded",
            client=client)

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients = {}
