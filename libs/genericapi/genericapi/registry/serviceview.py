"""A read-only, watch-cached view of the cluster's Services and their endpoints, from the shared etcd.

Every link of the chain shares one etcd, and core-api keys built-in resources by plural
(``<prefix>/services/<ns>/<name>``, ``<prefix>/endpointslices/...``, ``<prefix>/endpoints/...``).
A process that must resolve service references (extensions-api for conversion webhooks, the
aggregator for service-backed APIServices) follows those three prefixes with one watch cache
each instead of asking core-api over HTTP: lookups are in-memory and never block. The view
implements ``genericapi.apimachinery.serviceresolver.ServiceLookup``; ``subscribe`` tells a
level-triggered controller which Service changed (the Service itself or one of its endpoints).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from genericapi.apimachinery.serviceresolver import SERVICE_NAME_LABEL
from genericapi.storage.cacher import CacheEvent, WatchCache, WatchClosed
from genericapi.storage.errors import StorageError
from genericapi.storage.etcd import EtcdClient

from .codec import JsonCodec

log = logging.getLogger(__name__)

#: (resource plural, namespace, service name) -> None; runs on the view's task, must not block.
ChangeHandler = Callable[[str, str, str], None]

_RESOURCES = ("services", "endpointslices", "endpoints")


class ClusterServiceView:
    """Services, EndpointSlices and Endpoints of every namespace, kept current from etcd."""

    def __init__(self, client: EtcdClient, prefix: str = "/registry", window: int = 1000) -> None:
        base = prefix.rstrip("/")
        self._prefixes = {r: f"{base}/{r}/" for r in _RESOURCES}
        codec = JsonCodec()
        self._caches = {r: WatchCache(client, p.encode(), codec, window=window) for r, p in self._prefixes.items()}
        self._handlers: list[ChangeHandler] = []
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def ready(self) -> bool:
        return all(c.ready for c in self._caches.values())

    async def start(self) -> None:
        """List and start following the three prefixes (returns once all are listed)."""
        await asyncio.gather(*(c.start() for c in self._caches.values()))
        if not self._tasks:
            for resource, cache in self._caches.items():
                self._tasks.append(asyncio.create_task(self._follow(resource, cache),
                                                       name=f"serviceview:{resource}"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        await asyncio.gather(*(c.stop() for c in self._caches.values()))

    def subscribe(self, handler: ChangeHandler) -> None:
        """Call ``handler(resource, namespace, service_name)`` on every later change."""
        self._handlers.append(handler)

    # -- ServiceLookup ----------------------------------------------------------------------
    def _get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        cached = self._caches[resource].get(f"{self._prefixes[resource]}{namespace}/{name}".encode())
        return cached.obj if cached is not None else None

    def service(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get("services", namespace, name)

    def endpoints(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get("endpoints", namespace, name)

    def endpoint_slices(self, namespace: str, service_name: str) -> list[dict[str, Any]]:
        scope = f"{self._prefixes['endpointslices']}{namespace}/".encode()
        items, _rev = self._caches["endpointslices"].list(scope, lambda o: _service_of("endpointslices", o)
                                                          == service_name)
        return [c.obj for c in items]

    # -- change notifications -----------------------------------------------------------
    async def _follow(self, resource: str, cache: WatchCache) -> None:
        revision = cache.revision
        while True:
            try:
                watcher = await cache.watch(revision, None)
            except StorageError as err:  # too old (compacted) or not yet there: start from now
                log.info("service view %s: %s; resuming from the cache's state", resource, err)
                revision = cache.revision
                for handler in self._handlers:
                    _call(handler, resource, "", "")
                await asyncio.sleep(0.05)
                continue
            try:
                while True:
                    item = await watcher.next_item(None)
                    if isinstance(item, WatchClosed):
                        break
                    if isinstance(item, CacheEvent):
                        revision = item.revision
                        self._notify(resource, item)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("service view %s: change handler failed", resource)
            finally:
                watcher.close()
            # The cache ended this watch (relisted after compaction): resume from its state.
            revision = cache.revision
            for handler in self._handlers:
                _call(handler, resource, "", "")

    def _notify(self, resource: str, event: CacheEvent) -> None:
        namespace = str((event.obj.get("metadata") or {}).get("namespace") or "")
        names = {_service_of(resource, event.obj)}
        if event.prev is not None:
            names.add(_service_of(resource, event.prev))
        for name in names:
            if name:
                for handler in self._handlers:
                    _call(handler, resource, namespace, name)


def _service_of(resource: str, obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    if resource == "endpointslices":
        return str((meta.get("labels") or {}).get(SERVICE_NAME_LABEL) or "")
    return str(meta.get("name") or "")


def _call(handler: ChangeHandler, resource: str, namespace: str, name: str) -> None:
    try:
        handler(resource, namespace, name)
    except Exception:
        log.exception("service view handler failed for %s %s/%s", resource, namespace, name)
