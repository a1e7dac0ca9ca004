"""The store of one served version of a CRD whose objects go through a conversion webhook.

Storage (etcd and the watch cache) holds objects at the version they were written in (the storage
version at the time); this store converts at its edges, as kube's conversion codec does: objects
written are converted to the storage version, objects read (get, list, watch events) to the
served version, through ``CRConverter`` (which calls nobody for objects already at the version),
then defaulted with the served version's schema (kube defaults what it reads).

Label and field selectors on list/watch are evaluated on the converted object, as kube's watch
cache (which holds objects decoded at the served version) does: a webhook may change labels, and
``selectableFields`` are paths of the served version's schema. ``metadata.name``/``namespace``
never change in conversion. A watch event that fails to convert ends the watch with an ERROR
event (an InternalError Status, as kube's etcd watcher sends for an object it cannot decode).
Watch events are converted once per event for every watcher of the version, and encoded once
(``cr_watch_conversions``); an object leaving a watcher's selection is sent DELETED with its
previous content at the change's resourceVersion, as kube's cacheWatcher does.

Reads (``_served``) convert the same way: a GET, and the object an update, patch or delete
starts from, which is the watch cache's copy converted (one etcd round trip per write, as for
every other resource; a copy that fails to convert is replaced by etcd's, converted).

Not done: objects stored at an older storage version do not get that version's defaults before
conversion (the None strategy's codec applies them; this store has only the served schema).
"""

from __future__ import annotations

import copy
import logging
from dataclasses import replace
from typing import Any

from genericapi.apimachinery import deepjson
from genericapi.apimachinery.errors import APIError
from genericapi.registry.fieldtracking import FieldTracker
from genericapi.registry.options import ListOptions, ListResult
from genericapi.registry.store import Store, _encode_continue
from genericapi.storage.cacher import CacheEvent, CacheWatcher, Predicate, WatchClosed, WatchItem
from genericapi.storage.errors import StorageError

from .conversion import CRConverter
from .cr_watch_conversions import Convert, EventConversions

log = logging.getLogger(__name__)

_PAGE = 100  # objects read per round when a selector filters a limited list


class ConvertingStore(Store):
    def __init__(self, *args: Any, converter: CRConverter, storage_version: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Conversion here is a webhook call: managedFields of other versions are not converted.
        self.fields = FieldTracker(self.strategy)
        self.converter = converter
        self.storage_version = storage_version
        schema = getattr(self.strategy, "schema", None)
        has_defaults = schema is not None and b'"default"' in deepjson.dumps(getattr(schema, "schema", None))
        self._read_defaults = schema if has_defaults else None
        #: Watch events converted once for every watcher of this version.
        self.conversions = EventConversions(self.to_served, self.info.version)

    async def to_served(self, objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        converted = await self.converter.convert(objs, self.info.version)
        defaults = self._read_defaults
        if defaults is None:
            return converted
        out = []
        for before, obj in zip(objs, converted, strict=True):
            if obj is before:
                obj = copy.deepcopy(obj)  # not converted: the cache's own object, never mutated
            defaults.default(obj)
            out.append(obj)
        return out

    async def encode(self, obj: dict[str, Any]) -> bytes:
        stored = (await self.converter.convert([obj], self.storage_version))[0]
        return self.codec.encode(stored)

    async def _served(self, stored: dict[str, Any]) -> dict[str, Any]:
        """What the store reads (get, and where an update, patch or delete starts: etcd's copy or
        the watch cache's, one round trip) at the served version, as ``to_served`` converts it."""
        return (await self.to_served([stored]))[0]

    async def list(self, namespace: str, opts: ListOptions) -> ListResult:
        pred = opts.predicate
        if pred is None:
            result = await super().list(namespace, opts)
            if result.items:
                converted = await self.to_served([obj for obj, _raw in result.items])
                result.items = [(obj, deepjson.dumps(obj)) for obj in converted]
            return result
        return await self._list_selected(namespace, opts, pred)

    async def _list_selected(self, namespace: str, opts: ListOptions, pred: Predicate) -> ListResult:
        """Read unfiltered pages, convert, then select; a limit counts selected objects."""
        # as the base store: a list served from the cache (resourceVersion=0) ignores the limit
        limit = 0 if opts.resource_version == "0" and not opts.continue_token else opts.limit
        inner = replace(opts, predicate=None, limit=max(limit, _PAGE) if limit else 0)
        out: list[dict[str, Any]] = []
        while True:
            page = await super().list(namespace, inner)
            converted = await self.to_served([obj for obj, _raw in page.items]) if page.items else []
            for i, obj in enumerate(converted):
                if not pred(obj):
                    continue
                out.append(obj)
                if limit and len(out) >= limit:
                    result = ListResult([(o, deepjson.dumps(o)) for o in out], page.revision)
                    if i < len(converted) - 1 or page.continue_token:
                        meta = obj.get("metadata") or {}
                        key = self.key(str(meta.get("namespace") or ""), str(meta.get("name") or "")).decode()
                        result.continue_token = _encode_continue(page.revision, key[len(self.key_prefix) + 1:])
                    return result
            if not page.continue_token:
                return ListResult([(o, deepjson.dumps(o)) for o in out], page.revision)
            inner = replace(inner, continue_token=page.continue_token, resource_version="",
                            resource_version_match="")

    async def watch(self, namespace: str, opts: ListOptions) -> CacheWatcher:
        inner = await super().watch(namespace, replace(opts, predicate=None))
        return ConvertingWatcher(inner, self.to_served, opts.predicate, self.conversions)

    async def stop(self) -> None:
        self.conversions.stop()
        await super().stop()


class ConvertingWatcher(CacheWatcher):
    """A client watch whose events are converted (then selected) as the client reads them.

    Conversions go through the store's ``EventConversions``: every watcher of this version waiting
    for the same event shares one conversion (one webhook call) and its encodings.
    """

    def __init__(self, inner: CacheWatcher, convert: Convert, select: Predicate | None = None,
                 conversions: EventConversions | None = None) -> None:
        super().__init__(inner.cache, inner.predicate)
        self._inner = inner
        self._select = select
        self._conversions = conversions if conversions is not None else EventConversions(convert, "", size=16)

    async def next_item(self, wait: float | None) -> WatchItem | None:
        while True:
            item = await self._inner.next_item(wait)
            if not isinstance(item, CacheEvent):
                return item
            try:
                event = await self._converted(item)
            except APIError as err:
                log.warning("ending a watch: converting %s failed: %s", item.key.decode(), err.message)
                self._inner.close()
                self.closed = True
                return WatchClosed(StorageError(err.message))
            if event is not None:
                return event

    async def _converted(self, item: CacheEvent) -> CacheEvent | None:
        """The event at the served version, as the selector sees it (None when it does not concern this watch)."""
        conv = await self._conversions.event(item, with_prev=self._select is not None)
        obj, raw, encoded = conv.obj, conv.raw, conv.encoded
        if self._select is None:
            return CacheEvent(item.type, item.key, obj, raw, item.prev, item.revision, encoded)
        prev = conv.prev
        cur = item.type != "DELETED" and self._select(obj)
        old = prev is not None and self._select(prev)
        # For one (key, revision) each type is one object, so the encodings (keyed by type) are shared.
        if item.type == "DELETED":
            if not old and not self._select(obj):
                return None
            return CacheEvent("DELETED", item.key, obj, raw, prev, item.revision, encoded)
        if cur and not old:
            return CacheEvent("ADDED", item.key, obj, raw, None, item.revision, encoded)
        if old and not cur:
            # The object left the selection: DELETED with the previous object's content at this
            # event's resourceVersion, as kube's cacheWatcher sends it.
            left, left_raw = conv.left_selection(item.revision)
            return CacheEvent("DELETED", item.key, left, left_raw, prev, item.revision, encoded)
        if not cur:
            return None
        return CacheEvent(item.type, item.key, obj, raw, prev, item.revision, encoded)

    def ready_item(self) -> WatchItem | None:
        return None  # every event needs an await to convert: the handler asks with next_item

    def bookmark(self) -> Any:
        return self._inner.bookmark()

    def close(self) -> None:
        self.closed = True
        self._inner.close()
