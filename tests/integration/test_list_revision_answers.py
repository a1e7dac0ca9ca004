"""A LIST at a revision etcd cannot read: compacted, or one it has not reached (real etcd).

etcd answers both with the same gRPC code (OUT_OF_RANGE); kube-apiserver 1.33 answers them apart
(k8s.io/apiserver v0.33 storage/etcd3: ``interpretListError`` turns only ``ErrCompacted`` into a
410, and a future revision is passed on as etcd's own error, which ``ErrorToAPIStatus`` makes a
500 with no reason and etcd's text; its storage tests carry a TODO to classify it as
TooLargeResourceVersion). Read from the watch cache (resourceVersion without Exact or limit), a
future revision is waited for and then kube's 504 ``Too large resource version``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry.options import ListOptions
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.storage.etcd import EtcdClient

pytestmark = pytest.mark.integration

CM = ResourceInfo("", "v1", "ConfigMap", "configmaps", "configmap", True, ("cm",))


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


@pytest.fixture
async def client(etcd_server) -> AsyncIterator[EtcdClient]:  # type: ignore[no-untyped-def]
    c = EtcdClient([etcd_server.endpoint])
    yield c
    await c.close()


@pytest.fixture
async def store(client: EtcdClient) -> AsyncIterator[Store]:
    s = Store(CM, Strategy(CM), client, f"/revisions-{uuid.uuid4().hex[:8]}/configmaps")
    await s.start()
    yield s
    await s.stop()


async def list_error(store: Store, **opts: Any) -> APIError:
    with pytest.raises(APIError) as caught:
        await store.list("ns", ListOptions(**opts))
    return caught.value


@pytest.mark.parametrize("read_from_etcd", [{"resource_version_match": "Exact"}, {"limit": 1}])
async def test_a_future_revision_read_from_etcd_is_kubes_500(store: Store, client: EtcdClient,
                                                             read_from_etcd: dict[str, Any]) -> None:
    await store.create("ns", cm("a"))
    future = str(await client.current_revision() + 1000)
    err = await list_error(store, resource_version=future, **read_from_etcd)
    assert (err.code, err.reason, err.message) == (500, "", "etcdserver: mvcc: required revision is a future revision")
    assert "reason" not in err.status()


async def test_a_future_revision_read_from_the_watch_cache_is_kubes_504(store: Store, client: EtcdClient) -> None:
    await store.create("ns", cm("a"))
    current = await client.current_revision()
    err = await list_error(store, resource_version=str(current + 1000))
    assert (err.code, err.reason) == (504, "Timeout"), err.status()
    assert err.message.startswith(f"Too large resource version: {current + 1000}, current: ")
    assert err.details is not None and err.details.get("retryAfterSeconds") == 1


@pytest.mark.parametrize("read_from_etcd", [{"resource_version_match": "Exact"}, {"limit": 1}])
async def test_a_compacted_revision_read_from_etcd_is_kubes_410(store: Store, client: EtcdClient,
                                                                read_from_etcd: dict[str, Any]) -> None:
    first = await store.create("ns", cm("a"))
    await store.create("ns", cm("b"))
    await client.compact(await client.current_revision())
    err = await list_error(store, resource_version=first["metadata"]["resourceVersion"], **read_from_etcd)
    assert (err.code, err.reason) == (410, "Expired"), err.status()
    assert err.message == "The resourceVersion for the provided list is too old."
    # The current revision still reads (a page of one with a limit).
    listed = await store.list("ns", ListOptions(resource_version=str(await client.current_revision()),
                                                **read_from_etcd))
    names = [obj["metadata"]["name"] for obj, _raw in listed.items]
    assert names == (["a"] if "limit" in read_from_etcd else ["a", "b"])
