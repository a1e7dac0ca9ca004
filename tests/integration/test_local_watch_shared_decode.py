"""Controllers' watches share the watch cache's decode of each change (issue 15, core-api's CPU per write).

core-api's controllers watch through ``LocalClient``; each of their watch events used to be a decode
of the event's bytes per watcher. Now every watcher of a change gets the object the watch cache
decoded when the change came in (``CacheEvent.obj``): two watches and an informer of one resource hold
the very same object, equal to the object as served; no decode runs for them (counted); and events a
watch replays from the cache's window (no dispatch) are still decoded, each as served. On real etcd
with the generic store.
"""

from __future__ import annotations

import asyncio
import types
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.controllers import local
from genericapi.controllers.informer import Informer
from genericapi.controllers.local import LocalClient
from genericapi.controllers.types import WatchEvent
from genericapi.registry.options import DeleteOptions
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.storage.etcd import EtcdClient

pytestmark = pytest.mark.integration

CM = ResourceInfo("", "v1", "ConfigMap", "configmaps", "configmap", True, ("cm",))


@pytest.fixture
async def store(etcd_server) -> AsyncIterator[Store]:  # type: ignore[no-untyped-def]
    client = EtcdClient([etcd_server.endpoint])
    s = Store(CM, Strategy(CM), client, f"/shared-decode-{uuid.uuid4().hex[:8]}/configmaps")
    await s.start()
    yield s
    await s.stop()
    await client.close()


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": dict(data)}


async def take(events: AsyncIterator[WatchEvent], n: int) -> list[WatchEvent]:
    out: list[WatchEvent] = []
    async with asyncio.timeout(10):
        async for event in events:
            if event.type != "BOOKMARK":
                out.append(event)
                if len(out) == n:
                    break
    return out


async def test_watchers_of_a_change_share_one_object(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    decodes = 0
    real = local.deepjson.loads

    def counting(data: bytes | str) -> Any:
        nonlocal decodes
        decodes += 1
        return real(data)

    def reset() -> None:
        nonlocal decodes
        decodes = 0

    # local.py's decoder only (the store's own decodes of what it writes are not counted)
    monkeypatch.setattr(local, "deepjson", types.SimpleNamespace(loads=counting))
    client = LocalClient(store)
    _items, rv, _c = await client.list("default")
    informer = Informer(client, namespace="default")
    await informer.start()
    try:
        await informer.wait_synced()
        await _share(store, client, rv, lambda: decodes, reset)
    finally:
        await informer.stop()


async def _share(store: Store, client: LocalClient, rv: str, decodes: Any, reset: Any) -> None:
    first, second = client.watch(rv, "default"), client.watch(rv, "default")
    await store.create("default", cm("s", k="0"))
    for watch in (first, second):  # once each has seen this one, both follow the changes as they come
        assert [e.type for e in await take(watch, 1)] == ["ADDED"]
    reset()

    created = await store.create("default", cm("a", k="1"))
    updated = await store.update("default", "a", {**created, "data": {"k": "2"}})
    await store.delete("default", "a", DeleteOptions())
    a, b = await take(first, 3), await take(second, 3)

    assert [e.type for e in a] == [e.type for e in b] == ["ADDED", "MODIFIED", "DELETED"]
    for x, y in zip(a, b, strict=True):
        assert x.object is y.object  # one object per change, whoever watches
    assert a[0].object == created and a[1].object == updated
    assert a[2].object["metadata"]["name"] == "a"
    assert decodes() == 0, "a watch event was decoded again for a watcher"


async def test_an_informer_caches_the_dispatched_object(store: Store) -> None:
    client = LocalClient(store)
    informer = Informer(client, namespace="default")
    seen: list[dict[str, Any]] = []
    informer.add_handler(lambda etype, obj, old: seen.append(obj))
    await informer.start()
    try:
        await _cached(store, client, informer, seen)
    finally:
        await informer.stop()


async def _cached(store: Store, client: LocalClient, informer: Informer, seen: list[dict[str, Any]]) -> None:
    await informer.wait_synced()
    _items, rv, _c = await client.list("default")
    watch = client.watch(rv, "default")
    await store.create("default", cm("s", k="0"))
    await take(watch, 1)  # following the changes as they come from here on
    created = await store.create("default", cm("b", k="1"))
    (event,) = await take(watch, 1)
    for _ in range(200):
        if informer.get("default", "b") is not None:
            break
        await asyncio.sleep(0.01)
    assert informer.get("default", "b") is event.object and seen[-1] is event.object
    assert event.object == created


async def test_replayed_events_are_decoded_as_served(store: Store) -> None:
    client = LocalClient(store)
    _items, rv, _c = await client.list("default")
    created = await store.create("default", cm("c", k="1"))
    updated = await store.update("default", "c", {**created, "data": {"k": "2"}})
    # Started after the changes, from the version before them: the cache's window replays them.
    a, b = await asyncio.gather(take(client.watch(rv, "default"), 2), take(client.watch(rv, "default"), 2))
    assert [e.object for e in a] == [e.object for e in b] == [created, updated]
    raw = orjson.dumps(updated)
    assert orjson.loads(raw) == a[1].object
