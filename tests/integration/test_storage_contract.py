"""The storage contract on real etcd: keys, revisions, transactions, watch cache, pagination."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import orjson
import pytest
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry.options import DeleteOptions, ListOptions
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.storage import errors as serrors
from genericapi.storage.cacher import Bookmark, CacheEvent, WatchClosed
from genericapi.storage.etcd import EtcdClient, prefix_end

pytestmark = pytest.mark.integration

CM = ResourceInfo("", "v1", "ConfigMap", "configmaps", "configmap", True, ("cm",))


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": dict(data)}


@pytest.fixture
async def client(etcd_server) -> EtcdClient:  # type: ignore[no-untyped-def]
    c = EtcdClient([etcd_server.endpoint])
    yield c
    await c.close()


@pytest.fixture
async def store(client: EtcdClient):  # type: ignore[no-untyped-def]
    s = Store(CM, Strategy(CM), client, f"/test-{uuid.uuid4().hex[:8]}/configmaps")
    await s.start()
    yield s
    await s.stop()


async def test_create_sets_system_fields_and_revision(store: Store, client: EtcdClient) -> None:
    obj = await store.create("ns1", cm("a", k="v"))
    meta = obj["metadata"]
    assert meta["namespace"] == "ns1"
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    kv, _ = await client.get(store.key("ns1", "a"))
    assert kv is not None and str(kv.mod_revision) == meta["resourceVersion"]
    assert b"resourceVersion" not in kv.value  # the revision is etcd's, never stored in the value


async def test_create_twice_is_already_exists(store: Store) -> None:
    await store.create("ns1", cm("dup"))
    with pytest.raises(APIError) as err:
        await store.create("ns1", cm("dup"))
    assert err.value.code == 409 and err.value.reason == "AlreadyExists"
    assert err.value.message == 'configmaps "dup" already exists'


async def test_create_with_resource_version_is_rejected(store: Store) -> None:
    obj = cm("withrv")
    obj["metadata"]["resourceVersion"] = "5"
    with pytest.raises(APIError) as err:
        await store.create("ns1", obj)
    assert err.value.code == 500


async def test_update_conflict_on_stale_resource_version(store: Store) -> None:
    first = await store.create("ns1", cm("c", k="1"))
    stale = first["metadata"]["resourceVersion"]
    second = await store.update("ns1", "c", {**cm("c", k="2"), "metadata": {"name": "c", "resourceVersion": stale}})
    assert int(second["metadata"]["resourceVersion"]) > int(stale)
    with pytest.raises(APIError) as err:
        await store.update("ns1", "c", {**cm("c", k="3"), "metadata": {"name": "c", "resourceVersion": stale}})
    assert err.value.code == 409 and err.value.reason == "Conflict"
    assert "the object has been modified" in err.value.message
    assert (await store.get("ns1", "c"))["data"] == {"k": "2"}  # nothing lost, nothing overwritten


async def test_unconditional_update_and_noop(store: Store) -> None:
    created = await store.create("ns1", cm("u", k="1"))
    same = await store.update("ns1", "u", cm("u", k="1"))
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]  # no write
    changed = await store.update("ns1", "u", cm("u", k="2"))
    assert changed["metadata"]["uid"] == created["metadata"]["uid"]
    assert changed["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]


async def test_concurrent_guaranteed_updates_lose_nothing(store: Store) -> None:
    await store.create("ns1", cm("counter", n="0"))

    def bump(obj: dict[str, Any]) -> dict[str, Any]:
        obj["data"]["n"] = str(int(obj["data"]["n"]) + 1)
        return obj

    await asyncio.gather(*(store.guaranteed_update("ns1", "counter", bump) for _ in range(15)))
    assert (await store.get("ns1", "counter"))["data"]["n"] == "15"


async def test_delete_preconditions_and_not_found(store: Store) -> None:
    obj = await store.create("ns1", cm("d"))
    with pytest.raises(APIError) as err:
        await store.delete("ns1", "d", DeleteOptions(precondition_uid="wrong"))
    assert err.value.code == 409 and "Precondition failed: UID in precondition: wrong" in err.value.message
    with pytest.raises(APIError) as err:
        await store.delete("ns1", "d", DeleteOptions(precondition_rv="1"))
    assert err.value.code == 409
    _, gone = await store.delete("ns1", "d", DeleteOptions(precondition_uid=obj["metadata"]["uid"]))
    assert gone
    with pytest.raises(APIError) as err:
        await store.get("ns1", "d")
    assert err.value.code == 404 and err.value.message == 'configmaps "d" not found'


async def test_finalizers_hold_deletion_until_removed(store: Store) -> None:
    obj = cm("f")
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    await store.create("ns1", obj)
    held, gone = await store.delete("ns1", "f", DeleteOptions())
    assert not gone and held["metadata"]["deletionTimestamp"]
    assert (await store.get("ns1", "f"))["metadata"]["deletionTimestamp"]

    def release(o: dict[str, Any]) -> dict[str, Any]:
        o["metadata"]["finalizers"] = []
        return o

    await store.guaranteed_update("ns1", "f", release)
    with pytest.raises(APIError) as err:
        await store.get("ns1", "f")
    assert err.value.code == 404


async def test_paginated_list_is_a_consistent_snapshot(store: Store) -> None:
    for i in range(7):
        await store.create("pg", cm(f"p{i}"))
    page1 = await store.list("pg", ListOptions(limit=3))
    assert [o["metadata"]["name"] for o, _ in page1.items] == ["p0", "p1", "p2"]
    assert page1.continue_token and page1.remaining == 4
    await store.create("pg", cm("p3a"))  # written after the snapshot: not in later pages
    page2 = await store.list("pg", ListOptions(limit=3, continue_token=page1.continue_token))
    page3 = await store.list("pg", ListOptions(limit=3, continue_token=page2.continue_token))
    names = [o["metadata"]["name"] for o, _ in page1.items + page2.items + page3.items]
    assert names == [f"p{i}" for i in range(7)]
    assert not page3.continue_token and page2.revision == page1.revision


async def test_bad_continue_token_is_bad_request(store: Store) -> None:
    with pytest.raises(APIError) as err:
        await store.list("pg", ListOptions(limit=1, continue_token="not-a-token"))
    assert err.value.code == 400


async def test_compacted_continue_token_is_expired(store: Store, client: EtcdClient) -> None:
    for i in range(3):
        await store.create("cp", cm(f"c{i}"))
    page = await store.list("cp", ListOptions(limit=1))
    for i in range(3):
        await store.update("cp", "c0", cm("c0", n=str(i)))
    await client.compact(await client.current_revision())
    with pytest.raises(APIError) as err:
        await store.list("cp", ListOptions(limit=1, continue_token=page.continue_token))
    assert err.value.code == 410 and err.value.reason == "Expired"


async def test_watch_replays_from_revision_and_filters(store: Store) -> None:
    a = await store.create("w", cm("a"))
    start = a["metadata"]["resourceVersion"]
    await store.update("w", "a", cm("a", x="1"))
    await store.create("other", cm("b"))
    watcher = await store.watch("w", ListOptions(resource_version=start))
    item = await watcher.next_item(5)
    assert isinstance(item, CacheEvent) and item.type == "MODIFIED" and item.obj["data"] == {"x": "1"}
    await store.delete("w", "a", DeleteOptions())
    item = await watcher.next_item(5)
    assert isinstance(item, CacheEvent) and item.type == "DELETED"
    assert await watcher.next_item(0.2) is None  # the other namespace's object never shows
    watcher.close()


async def test_watch_from_zero_sends_state_then_changes(store: Store) -> None:
    await store.create("z", cm("one"))
    watcher = await store.watch("z", ListOptions(resource_version="0"))
    first = await watcher.next_item(5)
    assert isinstance(first, CacheEvent) and first.type == "ADDED" and first.obj["metadata"]["name"] == "one"
    await store.create("z", cm("two"))
    second = await watcher.next_item(5)
    assert isinstance(second, CacheEvent) and second.obj["metadata"]["name"] == "two"
    watcher.close()


async def test_watch_send_initial_events_ends_with_bookmark(store: Store) -> None:
    await store.create("ie", cm("one"))
    watcher = await store.watch("ie", ListOptions(send_initial_events=True, allow_bookmarks=True,
                                                  resource_version_match="NotOlderThan"))
    first = await watcher.next_item(5)
    mark = await watcher.next_item(5)
    assert isinstance(first, CacheEvent)
    assert isinstance(mark, Bookmark) and mark.initial_events_end
    watcher.close()


async def test_watch_too_old_revision_is_expired(store: Store, client: EtcdClient) -> None:
    await store.create("old", cm("x"))
    with pytest.raises(APIError) as err:
        await store.watch("old", ListOptions(resource_version="1"))
    assert err.value.code == 410 and "too old resource version" in err.value.message


async def test_compaction_ends_cache_watchers_with_expired(client: EtcdClient) -> None:
    s = Store(CM, Strategy(CM), client, f"/compact-{uuid.uuid4().hex[:8]}/configmaps")
    await s.start()
    try:
        await s.create("n", cm("a"))
        watcher = await s.watch("n", ListOptions(resource_version="0"))
        assert isinstance(await watcher.next_item(5), CacheEvent)
        # Simulate the cache falling behind a compaction: restart its etcd watch too far back.
        s.cache.revision = 1
        s.cache._window_start = 1
        await client.compact(await client.current_revision())
        s.cache._task.cancel()  # type: ignore[union-attr]
        s.cache._task = None
        await s.create("n", cm("b"))
        await s.cache.start()
        closed = await watcher.next_item(5)
        assert isinstance(closed, WatchClosed) and isinstance(closed.error, serrors.TooOldRevisionError)
        # The cache relisted: it serves the current state again.
        await asyncio.sleep(0.2)
        names = [o["metadata"]["name"] for o, _ in (await s.list("n", ListOptions(resource_version="0"))).items]
        assert names == ["a", "b"]
    finally:
        await s.stop()


async def test_list_from_cache_and_consistent(store: Store) -> None:
    await store.create("lc", cm("a"))
    res = await store.list("lc", ListOptions())
    assert [o["metadata"]["name"] for o, _ in res.items] == ["a"]
    res0 = await store.list("lc", ListOptions(resource_version="0"))
    assert res0.revision >= 1


async def test_etcd_unreachable_is_storage_unavailable() -> None:
    c = EtcdClient(["http://127.0.0.1:1"], timeout=1)
    with pytest.raises(serrors.UnavailableError):
        await c.current_revision()
    await c.close()


async def test_consistent_list_is_fresh_when_other_resources_move_the_revision(
        store: Store, client: EtcdClient) -> None:
    await store.create("fresh", cm("a"))
    for i in range(3):  # writes elsewhere: etcd's revision moves, this resource's does not
        await client.put(f"/elsewhere/{i}".encode(), b"x")
    res = await store.list("fresh", ListOptions())
    assert [o["metadata"]["name"] for o, _ in res.items] == ["a"]
    assert res.revision == await client.current_revision()
    await client.delete_prefix(b"/elsewhere/")


async def test_consistent_list_sees_a_delete_made_directly_in_etcd(store: Store, client: EtcdClient) -> None:
    await store.create("gone", cm("a"))
    await store.create("gone", cm("b"))
    kv, _ = await client.get(store.key("gone", "b"))
    assert kv is not None
    await client.delete(store.key("gone", "b"), kv.mod_revision)
    res = await store.list("gone", ListOptions())
    assert [o["metadata"]["name"] for o, _ in res.items] == ["a"]


async def test_range_reads_past_grpcs_default_4_mib_message(store: Store, client: EtcdClient) -> None:
    """etcd answers a range in one message; clientv3 (kube's) takes up to math.MaxInt32 bytes. A
    watch-cache page of 1,000 objects of 6 KB, or a LIST at an exact resourceVersion, is one range."""
    def stored(i: int) -> bytes:
        obj = cm(f"cm-{i:04d}", v="x" * 6_000)
        obj["metadata"]["namespace"] = "big"
        return orjson.dumps(obj)

    await asyncio.gather(*(client.put(store.key("big", f"cm-{i:04d}"), stored(i)) for i in range(800)))
    kvs, _rev, more = await client.range(store.scope_prefix("big"), prefix_end(store.scope_prefix("big")))
    assert (len(kvs), more) == (800, False)
    assert sum(len(kv.value) for kv in kvs) > 4 * 1024 * 1024
    await store.stop()  # a fresh cache lists the prefix again: one page of up to 1,000 objects
    await store.start()
    listed = await store.list("big", ListOptions(resource_version="0"))
    assert len(listed.items) == 800
    exact = await store.list("big", ListOptions(resource_version=str(_rev), resource_version_match="Exact"))
    assert [o["metadata"]["name"] for o, _raw in exact.items] == [f"cm-{i:04d}" for i in range(800)]
