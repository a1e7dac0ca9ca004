"""The store of one served version of a CRD whose objects go through a conversion webhook.

Storage (etcd and the watch cache) holds objects at the version they were written in (the storage
version at the time); this store converts at its edges, as kube's conversion codec does: objects
written are converted to the storage version, objects read (get, list, watch events) to the
served version, through ``CRConverter`` (which calls nobody for objects already at the version).
Selectors on list/watch are evaluated on the stored form (labels and metadata fields are the same
in every version). A watch event that fails to convert ends the watch (the client re-watches).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from genericapi.apimachinery.errors import APIError
from genericapi.registry.options import ListOptions, ListResult
from genericapi.registry.store import Store
from genericapi.storage.cacher import CacheEvent, CacheWatcher, WatchClosed, WatchItem
from genericapi.storage.etcd import KeyValue

from .conversion import CRConverter

log = logging.getLogger(__name__)

Convert = Callable[[list[dict[str, Any]]], Awaitable[list[dict[str, Any]]]]


class ConvertingStore(Store):
    def __init__(self, *args: Any, converter: CRConverter, storage_version: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.converter = converter
        self.storage_version = storage_version

    async def to_served(self, objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return await self.converter.convert(objs, self.info.version)

    async def encode(self, obj: dict[str, Any]) -> bytes:
        stored = (await self.converter.convert([obj], self.storage_version))[0]
        return self.codec.encode(stored)

    async def _read(self, namespace: str, name: str) -> tuple[dict[str, Any], KeyValue]:
        obj, kv = await super()._read(namespace, name)
        return (await self.to_served([obj]))[0], kv

    async def get(self, namespace: str, name: str, resource_version: str = "") -> dict[str, Any]:
        obj = await super().get(namespace, name, resource_version)
        return (await self.to_served([obj]))[0]  # a no-op for what _read already converted

    async def list(self, namespace: str, opts: ListOptions) -> ListResult:
        result = await super().list(namespace, opts)
        if result.items:
            converted = await self.to_served([obj for obj, _raw in result.items])
            result.items = [(obj, orjson.dumps(obj)) for obj in converted]
        return result

    async def watch(self, namespace: str, opts: ListOptions) -> CacheWatcher:
        return ConvertingWatcher(await super().watch(namespace, opts), self.to_served)


class ConvertingWatcher(CacheWatcher):
    """A client watch whose events are converted one at a time as the client reads them."""

    def __init__(self, inner: CacheWatcher, convert: Convert) -> None:
        super().__init__(inner.cache, inner.predicate)
        self._inner = inner
        self._convert = convert

    async def next_item(self, wait: float | None) -> WatchItem | None:
        item = await self._inner.next_item(wait)
        if not isinstance(item, CacheEvent):
            return item
        try:
            obj = (await self._convert([item.obj]))[0]
        except APIError as err:
            log.warning("ending a watch: converting %s failed: %s", item.key.decode(), err.message)
            self._inner.close()
            return WatchClosed(None)
        return CacheEvent(item.type, item.key, obj, orjson.dumps(obj), item.prev, item.revision)

    def ready_item(self) -> WatchItem | None:
        return None  # every event needs an await to convert: the handler asks with next_item

    def bookmark(self) -> Any:
        return self._inner.bookmark()

    def close(self) -> None:
        self.closed = True
        self._inner.close()
