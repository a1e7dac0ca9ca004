"""Custom resources start updates, patches and deletes from the watch cache's copy too (issue 15).

A CRD with two versions (v1 stored, v2 served too), once with conversion ``None`` (the v2 store's
codec rewrites apiVersion) and once through a real conversion webhook (``ConvertingStore``: the
cached v1 copy goes through the webhook, as a read does). On real etcd, with the stores the
extensions-api builds from the CRD (``crd_serving.build``):

- a patch and a PUT through the non-storage version and a delete are one etcd call each
  (``etcd_requests_total``), the object stored at v1 and answered at v2; the cached copy converted
  is what a read converts (same object);
- with a stale cache (its etcd watch stopped, the stored object rewritten behind its back) a PUT at
  the old resourceVersion is kube's 409, at the current one it succeeds, and an unpinned patch builds
  on the current state;
- a PUT without a resourceVersion, or with "0", is kube's 422 for custom resources
  (AllowUnconditionalUpdate false); one that does not parse is Go's ParseUint error, a 500.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import orjson
import pytest
from extensionsapi import crd_serving
from extensionsapi.cr_store import ConvertingStore
from genericapi.apimachinery.errors import OPTIMISTIC_LOCK_MESSAGE, APIError
from genericapi.registry.options import DeleteOptions
from genericapi.registry.store import Store
from genericapi.storage.etcd import EtcdClient
from prometheus_client import REGISTRY
from support.conversion_webhook import Pki, WebhookProcess, make_pki

pytestmark = pytest.mark.integration

GROUP = "cu-cr.example.com"


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    pki: Pki = make_pki(tmp_path_factory.mktemp("cu-hook-pki"), ["localhost"])
    proc = WebhookProcess.start(pki)
    yield proc
    proc.stop()


def backends_crd(conversion: dict[str, Any]) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"backends.{GROUP}", "uid": str(uuid.uuid4())},
        "spec": {"group": GROUP, "scope": "Namespaced", "conversion": conversion,
                 "names": {"kind": "Backend", "plural": "backends", "singular": "backend", "listKind": "BackendList"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema},
                              {"name": "v2", "served": True, "storage": False, "schema": schema}]},
        "status": {"acceptedNames": {"kind": "Backend", "plural": "backends", "singular": "backend",
                                     "listKind": "BackendList"}, "storedVersions": ["v1"]}}


class CR:
    """The v1 and v2 stores of one CRD on one etcd prefix, and how to count their etcd calls."""

    def __init__(self, stores: dict[str, Store], client: EtcdClient, prefix: str, resource: str,
                 webhook: WebhookProcess | None) -> None:
        self.stores, self.client, self.prefix, self.resource, self.webhook = stores, client, prefix, resource, webhook

    def calls(self) -> dict[str, int]:
        out = {}
        for op in ("get", "list", "create", "update", "delete"):
            value = REGISTRY.get_sample_value("etcd_requests_total", {"operation": op, "type": self.resource})
            out[op] = int(value or 0)
        return out

    def reviews(self) -> int:
        """ConversionReviews the webhook has answered (0 without one)."""
        return self.webhook.calls()["reviews"].get("convert", 0) if self.webhook is not None else 0

    async def stored(self, ns: str, name: str) -> dict[str, Any]:
        kv, _ = await self.client.get(f"{self.prefix}/{ns}/{name}".encode())
        assert kv is not None
        obj: dict[str, Any] = orjson.loads(kv.value)
        return obj


@pytest.fixture(params=["None", "Webhook"])
async def cr(request: pytest.FixtureRequest, etcd_server: Any) -> AsyncIterator[CR]:
    hook: WebhookProcess | None = None
    conversion: dict[str, Any] = {"strategy": "None"}
    if request.param == "Webhook":
        hook = request.getfixturevalue("webhook")
        assert hook is not None
        conversion = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
            "url": f"{hook.url}/convert", "caBundle": hook.pki.ca_bundle}}}
    client = EtcdClient([etcd_server.endpoint])
    built = crd_serving.build(backends_crd(conversion), lambda: False)
    tag = uuid.uuid4().hex[:8]
    prefix = f"/cu-cr-{tag}/{built.key_prefix}"
    resource = f"cr-{tag}"
    client.instruments.name_resource(f"{prefix}/".encode(), resource)
    stores: dict[str, Store] = {}
    for v in built.versions:
        if built.converter is not None:
            stores[v.info.version] = ConvertingStore(v.info, v.strategy, client, prefix, converter=built.converter,
                                                     storage_version=built.storage_version)
        else:
            stores[v.info.version] = Store(v.info, v.strategy, client, prefix, codec=v.codec)
    await asyncio.gather(*(s.start() for s in stores.values()))
    yield CR(stores, client, prefix, resource, hook)
    await asyncio.gather(*(s.stop() for s in stores.values()))
    if built.converter is not None:
        await built.converter.close()
    await client.close()


def backend(name: str, address: str, rv: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if rv:
        meta["resourceVersion"] = rv
    return {"apiVersion": f"{GROUP}/v2", "kind": "Backend", "metadata": meta, "spec": {"address": address}}


def stored_spec(cr: CR, address: str) -> dict[str, Any]:
    """The v2 ``spec.address`` as stored at v1: the webhook splits it, None conversion keeps it."""
    if cr.webhook is None:
        return {"address": address}
    host, port = address.rsplit(":", 1)
    return {"host": host, "port": int(port)}


async def cached_at(store: Store, ns: str, name: str, rv: str) -> None:
    key = store.key(ns, name)
    for _ in range(500):
        entry = store.cache.get(key)
        if entry is not None and str(entry.revision) == rv:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the watch cache never saw {name} at {rv}")


async def pause_cache(store: Store) -> Callable[[], None]:
    """Stop the cache following etcd (it stays ready with what it has); the result resumes it."""
    view = store.cache._view
    assert view is not None and store.cache.ready
    source = view.source
    await source.stop()
    return source.ensure_running


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def set_address(address: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def patch(obj: dict[str, Any]) -> dict[str, Any]:
        obj["spec"]["address"] = address
        return obj
    return patch


async def test_cr_update_patch_delete_through_the_served_version_are_one_etcd_call_each(cr: CR) -> None:
    v2 = cr.stores["v2"]
    created = await v2.create("ns", backend("db", "db.local:5432"))
    assert created["apiVersion"] == f"{GROUP}/v2"
    await cached_at(v2, "ns", "db", created["metadata"]["resourceVersion"])
    # The cached copy converted is what a read converts.
    assert await v2.get("ns", "db", "0") == await v2.get("ns", "db")

    before, reviews = cr.calls(), cr.reviews()
    patched = await v2.guaranteed_update("ns", "db", set_address("db2.local:6000"))
    assert delta(before, cr.calls()) == {"update": 1}
    # Webhook: the cached v1 copy to v2 (as a read would), the result back to v1 to store it.
    assert cr.reviews() - reviews == (2 if cr.webhook is not None else 0)
    assert patched["apiVersion"] == f"{GROUP}/v2" and patched["spec"] == {"address": "db2.local:6000"}
    stored = await cr.stored("ns", "db")
    assert stored["apiVersion"] == f"{GROUP}/v1" and stored["spec"] == stored_spec(cr, "db2.local:6000")
    rv = patched["metadata"]["resourceVersion"]
    await cached_at(v2, "ns", "db", rv)

    before = cr.calls()
    put = await v2.update("ns", "db", backend("db", "db3.local:7000", rv))
    assert delta(before, cr.calls()) == {"update": 1}
    assert put["spec"] == {"address": "db3.local:7000"} and put["metadata"]["generation"] == 3
    await cached_at(v2, "ns", "db", put["metadata"]["resourceVersion"])
    v1_read = await cr.stores["v1"].get("ns", "db")
    assert v1_read["apiVersion"] == f"{GROUP}/v1" and v1_read["spec"] == stored_spec(cr, "db3.local:7000")

    before = cr.calls()
    deleted, gone = await v2.delete("ns", "db", DeleteOptions(precondition_uid=created["metadata"]["uid"]))
    assert delta(before, cr.calls()) == {"delete": 1}
    assert gone and deleted["apiVersion"] == f"{GROUP}/v2" and deleted["spec"] == {"address": "db3.local:7000"}
    with pytest.raises(APIError) as err:
        await v2.get("ns", "db")
    assert err.value.code == 404


async def test_cr_stale_cache_decides_on_the_current_state(cr: CR) -> None:
    v2 = cr.stores["v2"]
    created = await v2.create("ns", backend("s", "a.local:1"))
    old_rv = created["metadata"]["resourceVersion"]
    await cached_at(v2, "ns", "s", old_rv)
    resume = await pause_cache(v2)  # one etcd watch feeds both versions' caches: both stale
    try:
        kv, _ = await cr.client.get(v2.key("ns", "s"))
        assert kv is not None
        obj = orjson.loads(kv.value)
        obj["metadata"]["labels"] = {"behind": "yes"}
        new_rv = str(await cr.client.update(kv.key, orjson.dumps(obj), kv.mod_revision))
        assert str(v2.cache.get(v2.key("ns", "s")).revision) == old_rv  # type: ignore[union-attr]

        # The client's version is the stale cache's: kube's 409, nothing written.
        with pytest.raises(APIError) as err:
            await v2.update("ns", "s", backend("s", "mine.local:2", old_rv))
        assert (err.value.code, err.value.reason) == (409, "Conflict")
        assert err.value.message == (f'Operation cannot be fulfilled on backends.{GROUP} "s": '
                                     f"{OPTIMISTIC_LOCK_MESSAGE}")
        assert (await v2.get("ns", "s"))["metadata"]["labels"] == {"behind": "yes"}

        # The current version: no false 409 (a recheck read, then the Txn).
        before = cr.calls()
        body = backend("s", "current.local:3", new_rv)
        body["metadata"]["labels"] = {"behind": "yes"}
        updated = await v2.update("ns", "s", body)
        assert delta(before, cr.calls()) == {"get": 1, "update": 1}
        assert updated["spec"] == {"address": "current.local:3"}

        # Unpinned patch: the Txn against the stale revision fails, the retry starts from what it read.
        def label(o: dict[str, Any]) -> dict[str, Any]:
            o["metadata"].setdefault("labels", {})["patched"] = "yes"  # the stale copy has none
            return o

        patched = await v2.guaranteed_update("ns", "s", label)
        assert patched["metadata"]["labels"] == {"behind": "yes", "patched": "yes"}
        assert patched["spec"] == {"address": "current.local:3"} and patched["apiVersion"] == f"{GROUP}/v2"
        stored = await cr.stored("ns", "s")
        assert stored["spec"] == stored_spec(cr, "current.local:3") and stored["apiVersion"] == f"{GROUP}/v1"
    finally:
        resume()


async def test_cr_put_resource_version_zero_empty_and_unparseable(cr: CR) -> None:
    v2 = cr.stores["v2"]
    created = await v2.create("ns", backend("rv", "a.local:1"))
    await cached_at(v2, "ns", "rv", created["metadata"]["resourceVersion"])
    for rv in ("", "0", "00"):
        with pytest.raises(APIError) as err:
            await v2.update("ns", "rv", backend("rv", "b.local:2", rv))
        assert (err.value.code, err.value.reason) == (422, "Invalid")
        assert err.value.message == (f'backends.{GROUP} "rv" is invalid: metadata.resourceVersion: Invalid value: '
                                     "0x0: must be specified for an update")
        assert err.value.details == {"name": "rv", "group": GROUP, "kind": "backends", "causes": [{
            "reason": "FieldValueInvalid", "message": "Invalid value: 0x0: must be specified for an update",
            "field": "metadata.resourceVersion"}]}
    for rv, why in (("abc", "invalid syntax"), ("99999999999999999999", "value out of range")):
        with pytest.raises(APIError) as err:
            await v2.update("ns", "rv", backend("rv", "b.local:2", rv))
        assert (err.value.code, err.value.reason) == (500, "")
        assert err.value.message == f'strconv.ParseUint: parsing "{rv}": {why}'
    assert (await v2.get("ns", "rv"))["spec"] == {"address": "a.local:1"}


async def test_cr_cached_copy_that_fails_to_convert_is_not_the_answer(cr: CR) -> None:
    """A stale cached copy the webhook cannot convert (stored at a version the CRD does not have) is
    replaced by etcd's current one, which converts: the patch succeeds on it."""
    if cr.webhook is None:
        pytest.skip("conversion None rewrites apiVersion: nothing fails to convert")
    v2 = cr.stores["v2"]
    created = await v2.create("ns", backend("f", "a.local:1"))
    kv, _ = await cr.client.get(v2.key("ns", "f"))
    assert kv is not None
    good = orjson.loads(kv.value)
    bad = {**good, "apiVersion": f"{GROUP}/v9"}
    bad_rv = str(await cr.client.update(kv.key, orjson.dumps(bad), kv.mod_revision))
    await cached_at(v2, "ns", "f", bad_rv)
    with pytest.raises(APIError) as err:  # current and unconvertible: the error is the answer
        await v2.guaranteed_update("ns", "f", set_address("x.local:9"))
    assert err.value.code == 500
    resume = await pause_cache(v2)
    try:
        await cr.client.update(kv.key, orjson.dumps(good), int(bad_rv))  # fixed behind the cache's back
        before = cr.calls()
        patched = await v2.guaranteed_update("ns", "f", set_address("b.local:2"))
        assert delta(before, cr.calls()) == {"get": 1, "update": 1}
        assert patched["spec"] == {"address": "b.local:2"}
        assert patched["metadata"]["uid"] == created["metadata"]["uid"]
    finally:
        resume()
