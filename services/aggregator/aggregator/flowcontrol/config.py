"""FlowSchemas and PriorityLevelConfigurations, watch-cached from the shared etcd for the dispatcher.

The gateway classifies every request, so its configuration must be in memory: one watch cache per
kind over core-api's keys (``<prefix>/flowschemas/<name>``, ``<prefix>/prioritylevelconfigurations/
<name>``), as kube's APF config controller reads them from informers. ``generation`` changes with
any change to either, so the dispatcher re-digests only when something changed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from genericapi.registry.codec import JsonCodec
from genericapi.storage.cacher import WatchCache
from genericapi.storage.etcd import EtcdClient

_KINDS = ("flowschemas", "prioritylevelconfigurations")


class FlowControlView:
    def __init__(self, client: EtcdClient, prefix: str = "/registry") -> None:
        base = prefix.rstrip("/")
        self._prefixes = {k: f"{base}/{k}/".encode() for k in _KINDS}
        codec = JsonCodec()
        self._caches = {k: WatchCache(client, p, codec, window=100) for k, p in self._prefixes.items()}

    @property
    def ready(self) -> bool:
        return all(c.ready for c in self._caches.values())

    @property
    def generation(self) -> tuple[int, int]:
        return self._caches["flowschemas"].revision, self._caches["prioritylevelconfigurations"].revision

    async def start(self) -> None:
        await asyncio.gather(*(c.start() for c in self._caches.values()))

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self._caches.values()), return_exceptions=True)

    def _list(self, kind: str) -> list[dict[str, Any]]:
        items, _rev = self._caches[kind].list(self._prefixes[kind])
        return [c.obj for c in items]

    def flow_schemas(self) -> list[dict[str, Any]]:
        return self._list("flowschemas")

    def priority_levels(self) -> list[dict[str, Any]]:
        return self._list("prioritylevelconfigurations")
