"""Namespaces, CRDs and CSRs write in one etcd round trip too (issue 15).

Their stores do more than the generic store on a write: a namespace's first DELETE marks it
Terminating (kube's namespace REST: a GuaranteedUpdate), a CRD's first DELETE adds the cleanup
finalizer and the Terminating condition, a CSR's ``/approval`` and ``/status`` updates ask the
authorizer about the signer (kube's CertificateApproval/CertificateSigning plugins). Each starts
from the watch cache's copy now, with no read of its own: on real etcd, with the stores the services
build, each is one etcd call (``etcd_requests_total``) once the cache holds the object, and with a
stale cache (its etcd watch stopped, the object changed behind its back) the answer is the current
state's: a namespace deleted and created again is a uid-precondition 409 with the new uid, a CRD
labelled behind the cache keeps the label when marked.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import pytest
from coreapi import catalog, csr, namespaces
from extensionsapi.crds import CLEANUP_FINALIZER, CRD_INFO, CRDStore, CRDStrategy
from genericapi.apimachinery.authorization import AlwaysAllow
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.apimachinery.user import UserInfo, current_user
from genericapi.registry.admissionchain import AdmissionChain
from genericapi.registry.options import DeleteOptions
from genericapi.registry.store import Store
from genericapi.storage.etcd import EtcdClient
from prometheus_client import REGISTRY
from test_csr import csr_body, make_request

pytestmark = pytest.mark.integration


@pytest.fixture
async def client(etcd_server: Any) -> AsyncIterator[EtcdClient]:
    c = EtcdClient([etcd_server.endpoint])
    yield c
    await c.close()


@pytest.fixture(scope="module")
def schemas() -> SchemaCatalog:
    return SchemaCatalog.load()


async def started(store: Store) -> Store:
    tag = uuid.uuid4().hex[:8]
    store.client.instruments.name_resource(store.scope_prefix(""), f"{store.info.plural}-{tag}")
    await store.start()
    return store


def prefix(kind: str) -> str:
    return f"/cu-kinds-{uuid.uuid4().hex[:8]}/{kind}"


def calls(store: Store) -> dict[str, int]:
    resource = store.client.instruments.resource_of(store.scope_prefix("") + b"x")
    out = {}
    for op in ("get", "list", "create", "update", "delete"):
        value = REGISTRY.get_sample_value("etcd_requests_total", {"operation": op, "type": resource})
        out[op] = int(value or 0)
    return out


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


async def cached_at(store: Store, name: str, rv: str) -> None:
    key = store.key("", name)
    for _ in range(500):
        entry = store.cache.get(key)
        if entry is not None and str(entry.revision) == rv:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the watch cache never saw {name} at {rv}")


async def pause_cache(store: Store) -> Callable[[], None]:
    view = store.cache._view
    assert view is not None and store.cache.ready
    source = view.source
    await source.stop()
    return source.ensure_running


@pytest.fixture
async def ns_store(client: EtcdClient, schemas: SchemaCatalog) -> AsyncIterator[Store]:
    info = catalog.find_resource("", "v1", "namespaces")
    assert info is not None
    store = await started(namespaces.build_store(info, schemas, client, prefix("namespaces"), AdmissionChain(),
                                                 1000, add_kubernetes_finalizer=True))
    yield store
    await store.stop()


async def test_namespace_first_delete_is_one_update(ns_store: Store) -> None:
    created = await ns_store.create("", {"metadata": {"name": "n1"}})
    assert created["spec"]["finalizers"] == ["kubernetes"]
    await cached_at(ns_store, "n1", created["metadata"]["resourceVersion"])
    before = calls(ns_store)
    marked, gone = await ns_store.delete("", "n1", DeleteOptions(propagation_policy="Foreground"))
    assert delta(before, calls(ns_store)) == {"update": 1}
    assert not gone and marked["status"]["phase"] == "Terminating" and marked["metadata"]["deletionTimestamp"]
    assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
    await cached_at(ns_store, "n1", marked["metadata"]["resourceVersion"])
    # Again while the controller is at work: nothing written, the same object, once a read shows
    # the cached copy is current (kube's namespace REST reads etcd first here too).
    before = calls(ns_store)
    again, gone = await ns_store.delete("", "n1", DeleteOptions())
    assert delta(before, calls(ns_store)) == {"get": 1}
    assert not gone and again["metadata"]["resourceVersion"] == marked["metadata"]["resourceVersion"]


async def test_namespace_delete_on_a_stale_cache_decides_on_the_current_object(ns_store: Store) -> None:
    created = await ns_store.create("", {"metadata": {"name": "n2"}})
    await cached_at(ns_store, "n2", created["metadata"]["resourceVersion"])
    resume = await pause_cache(ns_store)
    try:
        # Deleted and created again behind the cache's back: a uid the cache has not seen.
        await ns_store.client.delete(ns_store.key("", "n2"), int(created["metadata"]["resourceVersion"]))
        again = await ns_store.create("", {"metadata": {"name": "n2"}})
        old_uid, new_uid = created["metadata"]["uid"], again["metadata"]["uid"]
        with pytest.raises(APIError) as err:
            await ns_store.delete("", "n2", DeleteOptions(precondition_uid=old_uid))
        assert (err.value.code, err.value.reason) == (409, "Conflict")
        assert err.value.message == (f'Operation cannot be fulfilled on namespaces "n2": Precondition failed: '
                                     f"UID in precondition: {old_uid}, UID in object meta: {new_uid}")
        marked, gone = await ns_store.delete("", "n2", DeleteOptions(precondition_uid=new_uid))
        assert not gone and marked["metadata"]["uid"] == new_uid and marked["status"]["phase"] == "Terminating"
    finally:
        resume()


def _crd(name: str) -> dict[str, Any]:
    group = name.split(".", 1)[1]
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}]}}


@pytest.fixture
async def crd_store(client: EtcdClient) -> AsyncIterator[Store]:
    store = await started(CRDStore(CRD_INFO, CRDStrategy(None), client, prefix("customresourcedefinitions")))
    yield store
    await store.stop()


async def test_crd_first_delete_is_one_update(crd_store: Store) -> None:
    created = await crd_store.create("", _crd("widgets.one.example.com"))
    await cached_at(crd_store, "widgets.one.example.com", created["metadata"]["resourceVersion"])
    before = calls(crd_store)
    marked, gone = await crd_store.delete("", "widgets.one.example.com", DeleteOptions())
    assert delta(before, calls(crd_store)) == {"update": 1}
    assert not gone and marked["metadata"]["finalizers"] == [CLEANUP_FINALIZER]
    terminating = [c for c in marked["status"]["conditions"] if c["type"] == "Terminating"]
    assert terminating and terminating[0]["reason"] == "InstanceDeletionPending"


async def test_crd_delete_on_a_stale_cache_marks_the_current_object(crd_store: Store) -> None:
    name = "widgets.two.example.com"
    created = await crd_store.create("", _crd(name))
    await cached_at(crd_store, name, created["metadata"]["resourceVersion"])
    resume = await pause_cache(crd_store)
    try:
        kv, _ = await crd_store.client.get(crd_store.key("", name))
        assert kv is not None
        obj = orjson.loads(kv.value)
        obj["metadata"]["labels"] = {"behind": "yes"}
        await crd_store.client.update(kv.key, orjson.dumps(obj), kv.mod_revision)
        with pytest.raises(APIError) as err:  # the cached uid, which is also the current one: no conflict...
            await crd_store.delete("", name, DeleteOptions(precondition_rv=created["metadata"]["resourceVersion"]))
        # ...but the resourceVersion precondition is decided on the current object.
        assert (err.value.code, err.value.reason) == (409, "Conflict") and "ResourceVersion in precondition" \
            in err.value.message
        marked, gone = await crd_store.delete("", name, DeleteOptions(precondition_uid=created["metadata"]["uid"]))
        assert not gone and marked["metadata"]["labels"] == {"behind": "yes"}
        assert marked["metadata"]["finalizers"] == [CLEANUP_FINALIZER]
    finally:
        resume()


async def test_csr_approval_and_status_updates_are_one_update(client: EtcdClient, schemas: SchemaCatalog) -> None:
    info = catalog.find_resource("certificates.k8s.io", "v1", "certificatesigningrequests")
    assert info is not None
    store = await started(csr.build_store(info, schemas, client, prefix("certificatesigningrequests"),
                                          AdmissionChain(), 1000, AlwaysAllow()))
    token = current_user.set(UserInfo("approver", ("system:authenticated",)))
    try:
        request, _key = make_request("someone")
        created = await store.create("", csr_body("c1", request))
        await cached_at(store, "c1", created["metadata"]["resourceVersion"])
        body = {**created, "status": {"conditions": [
            {"type": "Approved", "status": "True", "reason": "ByTest", "message": "approved by a test"}]}}
        before = calls(store)
        approved = await store.update("", "c1", body, subresource="approval")
        assert delta(before, calls(store)) == {"update": 1}
        assert [c["type"] for c in approved["status"]["conditions"]] == ["Approved"]
        await cached_at(store, "c1", approved["metadata"]["resourceVersion"])
        failed = {**approved, "status": {"conditions": [*approved["status"]["conditions"], {
            "type": "Failed", "status": "True", "reason": "ByTest", "message": "failed by a test"}]}}
        before = calls(store)
        out = await store.update("", "c1", failed, subresource="status")
        assert delta(before, calls(store)) == {"update": 1}
        assert [c["type"] for c in out["status"]["conditions"]] == ["Approved", "Failed"]
    finally:
        current_user.reset(token)
        await store.stop()
