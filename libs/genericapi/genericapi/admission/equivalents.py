"""Which served versions are one resource, and how to move an object between them (matchPolicy Equivalent).

kube's ``EquivalentResourceRegistry`` calls two group/version/resources equivalent when one storage
serves both: apps/v1 and apps/v1beta1 deployments, core and events.k8s.io Events, autoscaling v1
and v2 HorizontalPodAutoscalers, every version of a CRD. Here the stores say it: stores on the same
etcd key prefix are one resource. An object moves between two of them as a write and a read
would move it: the first store's encoding to storage, then the second's decoding from it
(including a CRD's conversion webhook when it has one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from genericapi.registry.store import Store

from .rules import Resource


class StoreEquivalents:
    """Equivalents among the stores ``stores()`` returns (read again when that list changes)."""

    def __init__(self, stores: Callable[[], Sequence[Store]]) -> None:
        self._stores = stores
        self._seen: tuple[int, ...] = ()
        self._by_prefix: dict[str, list[Store]] = {}
        self._by_resource: dict[tuple[str, str, str], Store] = {}

    def _index(self) -> None:
        stores = self._stores()
        seen = tuple(id(s) for s in stores)
        if seen == self._seen:
            return
        self._seen = seen
        self._by_prefix = {}
        self._by_resource = {}
        for store in stores:
            self._by_prefix.setdefault(store.key_prefix, []).append(store)
            self._by_resource[(store.info.group, store.info.version, store.info.plural)] = store

    def equivalents(self, group: str, version: str, resource: str) -> list[tuple[Resource, str]]:
        self._index()
        store = self._by_resource.get((group, version, resource))
        if store is None:
            return []
        return [(Resource(s.info.group, s.info.version, s.info.plural), s.info.kind)
                for s in self._by_prefix.get(store.key_prefix, []) if s.info.plural == store.info.plural]

    async def convert(self, obj: dict[str, Any], group: str, version: str, kind: str) -> dict[str, Any]:
        self._index()
        api_version = f"{group}/{version}" if group else version
        source = self._by_api_version(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
        target = next((s for s in self._by_resource.values()
                       if (s.info.group, s.info.version, s.info.kind) == (group, version, kind)), None)
        if source is None or target is None or source is target:
            out = dict(obj)
            out["apiVersion"], out["kind"] = api_version, kind
            return out
        raw = await source.encode(obj)
        converted, _ = target.codec.decode(raw, 0)
        to_served = getattr(target, "to_served", None)
        if to_served is not None:  # a CRD served through its conversion webhook
            converted = (await to_served([converted]))[0]
        meta = converted.get("metadata")
        if isinstance(meta, dict):
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if rv:
                meta["resourceVersion"] = rv
            else:
                meta.pop("resourceVersion", None)
        return converted

    def _by_api_version(self, api_version: str, kind: str) -> Store | None:
        group, _, version = api_version.rpartition("/")
        return next((s for s in self._by_resource.values()
                     if (s.info.group, s.info.version, s.info.kind) == (group, version, kind)), None)
