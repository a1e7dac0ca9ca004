"""Updates, patches and deletes start from the watch cache's copy: one etcd round trip (issue 15).

kube 1.33's Cacher hands etcd3's GuaranteedUpdate and Delete the cached object; a result computed on
a copy that may be stale is decided again on the current state (``origStateIsCurrent``), and a failed
Txn's else branch is the state the retry starts from. On real etcd with the generic store:

- a PUT, a patch-like update and a delete are one etcd call each (``etcd_requests_total``) once the
  cache holds the object; a no-op update is one read and no write; a paged LIST is one call;
- with a stale cache (its etcd watch stopped, the key rewritten behind its back) a PUT at the old
  resourceVersion is kube's 409, at the current one it succeeds, an unpinned update builds on the
  current state, a delete's uid precondition is decided on the current object, a no-op update of
  the stale copy still writes, and a key deleted behind the cache's back is a 404;
- concurrent writers lose nothing (each GET-then-PUT writer retrying on 409, and unpinned updates);
- a PUT's resourceVersion as kube's Store.Update reads it: one that does not parse is Go's ParseUint
  error (500), "0" is unconditional for a kind that allows it, versions compare as numbers.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import pytest
from genericapi.apimachinery.errors import OPTIMISTIC_LOCK_MESSAGE, APIError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry.options import DeleteOptions, ListOptions
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.storage.etcd import EtcdClient
from prometheus_client import REGISTRY

pytestmark = pytest.mark.integration

CM = ResourceInfo("", "v1", "ConfigMap", "configmaps", "configmap", True, ("cm",))
CONFLICT = f'Operation cannot be fulfilled on configmaps "{{}}": {OPTIMISTIC_LOCK_MESSAGE}'


def cm(name: str, rv: str = "", **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if rv:
        meta["resourceVersion"] = rv
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}


@pytest.fixture
async def client(etcd_server) -> AsyncIterator[EtcdClient]:  # type: ignore[no-untyped-def]
    c = EtcdClient([etcd_server.endpoint])
    yield c
    await c.close()


@pytest.fixture
async def store(client: EtcdClient) -> AsyncIterator[Store]:
    tag = uuid.uuid4().hex[:8]
    s = Store(CM, Strategy(CM), client, f"/cached-{tag}/configmaps")
    # A resource label of its own: the calls counted are this store's only.
    client.instruments.name_resource(f"/cached-{tag}/configmaps/".encode(), f"cm-{tag}")
    await s.start()
    yield s
    await s.stop()


def calls(store: Store) -> dict[str, int]:
    """This store's etcd calls so far, by kube's operation label."""
    resource = store.client.instruments.resource_of(store.key_prefix.encode() + b"/x")
    out = {}
    for op in ("get", "list", "listWithCount", "create", "update", "delete"):
        value = REGISTRY.get_sample_value("etcd_requests_total", {"operation": op, "type": resource})
        out[op] = int(value or 0)
    return out


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


async def cached_at(store: Store, ns: str, name: str, rv: str) -> None:
    """Wait until the watch cache holds ``name`` at ``rv``."""
    key = store.key(ns, name)
    for _ in range(500):
        entry = store.cache.get(key)
        if entry is not None and str(entry.revision) == rv:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the watch cache never saw {name} at {rv}")


async def cache_gone(store: Store, ns: str, name: str) -> None:
    for _ in range(500):
        if store.cache.get(store.key(ns, name)) is None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the watch cache still holds {name}")


async def pause_cache(store: Store) -> Callable[[], None]:
    """Stop the cache following etcd (it stays ready, holding what it has: a stale cache); the
    returned function resumes it."""
    view = store.cache._view
    assert view is not None and store.cache.ready
    source = view.source
    await source.stop()
    return source.ensure_running


async def write_behind(store: Store, ns: str, name: str, change: Callable[[dict[str, Any]], None]) -> str:
    """Rewrite the key straight in etcd, as another API server would: the new resourceVersion."""
    kv, _ = await store.client.get(store.key(ns, name))
    assert kv is not None
    obj = orjson.loads(kv.value)
    change(obj)
    return str(await store.client.update(kv.key, orjson.dumps(obj), kv.mod_revision))


async def test_one_etcd_call_per_update_patch_and_delete(store: Store) -> None:
    created = await store.create("ns", cm("a", k="1"))
    rv = created["metadata"]["resourceVersion"]
    await cached_at(store, "ns", "a", rv)

    before = calls(store)
    updated = await store.update("ns", "a", cm("a", rv, k="2"))
    assert delta(before, calls(store)) == {"update": 1}
    assert updated["data"] == {"k": "2"} and int(updated["metadata"]["resourceVersion"]) > int(rv)
    await cached_at(store, "ns", "a", updated["metadata"]["resourceVersion"])

    def patch(obj: dict[str, Any]) -> dict[str, Any]:
        obj["data"]["p"] = "x"
        return obj

    before = calls(store)
    patched = await store.guaranteed_update("ns", "a", patch)
    assert delta(before, calls(store)) == {"update": 1}
    assert patched["data"] == {"k": "2", "p": "x"}
    await cached_at(store, "ns", "a", patched["metadata"]["resourceVersion"])

    # Nothing changes: one read to be sure the cached copy is the stored one, no write.
    before = calls(store)
    same = await store.guaranteed_update("ns", "a", lambda obj: obj)
    assert delta(before, calls(store)) == {"get": 1}
    assert same["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]

    before = calls(store)
    deleted, gone = await store.delete("ns", "a", DeleteOptions(precondition_uid=created["metadata"]["uid"]))
    assert delta(before, calls(store)) == {"delete": 1}
    assert gone and deleted["data"] == {"k": "2", "p": "x"}
    with pytest.raises(APIError) as err:
        await store.get("ns", "a")
    assert err.value.code == 404


async def test_paged_list_is_one_call_with_remaining_count(store: Store) -> None:
    for i in range(7):
        await store.create("ns", cm(f"l{i}"))
    before = calls(store)
    page = await store.list("ns", ListOptions(limit=3))
    assert delta(before, calls(store)) == {"list": 1}
    assert [obj["metadata"]["name"] for obj, _raw in page.items] == ["l0", "l1", "l2"]
    assert page.remaining == 4 and page.continue_token
    nxt = await store.list("ns", ListOptions(limit=3, continue_token=page.continue_token))
    assert [obj["metadata"]["name"] for obj, _raw in nxt.items] == ["l3", "l4", "l5"]
    assert nxt.remaining == 1
    last = await store.list("ns", ListOptions(limit=3, continue_token=nxt.continue_token))
    assert [obj["metadata"]["name"] for obj, _raw in last.items] == ["l6"]
    assert not last.continue_token and not last.remaining


async def test_stale_cache_put_decides_on_the_current_state(store: Store) -> None:
    created = await store.create("ns", cm("s", k="1"))
    old_rv = created["metadata"]["resourceVersion"]
    await cached_at(store, "ns", "s", old_rv)
    resume = await pause_cache(store)
    try:
        new_rv = await write_behind(store, "ns", "s", lambda o: o["data"].update(k="behind"))
        assert str(store.cache.get(store.key("ns", "s")).revision) == old_rv  # type: ignore[union-attr]

        # The client's version is the stale cache's: a real conflict, kube's 409, nothing written.
        with pytest.raises(APIError) as err:
            await store.update("ns", "s", cm("s", old_rv, k="mine"))
        assert (err.value.code, err.value.reason, err.value.message) == (409, "Conflict", CONFLICT.format("s"))
        assert (await store.get("ns", "s"))["data"] == {"k": "behind"}

        # The client's version is the current one, the cache's is older: no false 409.
        before = calls(store)
        updated = await store.update("ns", "s", cm("s", new_rv, k="current"))
        assert updated["data"] == {"k": "current"}
        assert delta(before, calls(store)) == {"get": 1, "update": 1}  # the recheck read, then the Txn

        # No resourceVersion: built on the current state (the Txn against the stale revision fails
        # and the retry starts from what it read).
        def bump(obj: dict[str, Any]) -> dict[str, Any]:
            obj["data"]["n"] = str(int(obj["data"].get("n", "0")) + 1)
            return obj

        bumped = await store.guaranteed_update("ns", "s", bump)
        assert bumped["data"] == {"k": "current", "n": "1"}
        assert (await store.get("ns", "s"))["data"] == {"k": "current", "n": "1"}

        # A PUT whose body equals the stale cached copy is no "nothing changed": it is written.
        stale_copy = store.cache.get(store.key("ns", "s")).decode()  # type: ignore[union-attr]
        assert stale_copy["data"] == {"k": "1"}
        stale_copy["metadata"].pop("resourceVersion")
        written = await store.update("ns", "s", stale_copy)
        assert written["data"] == {"k": "1"}
        assert int(written["metadata"]["resourceVersion"]) > int(bumped["metadata"]["resourceVersion"])
    finally:
        resume()


async def test_stale_cache_delete_preconditions_decide_on_the_current_object(store: Store) -> None:
    created = await store.create("ns", cm("d", k="1"))
    await cached_at(store, "ns", "d", created["metadata"]["resourceVersion"])
    resume = await pause_cache(store)
    try:
        # Deleted and created again behind the cache's back: a new uid the cache has not seen.
        await store.client.delete(store.key("ns", "d"), int(created["metadata"]["resourceVersion"]))
        again = await store.create("ns", cm("d", k="2"))
        old_uid, new_uid = created["metadata"]["uid"], again["metadata"]["uid"]
        assert store.cache.get(store.key("ns", "d")) is not None  # still the old object there

        with pytest.raises(APIError) as err:
            await store.delete("ns", "d", DeleteOptions(precondition_uid=old_uid))
        assert err.value.code == 409 and err.value.reason == "Conflict"
        assert err.value.message == (f'Operation cannot be fulfilled on configmaps "d": Precondition failed: '
                                     f"UID in precondition: {old_uid}, UID in object meta: {new_uid}")
        with pytest.raises(APIError) as err:
            await store.delete("ns", "d", DeleteOptions(precondition_rv=created["metadata"]["resourceVersion"]))
        assert err.value.code == 409 and "ResourceVersion in precondition" in err.value.message

        deleted, gone = await store.delete("ns", "d", DeleteOptions(precondition_uid=new_uid))
        assert gone and deleted["data"] == {"k": "2"}

        # Gone from etcd, still in the stale cache: an update and a delete are 404s.
        with pytest.raises(APIError) as err:
            await store.update("ns", "d", cm("d", k="3"))
        assert err.value.code == 404 and err.value.message == 'configmaps "d" not found'
        with pytest.raises(APIError) as err:
            await store.delete("ns", "d", DeleteOptions())
        assert err.value.code == 404 and err.value.message == 'configmaps "d" not found'
    finally:
        resume()


async def test_object_missing_from_the_cache_is_read_from_etcd(store: Store) -> None:
    resume = await pause_cache(store)
    try:
        created = await store.create("ns", cm("late", k="1"))  # the paused cache never sees it
        assert store.cache.get(store.key("ns", "late")) is None
        updated = await store.update("ns", "late", cm("late", created["metadata"]["resourceVersion"], k="2"))
        assert updated["data"] == {"k": "2"}
        _, gone = await store.delete("ns", "late", DeleteOptions())
        assert gone
    finally:
        resume()


async def test_concurrent_pinned_writers_lose_nothing(store: Store) -> None:
    await store.create("ns", cm("counter", n="0"))
    writers = 12

    async def writer() -> int:
        conflicts = 0
        while True:
            current = await store.get("ns", "counter")
            n = int(current["data"]["n"]) + 1
            try:
                await store.update("ns", "counter", cm("counter", current["metadata"]["resourceVersion"], n=str(n)))
                return conflicts
            except APIError as err:
                assert err.code == 409 and err.message == CONFLICT.format("counter")
                conflicts += 1

    conflicts = await asyncio.gather(*(writer() for _ in range(writers)))
    assert (await store.get("ns", "counter"))["data"]["n"] == str(writers)
    assert sum(conflicts) > 0  # they did race


async def test_concurrent_unpinned_updates_and_deletes(store: Store) -> None:
    await store.create("ns", cm("bump", n="0"))

    def bump(obj: dict[str, Any]) -> dict[str, Any]:
        obj["data"]["n"] = str(int(obj["data"]["n"]) + 1)
        return obj

    await asyncio.gather(*(store.guaranteed_update("ns", "bump", bump) for _ in range(20)))
    assert (await store.get("ns", "bump"))["data"]["n"] == "20"
    # Many deletes of one object: exactly one removes it, the others find it gone.
    results = await asyncio.gather(*(store.delete("ns", "bump", DeleteOptions()) for _ in range(5)),
                                   return_exceptions=True)
    gone = [r for r in results if not isinstance(r, BaseException)]
    missing = [r for r in results if isinstance(r, APIError) and r.code == 404]
    assert len(gone) == 1 and len(missing) == 4, results
    await cache_gone(store, "ns", "bump")


async def test_put_resource_version_zero_and_unparseable_as_kube(store: Store) -> None:
    """kube's Store.Update: the body's version through ParseUint (its error unwrapped: a 500 with no
    reason); 0 ("" or "0") is unconditional for a kind that allows it (ConfigMaps do), any other
    version compared as a number (leading zeros are the same version)."""
    created = await store.create("ns", cm("bad", k="1"))
    rv = created["metadata"]["resourceVersion"]
    await cached_at(store, "ns", "bad", rv)
    for bad, why in (("abc", "invalid syntax"), ("-1", "invalid syntax"), ("+1", "invalid syntax"),
                     (" 1", "invalid syntax"), ("99999999999999999999", "value out of range")):
        with pytest.raises(APIError) as err:
            await store.update("ns", "bad", cm("bad", bad, k="2"))
        assert (err.value.code, err.value.reason, err.value.details) == (500, "", None), bad
        assert err.value.message == f'strconv.ParseUint: parsing "{bad}": {why}'
    with pytest.raises(APIError) as err:  # parses (uint64's largest), is not the stored one
        await store.update("ns", "bad", cm("bad", "18446744073709551615", k="2"))
    assert (err.value.code, err.value.reason, err.value.message) == (409, "Conflict", CONFLICT.format("bad"))
    assert (await store.get("ns", "bad"))["data"] == {"k": "1"}

    before = calls(store)
    zero = await store.update("ns", "bad", cm("bad", "0", k="zero"))
    assert delta(before, calls(store)) == {"update": 1}
    assert zero["data"] == {"k": "zero"} and int(zero["metadata"]["resourceVersion"]) > int(rv)
    rv = zero["metadata"]["resourceVersion"]
    padded = await store.update("ns", "bad", cm("bad", "000" + rv, k="padded"))
    assert padded["data"] == {"k": "padded"}
    # Nothing changed at "0": the stored version, no write.
    await cached_at(store, "ns", "bad", padded["metadata"]["resourceVersion"])
    before = calls(store)
    same = await store.update("ns", "bad", cm("bad", "0", k="padded"))
    assert same["metadata"]["resourceVersion"] == padded["metadata"]["resourceVersion"]
    assert "update" not in delta(before, calls(store))
