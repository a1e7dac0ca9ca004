"""One etcd watch per stored resource, whatever the served versions (issue 15), on real etcd.

core-api serves Events as core/v1 and events.k8s.io/v1 and HorizontalPodAutoscalers as autoscaling/v1
and v2, over one key prefix each; extensions-api serves each version of a CRD over one prefix. Each
process must hold one etcd watch per prefix (its watch cache source), counted twice: by the etcd
client (the gRPC watch streams it has open, by prefix) and by etcd itself
(``etcd_debugging_mvcc_watcher_total`` rises by exactly that many when the server starts). A watch on
each served version still sees every change, in its own version.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from coreapi.server import build_server as build_core
from extensionsapi.server import build_server as build_extensions
from genericapi.registry.codec import JsonCodec
from genericapi.registry.options import DeleteOptions, ListOptions
from genericapi.registry.store import Store
from genericapi.server.apiserver import GenericAPIServer, ServerConfig
from genericapi.storage.cacher import CacheEvent, CacheWatcher, WatchCache
from genericapi.storage.etcd import EtcdClient

pytestmark = pytest.mark.integration


def etcd_watchers(endpoint: str) -> int:
    with urllib.request.urlopen(endpoint + "/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^etcd_debugging_mvcc_watcher_total (\S+)$", text, re.M)
    assert m is not None
    return int(float(m.group(1)))


async def settled_watchers(endpoint: str) -> int:
    """etcd's watcher count once two reads a moment apart agree (streams close asynchronously)."""
    last = await asyncio.to_thread(etcd_watchers, endpoint)
    for _ in range(50):
        await asyncio.sleep(0.2)
        now = await asyncio.to_thread(etcd_watchers, endpoint)
        if now == last:
            return now
        last = now
    return last


def stores_of(server: GenericAPIServer, group: str, plural: str) -> dict[str, Store]:
    """Every served version's store of one resource, by group/version."""
    return {f"{s.info.group}/{s.info.version}".lstrip("/"): s for s in server.stores
            if (s.info.group, s.info.plural) == (group, plural)}


def assert_one_watch_per_prefix(server: GenericAPIServer, started_with: int, now: int) -> None:
    streams = server.etcd.open_watches
    duplicated = {p.decode(): n for p, n in streams.items() if n != 1}
    assert duplicated == {}
    assert now - started_with == sum(streams.values()) == len(streams)


async def next_events(watcher: CacheWatcher, count: int) -> list[CacheEvent]:
    out: list[CacheEvent] = []
    while len(out) < count:
        item = await watcher.next_item(30)
        assert item is not None, f"no event after {[(e.type, e.obj.get('apiVersion')) for e in out]}"
        if isinstance(item, CacheEvent):
            out.append(item)
    return out


@pytest.fixture
async def core(etcd_server: Any) -> AsyncIterator[tuple[GenericAPIServer, int, int]]:
    before = await settled_watchers(etcd_server.endpoint)
    config = ServerConfig("core-api", [etcd_server.endpoint], etcd_prefix=f"/shared-{uuid.uuid4().hex[:8]}",
                          watch_cache_size=200)
    server = build_core(config, controllers=None)
    await server.start()
    try:
        yield server, before, await settled_watchers(etcd_server.endpoint)
    finally:
        await server.stop()


async def test_core_api_holds_one_etcd_watch_per_resource(core: tuple[GenericAPIServer, int, int]) -> None:
    server, before, after = core
    assert_one_watch_per_prefix(server, before, after)
    prefix = server.config.etcd_prefix.rstrip("/")
    for groups, plural, versions in ((("", "events.k8s.io"), "events", {"v1", "events.k8s.io/v1"}),
                                     (("autoscaling",), "horizontalpodautoscalers",
                                      {"autoscaling/v1", "autoscaling/v2"})):
        stores = {v: s for g in groups for v, s in stores_of(server, g, plural).items()}
        assert set(stores) == versions
        assert server.etcd.open_watches[f"{prefix}/{plural}/".encode()] == 1


async def test_every_served_version_sees_every_event(core: tuple[GenericAPIServer, int, int]) -> None:
    server, _, _ = core
    events = {**stores_of(server, "", "events"), **stores_of(server, "events.k8s.io", "events")}
    hpas = stores_of(server, "autoscaling", "horizontalpodautoscalers")
    watchers = {v: await s.watch("default", ListOptions(resource_version="0")) for v, s in {**events, **hpas}.items()}
    ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1", "namespace": "default"},
          "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}, "reason": "Started",
          "message": "one", "type": "Normal", "source": {"component": "test"}}
    created = await events["v1"].create("default", ev)
    created["message"] = "two"
    await events["v1"].update("default", "e1", created)
    await events["events.k8s.io/v1"].delete("default", "e1", DeleteOptions())
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "h1", "namespace": "default"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                    "minReplicas": 1, "maxReplicas": 3}}
    await hpas["autoscaling/v2"].create("default", hpa)
    await hpas["autoscaling/v1"].delete("default", "h1", DeleteOptions())
    for version in events:
        got = await next_events(watchers[version], 3)
        assert [e.type for e in got] == ["ADDED", "MODIFIED", "DELETED"]
        assert {e.obj["apiVersion"] for e in got} == {version}
        assert got[1].obj.get("note" if version == "events.k8s.io/v1" else "message") == "two"
    for version in hpas:
        got = await next_events(watchers[version], 2)
        assert [e.type for e in got] == ["ADDED", "DELETED"]
        assert {e.obj["apiVersion"] for e in got} == {version}
        assert got[0].obj["spec"]["maxReplicas"] == 3
    for w in watchers.values():
        w.close()
    assert_one_watch_per_prefix(server, 0, sum(server.etcd.open_watches.values()))


CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.shared.example.com"},
    "spec": {"group": "shared.example.com", "scope": "Namespaced",
             "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
             "versions": [{"name": v, "served": True, "storage": v == "v1",
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}
                          for v in ("v1", "v2")]},
}


async def test_custom_resource_versions_share_one_etcd_watch(etcd_server: Any) -> None:
    before = await settled_watchers(etcd_server.endpoint)
    config = ServerConfig("extensions-api", [etcd_server.endpoint],
                          etcd_prefix=f"/shared-{uuid.uuid4().hex[:8]}", watch_cache_size=200)
    server, _controller = build_extensions(config)
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns", "uid": str(uuid.uuid4())},
          "status": {"phase": "Active"}}
    await server.etcd.create(f"{config.etcd_prefix}/namespaces/ns".encode(), json.dumps(ns).encode())
    await server.start()
    try:
        await server.by_resource[("apiextensions.k8s.io", "customresourcedefinitions")].create("", CRD)

        for _ in range(300):
            stores = stores_of(server, "shared.example.com", "gadgets")
            if len(stores) == 2:
                break
            await asyncio.sleep(0.1)
        assert set(stores) == {"shared.example.com/v1", "shared.example.com/v2"}
        assert_one_watch_per_prefix(server, before, await settled_watchers(etcd_server.endpoint))
        prefix = server.config.etcd_prefix.rstrip("/")
        assert server.etcd.open_watches[f"{prefix}/shared.example.com/gadgets/".encode()] == 1
        watchers = {v: await s.watch("ns", ListOptions(resource_version="0")) for v, s in stores.items()}
        obj = {"apiVersion": "shared.example.com/v2", "kind": "Gadget",
               "metadata": {"name": "g1", "namespace": "ns"}, "spec": {"size": 1}}
        await stores["shared.example.com/v2"].create("ns", obj)
        await stores["shared.example.com/v1"].delete("ns", "g1", DeleteOptions())
        for version, w in watchers.items():
            got = await next_events(w, 2)
            assert [e.type for e in got] == ["ADDED", "DELETED"]
            assert {e.obj["apiVersion"] for e in got} == {version}
            assert got[0].obj["spec"] == {"size": 1}
            w.close()
    finally:
        await server.stop()


async def test_views_attaching_at_any_moment_share_the_watch_and_see_everything(etcd_server: Any) -> None:
    """Handles with two codecs started together, one after the other, and one joining a running
    source: each start returns listed, one etcd watch per prefix, and every change reaches each."""
    client = EtcdClient([etcd_server.endpoint])

    def upper(obj: dict[str, Any]) -> dict[str, Any]:
        return {**obj, "data": {k: v.upper() for k, v in (obj.get("data") or {}).items()}}

    try:
        for round_ in range(12):
            prefix = f"/attach-{uuid.uuid4().hex[:8]}/configmaps/".encode()
            await client.put(prefix + b"ns/before", json.dumps({"metadata": {"name": "before"},
                                                                "data": {"k": "a"}}).encode())
            plain = WatchCache(client, prefix, JsonCodec(), window=50)
            converted = WatchCache(client, prefix, JsonCodec(None, upper), window=50)
            late = WatchCache(client, prefix, JsonCodec(), window=50)
            if round_ % 2:
                await asyncio.wait_for(asyncio.gather(plain.start(), converted.start()), 30)
            else:
                await asyncio.wait_for(plain.start(), 30)
                await client.put(prefix + b"ns/between", b'{"metadata": {"name": "between"}, "data": {"k": "b"}}')
                await asyncio.wait_for(converted.start(), 30)
            watchers = [await plain.watch(None, None), await converted.watch(None, None)]
            await client.put(prefix + b"ns/after", b'{"metadata": {"name": "after"}, "data": {"k": "c"}}')
            await asyncio.wait_for(late.start(), 30)
            assert client.open_watches[prefix] == 1
            for _ in range(100):  # late shares plain's view: "after" is there once its event is
                if late.get(prefix + b"ns/after") is not None:
                    break
                await asyncio.sleep(0.1)
            assert late.get(prefix + b"ns/after") is not None
            names = {"before", "after"} | ({"between"} if round_ % 2 == 0 else set())
            for w, value in zip(watchers, ("c", "C"), strict=True):
                got = await next_events(w, len(names))
                assert {e.obj["metadata"]["name"] for e in got} == names
                assert [e.obj["data"]["k"] for e in got if e.obj["metadata"]["name"] == "after"] == [value]
                w.close()
            for cache in (plain, converted, late):
                await cache.stop()
            assert prefix not in client.open_watches
    finally:
        await client.close()
