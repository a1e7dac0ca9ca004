"""The controller runtime on real etcd: work queue, local client, informer, controller, leader election."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Hashable
from typing import Any

import orjson
import pytest
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.rbac import RBACAuthorizer
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.user import current_user
from genericapi.controllers import (
    CONTROLLER_USER,
    ClientSet,
    Controller,
    Informer,
    LeaderElector,
    LocalClient,
    ShutDown,
    WatchEvent,
    WorkQueue,
)
from genericapi.controllers.informer import metadata_only
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.storage.etcd import EtcdClient

pytestmark = pytest.mark.integration

CM = ResourceInfo("", "v1", "ConfigMap", "configmaps", "configmap", True, ("cm",))
LEASE = ResourceInfo("coordination.k8s.io", "v1", "Lease", "leases", "lease", True)


def cm(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}


async def eventually(check: Any, limit: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + limit
    while True:
        if check():
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


@pytest.fixture
async def etcd(etcd_server) -> AsyncIterator[EtcdClient]:  # type: ignore[no-untyped-def]
    c = EtcdClient([etcd_server.endpoint])
    yield c
    await c.close()


async def _store(etcd: EtcdClient, info: ResourceInfo, window: int = 10_000) -> Store:
    s = Store(info, Strategy(info), etcd, f"/ctl-{uuid.uuid4().hex[:8]}/{info.plural}", watch_cache_size=window)
    await s.start()
    return s


@pytest.fixture
async def cms(etcd: EtcdClient) -> AsyncIterator[Store]:
    s = await _store(etcd, CM)
    yield s
    await s.stop()


@pytest.fixture
async def leases(etcd: EtcdClient) -> AsyncIterator[Store]:
    s = await _store(etcd, LEASE)
    yield s
    await s.stop()


# -- WorkQueue ---------------------------------------------------------------------------------
async def test_workqueue_deduplicates_and_requeues_keys_added_while_processing() -> None:
    q = WorkQueue()
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    assert await q.get() == "a"
    q.add("a")  # while "a" is processing: not handed out again yet
    assert await q.get() == "b"
    assert len(q) == 0
    q.done("a")  # now it comes back once
    assert await q.get() == "a"
    q.done("a")
    q.done("b")
    assert len(q) == 0


async def test_workqueue_retry_backs_off_and_forget_resets() -> None:
    q = WorkQueue(base_delay=0.05, max_delay=0.2)
    q.retry("k")
    q.retry("k")
    q.retry("k")
    assert q.failures("k") == 3
    assert len(q) == 0  # not before the delay
    start = asyncio.get_running_loop().time()
    assert await asyncio.wait_for(q.get(), 2) == "k"
    assert asyncio.get_running_loop().time() - start >= 0.04
    q.done("k")
    q.forget("k")
    assert q.failures("k") == 0
    q.add_after("later", 0.05)
    assert len(q) == 0
    assert await asyncio.wait_for(q.get(), 2) == "later"


async def test_workqueue_shut_down_wakes_getters() -> None:
    q = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    q.shut_down()
    with pytest.raises(ShutDown):
        await asyncio.wait_for(getter, 2)
    q.add("ignored")
    assert len(q) == 0


# -- LocalClient -------------------------------------------------------------------------------
async def test_local_client_verbs_run_as_the_controller_user(cms: Store) -> None:
    seen: list[str] = []

    class RecordUser:
        def handles(self, operation: str) -> bool:
            return True

        async def admit(self, attrs: Any) -> None:
            u = current_user.get()
            seen.append(f"{attrs.operation}:{u.name if u else ''}")

        async def validate(self, attrs: Any) -> None:
            await self.admit(attrs)

    cms.admission.mutating.append(RecordUser())
    cms.admission.validating.append(RecordUser())  # a delete has only the validating phase
    client = LocalClient(cms, CONTROLLER_USER)
    body = cm("one", {"app": "x"}, k="v")
    created = await client.create("ns", body)
    assert "resourceVersion" not in body["metadata"]  # the caller's object is not touched
    assert created["metadata"]["namespace"] == "ns"
    await client.create("ns", cm("two", {"app": "y"}))
    items, rv, cont = await client.list("ns", label_selector="app=x")
    assert [i["metadata"]["name"] for i in items] == ["one"] and int(rv) > 0 and cont == ""
    items, _rv, _c = await client.list("", field_selector="metadata.name=two")
    assert [i["metadata"]["name"] for i in items] == ["two"]
    items[0]["data"] = {"mutated": "yes"}  # private copies: the cache is unaffected
    assert (await client.get("ns", "two"))["data"] == {}
    patched = await client.patch("ns", "one", {"data": {"k": None, "n": "1"}})
    assert patched["data"] == {"n": "1"}
    patched = await client.patch("ns", "one", [{"op": "add", "path": "/data/j", "value": "2"}], patch_type="json")
    assert patched["data"] == {"n": "1", "j": "2"}
    patched["data"]["u"] = "3"
    updated = await client.update("ns", "one", patched)
    assert updated["data"]["u"] == "3"
    assert await client.delete("ns", "one") is None
    assert "CREATE:system:kube-controller-manager" in seen and "DELETE:system:kube-controller-manager" in seen
    assert current_user.get() is None


async def test_local_client_bad_inputs(cms: Store) -> None:
    client = LocalClient(cms)
    with pytest.raises(APIError) as err:
        await client.list("ns", label_selector="a in (")
    assert err.value.code == 400
    with pytest.raises(APIError) as err:
        await client.get("ns", "missing")
    assert err.value.code == 404
    created = await client.create("ns", cm("p"))
    with pytest.raises(APIError) as err:
        await client.delete("ns", "p", uid="not-the-uid")
    assert err.value.code == 409
    with pytest.raises(APIError) as err:
        await client.patch("ns", "p", {"metadata": {"resourceVersion": "1"}, "data": {"a": "b"}})
    assert err.value.code == 409  # a stale pinned version conflicts
    with pytest.raises(APIError) as err:
        await client.patch("ns", "p", [{"op": "test", "path": "/data/x", "value": "1"}], patch_type="json")
    assert err.value.code == 422
    with pytest.raises(APIError) as err:
        await client.patch("ns", "p", {"data": {}}, patch_type="strategic")
    assert err.value.code == 400
    with pytest.raises(APIError) as err:
        await client.update("ns", "p", created, subresource="scale")
    assert err.value.code == 400
    with pytest.raises(APIError) as err:
        await client.create("ns", cm("p"))
    assert err.value.code == 409 and err.value.reason == "AlreadyExists"


async def test_local_client_watch_from_a_version(cms: Store) -> None:
    client = LocalClient(cms)
    _items, rv, _c = await client.list("w")
    events: list[WatchEvent] = []

    async def collect() -> None:
        async for ev in client.watch(rv, "w"):
            events.append(ev)

    task = asyncio.create_task(collect())
    await client.create("w", cm("a"))
    await client.create("other", cm("b"))  # another namespace: not seen
    await client.patch("w", "a", {"data": {"x": "1"}})
    await client.delete("w", "a")
    await eventually(lambda: len(events) >= 3)
    task.cancel()
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


# -- Informer ----------------------------------------------------------------------------------
async def test_informer_lists_watches_and_tells_handlers(cms: Store) -> None:
    client = LocalClient(cms)
    await client.create("inf", cm("pre"))
    informer = Informer(client, "inf")
    seen: list[tuple[str, str, bool]] = []
    informer.add_handler(lambda t, o, old: seen.append((t, o["metadata"]["name"], old is not None)))
    await informer.start()
    await asyncio.wait_for(informer.wait_synced(), 5)
    assert informer.get("inf", "pre") is not None
    await client.create("inf", cm("new"))
    await client.patch("inf", "new", {"data": {"a": "1"}})
    await client.delete("inf", "pre")
    await eventually(lambda: len(seen) >= 4)
    assert seen == [("ADDED", "pre", False), ("ADDED", "new", False), ("MODIFIED", "new", True),
                    ("DELETED", "pre", True)]
    assert [o["metadata"]["name"] for o in informer.items()] == ["new"]
    assert informer.get("inf", "new")["data"] == {"a": "1"}  # type: ignore[index]
    late: list[str] = []
    informer.add_handler(lambda t, o, _old: late.append(f"{t}:{o['metadata']['name']}"))
    assert late == ["ADDED:new"]  # a late handler is told of what is cached
    await informer.stop()


async def test_a_transform_reduces_what_the_informer_keeps_and_tells(cms: Store) -> None:
    """client-go's SetTransform: applied to listed and watched objects before caching and handlers
    (kube's metadata informers: no data, no managedFields)."""
    client = LocalClient(cms)
    await client.create("tr", cm("pre", big="x" * 100))
    informer = Informer(client, "tr", transform=metadata_only)
    seen: list[dict[str, Any]] = []
    informer.add_handler(lambda _t, o, _old: seen.append(o))
    await informer.start()
    await asyncio.wait_for(informer.wait_synced(), 5)
    await client.create("tr", cm("new", k="v"))
    await client.patch("tr", "new", {"metadata": {"labels": {"l": "1"}}})
    await eventually(lambda: len(seen) >= 3)
    for obj in [*seen, *informer.items()]:
        assert set(obj) == {"apiVersion", "kind", "metadata"}, obj
        assert "managedFields" not in obj["metadata"] and obj["metadata"]["resourceVersion"]
    assert (informer.get("tr", "new") or {})["metadata"]["labels"] == {"l": "1"}
    assert (await client.get("tr", "new"))["data"] == {"k": "v"}  # the objects themselves are whole
    await informer.stop()


class _ExpiringClient:
    """A LocalClient whose first watch fails with 410 after objects changed behind its back."""

    def __init__(self, inner: LocalClient) -> None:
        self.inner = inner
        self.resource = inner.resource
        self.expired = asyncio.Event()
        self.watches = 0

    async def list(self, namespace: str = "", **kw: Any) -> tuple[list[dict[str, Any]], str, str]:
        return await self.inner.list(namespace, **kw)

    def watch(self, resource_version: str, namespace: str = "") -> AsyncIterator[WatchEvent]:
        self.watches += 1
        if self.watches == 1:
            return self._expire()
        return self.inner.watch(resource_version, namespace)

    async def _expire(self) -> AsyncIterator[WatchEvent]:
        await self.expired.wait()
        raise APIError(410, "Expired", "too old resource version: 1 (2)")
        yield  # pragma: no cover - makes this an async generator


async def test_informer_relists_on_410_and_reports_what_vanished(cms: Store) -> None:
    local = LocalClient(cms)
    await local.create("rel", cm("stays"))
    await local.create("rel", cm("goes"))
    client = _ExpiringClient(local)
    informer = Informer(client, "rel")  # type: ignore[arg-type]
    seen: list[str] = []
    informer.add_handler(lambda t, o, _old: seen.append(f"{t}:{o['metadata']['name']}"))
    await informer.start()
    await informer.wait_synced()
    await local.delete("rel", "goes")
    await local.create("rel", cm("came"))
    client.expired.set()
    await eventually(lambda: "DELETED:goes" in seen and "ADDED:came" in seen)
    assert sorted(o["metadata"]["name"] for o in informer.items()) == ["came", "stays"]
    assert client.watches >= 2
    await informer.stop()


# -- Controller ----------------------------------------------------------------------------------
class _Recorder(Controller):
    name = "recorder"

    def __init__(self, client: LocalClient) -> None:
        super().__init__()
        self.informer = Informer(client, "ctl")
        self.informers.append(self.informer)
        self.informer.add_handler(lambda _t, o, _old: self.queue.add(o["metadata"]["name"]))
        self.done: list[Hashable] = []
        self.failures_left = 2

    async def on_synced(self) -> None:
        for obj in self.informer.items():
            self.queue.add(obj["metadata"]["name"])

    async def reconcile(self, key: Hashable) -> None:
        if key == "flaky" and self.failures_left:
            self.failures_left -= 1
            raise RuntimeError("transient")
        self.done.append(key)


async def test_controller_reconciles_and_retries_failures(cms: Store) -> None:
    client = LocalClient(cms)
    await client.create("ctl", cm("before"))
    ctl = _Recorder(client)
    task = asyncio.create_task(ctl.run(workers=2))
    await eventually(lambda: "before" in ctl.done)
    await client.create("ctl", cm("flaky"))
    await eventually(lambda: "flaky" in ctl.done)
    assert ctl.failures_left == 0 and ctl.queue.failures("flaky") == 0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # A second term (new leader) starts over from the informers: everything is reconciled again.
    ctl.done.clear()
    task = asyncio.create_task(ctl.run())
    await eventually(lambda: {"before", "flaky"} <= set(ctl.done))
    task.cancel()


# -- ClientSet -----------------------------------------------------------------------------------
async def test_clientset_serves_local_stores_and_404s_the_rest(cms: Store, leases: Store) -> None:
    cs = ClientSet([cms, leases])
    assert {(r.group, r.plural) for r in cs.resources()} == {("", "configmaps"), ("coordination.k8s.io", "leases")}
    assert isinstance(cs.client("", "configmaps"), LocalClient)
    assert cs.client("coordination.k8s.io", "leases", "v1").resource.kind == "Lease"
    with pytest.raises(APIError) as err:
        cs.client("example.com", "widgets")
    assert err.value.code == 404
    with pytest.raises(APIError):
        cs.client("", "configmaps", "v2")
    assert await cs.refresh() is False  # no delegate
    await cs.close()


# -- LeaderElector -------------------------------------------------------------------------------
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


async def _compete(elector: LeaderElector, leading: dict[str, bool]) -> None:
    async def lead() -> None:
        leading[elector.identity] = True
        await asyncio.Event().wait()

    def stopped() -> None:
        leading[elector.identity] = False

    await elector.run(lead, stopped)


async def test_leader_election_one_leads_and_the_other_takes_over(leases: Store) -> None:
    client = LocalClient(leases)
    leading: dict[str, bool] = {}
    a = LeaderElector(client, "test-lock", "host_a", lease_duration=2, renew_deadline=1.5, retry_period=0.2)
    b = LeaderElector(client, "test-lock", "host_b", lease_duration=2, renew_deadline=1.5, retry_period=0.2)
    ta = asyncio.create_task(_compete(a, leading))
    await eventually(lambda: leading.get("host_a"))
    tb = asyncio.create_task(_compete(b, leading))
    await asyncio.sleep(1.0)  # several renew periods: a keeps it, b never leads
    assert leading == {"host_a": True}
    lease = await client.get("kube-system", "test-lock")
    spec = lease["spec"]
    assert spec["holderIdentity"] == "host_a" and spec["leaseDurationSeconds"] == 2
    assert spec["leaseTransitions"] == 0
    assert MICRO_TIME.match(spec["renewTime"]) and MICRO_TIME.match(spec["acquireTime"])
    assert spec["renewTime"] > spec["acquireTime"]  # renewed
    # a stops cleanly: it releases, b takes over well within the lease duration.
    start = asyncio.get_running_loop().time()
    ta.cancel()
    await eventually(lambda: leading.get("host_b"), limit=2)
    assert asyncio.get_running_loop().time() - start < 2
    assert leading["host_a"] is False
    spec = (await client.get("kube-system", "test-lock"))["spec"]
    assert spec["holderIdentity"] == "host_b" and spec["leaseTransitions"] >= 1
    tb.cancel()


class _StartingServer(LocalClient):
    """Leases through a server that answers 503 to the first ``failures`` reads (still starting)."""

    def __init__(self, store: Store, failures: int) -> None:
        super().__init__(store)
        self.failures = failures

    async def get(self, namespace: str, name: str) -> dict[str, Any]:
        if self.failures:
            self.failures -= 1
            raise APIError(503, "ServiceUnavailable", "the delegate is unavailable")
        return await super().get(namespace, name)


async def test_leader_election_retries_soon_while_the_server_cannot_answer(leases: Store) -> None:
    # A gateway starting beside a core-api that does not serve yet: the first lease is taken
    # within a fraction of the retry period (50, 100, 200 ms waits), not a whole period later.
    client = _StartingServer(leases, failures=3)
    elector = LeaderElector(client, "starting-lock", "host_a", lease_duration=40, renew_deadline=30,
                            retry_period=5)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await asyncio.wait_for(elector.acquire(), 4)
    assert loop.time() - start < 2.5 and client.failures == 0
    # A lease held by another candidate is no error: that waits the retry period, as client-go.
    other = LeaderElector(LocalClient(leases), "starting-lock", "host_b", lease_duration=40,
                          renew_deadline=30, retry_period=5)
    assert await other._attempt() is False and other._failed is False
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(other.acquire(), 1)


async def test_leader_election_takes_over_from_a_crashed_holder(leases: Store) -> None:
    client = LocalClient(leases)
    leading: dict[str, bool] = {}
    a = LeaderElector(client, "crash-lock", "host_a", lease_duration=2, renew_deadline=1.5, retry_period=0.2,
                      release_on_cancel=False)
    b = LeaderElector(client, "crash-lock", "host_b", lease_duration=2, renew_deadline=1.5, retry_period=0.2)
    ta = asyncio.create_task(_compete(a, leading))
    await eventually(lambda: leading.get("host_a"))
    tb = asyncio.create_task(_compete(b, leading))
    await asyncio.sleep(0.5)
    assert not leading.get("host_b")
    ta.cancel()  # a crash: no release, the lease must expire
    start = asyncio.get_running_loop().time()
    await eventually(lambda: leading.get("host_b"), limit=4)
    waited = asyncio.get_running_loop().time() - start
    assert 1.0 < waited < 3.0, waited  # not before b saw the lease unrenewed for its duration
    tb.cancel()


async def test_leader_election_rejects_bad_timings(leases: Store) -> None:
    with pytest.raises(ValueError):
        LeaderElector(LocalClient(leases), "x", "id", lease_duration=2, renew_deadline=3, retry_period=1)


# -- HTTPClient and the delegate's discovery ---------------------------------------------------------
class _FakeDelegate:
    """A delegate link on a Unix socket serving one custom resource, with either discovery style."""

    def __init__(self, aggregated: bool) -> None:
        self.aggregated = aggregated
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.users: set[str] = set()

    def app(self) -> Any:
        from aiohttp import web

        def status(code: int, reason: str, message: str) -> web.Response:
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                      "message": message, "reason": reason, "code": code}, status=code)

        async def apis(request: web.Request) -> web.Response:
            self.users.add(request.headers.get("X-Remote-User", ""))
            if self.aggregated and "apidiscovery.k8s.io" in request.headers.get("Accept", ""):
                doc = {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": [{
                    "metadata": {"name": "example.com"}, "versions": [{"version": "v1", "resources": [{
                        "resource": "widgets", "responseKind": {"group": "example.com", "version": "v1",
                                                                "kind": "Widget"},
                        "scope": "Namespaced", "verbs": ["get", "list", "watch", "create", "delete"],
                        "subresources": [{"subresource": "status", "verbs": ["get"]}]}]}]}]}
                return web.Response(body=orjson.dumps(doc), headers={
                    "Content-Type": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"})
            return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
                "name": "example.com", "versions": [{"groupVersion": "example.com/v1", "version": "v1"}],
                "preferredVersion": {"groupVersion": "example.com/v1", "version": "v1"}}]})

        async def group_version(_request: web.Request) -> web.Response:
            return web.json_response({"kind": "APIResourceList", "groupVersion": "example.com/v1", "resources": [
                {"name": "widgets", "namespaced": True, "kind": "Widget", "verbs": ["get", "list", "create"]},
                {"name": "widgets/status", "namespaced": True, "kind": "Widget", "verbs": ["get"]}]})

        async def collection(request: web.Request) -> web.StreamResponse:
            ns = request.match_info["ns"]
            if request.method == "POST":
                body = await request.json()
                name = body["metadata"]["name"]
                if (ns, name) in self.objects:
                    return status(409, "AlreadyExists", f'widgets.example.com "{name}" already exists')
                body["metadata"].update(namespace=ns, resourceVersion="5")
                self.objects[(ns, name)] = body
                return web.json_response(body, status=201)
            if request.query.get("watch"):
                resp = web.StreamResponse()
                await resp.prepare(request)
                await resp.write(b'{"type":"ADDED","object":{"kind":"Widget","metadata":{"name":"w",'
                                 b'"resourceVersion":"6"}}}\n{"type":"ERROR","object":{"kind":"Status",'
                                 b'"code":410,"reason":"Expired","message":"too old resource version: 6 (7)"}}\n')
                return resp
            items = [o for (n, _), o in self.objects.items() if n == ns]
            return web.json_response({"kind": "WidgetList", "apiVersion": "example.com/v1",
                                      "metadata": {"resourceVersion": "9"}, "items": items})

        async def item(request: web.Request) -> web.Response:
            key = (request.match_info["ns"], request.match_info["name"])
            if key not in self.objects:
                return status(404, "NotFound", f'widgets.example.com "{key[1]}" not found')
            if request.method == "DELETE":
                return web.json_response(self.objects.pop(key))
            return web.json_response(self.objects[key])

        app = web.Application()
        app.router.add_get("/apis", apis)
        app.router.add_get("/apis/example.com/v1", group_version)
        app.router.add_route("*", "/apis/example.com/v1/namespaces/{ns}/widgets", collection)
        app.router.add_route("*", "/apis/example.com/v1/namespaces/{ns}/widgets/{name}", item)
        return app


@pytest.mark.parametrize("aggregated", [True, False])
async def test_clientset_finds_and_reaches_the_delegates_resources(cms: Store, tmp_path: Any,
                                                                   aggregated: bool) -> None:
    from aiohttp import web

    fake = _FakeDelegate(aggregated)
    runner = web.AppRunner(fake.app())
    await runner.setup()
    sock = str(tmp_path / "delegate.sock")
    await web.UnixSite(runner, sock).start()
    cs = ClientSet([cms], [f"unix://{sock}"])
    changes: list[int] = []

    async def changed() -> None:
        changes.append(len(cs.resources()))

    cs.on_change(changed)
    try:
        assert await cs.refresh() is True
        assert await cs.refresh() is False
        assert changes == [2]
        widgets = cs.client("example.com", "widgets")
        assert widgets.resource.kind == "Widget" and widgets.resource.namespaced
        assert widgets.resource.subresources == frozenset({"status"})
        assert isinstance(cs.client("", "configmaps"), LocalClient)  # local stores still win
        created = await widgets.create("ns", {"apiVersion": "example.com/v1", "kind": "Widget",
                                              "metadata": {"name": "w"}})
        assert created["metadata"]["namespace"] == "ns"
        with pytest.raises(APIError) as err:
            await widgets.create("ns", {"metadata": {"name": "w"}})
        assert err.value.code == 409 and err.value.reason == "AlreadyExists"
        items, rv, _c = await widgets.list("ns")
        assert [i["metadata"]["name"] for i in items] == ["w"] and rv == "9"
        assert await widgets.delete("ns", "w") is None
        with pytest.raises(APIError) as err:
            await widgets.get("ns", "w")
        assert err.value.code == 404 and err.value.message == 'widgets.example.com "w" not found'
        events: list[str] = []
        with pytest.raises(APIError) as err:
            async for ev in widgets.watch("5", "ns"):
                events.append(ev.type)
        assert events == ["ADDED"] and err.value.code == 410
        assert fake.users == {"system:kube-controller-manager"}
    finally:
        await cs.close()
        await runner.cleanup()


async def test_clientset_reports_an_unreachable_delegate(tmp_path: Any) -> None:
    cs = ClientSet([], [f"unix://{tmp_path}/nobody.sock"])
    with pytest.raises(APIError) as err:
        await cs.refresh()
    assert err.value.code == 503
    await cs.close()


# -- controllers as their own identities -------------------------------------------------------
class PolicySource:
    """RBAC objects as plain data (what the RBAC view keeps from its watch caches)."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    def _of(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def cluster_role(self, name: str) -> dict[str, Any] | None:
        return next((o for o in self._of("ClusterRole") if o["metadata"]["name"] == name), None)

    def role(self, namespace: str, name: str) -> dict[str, Any] | None:
        return next((o for o in self._of("Role") if o["metadata"]["name"] == name
                     and o["metadata"]["namespace"] == namespace), None)

    def cluster_role_bindings(self) -> list[dict[str, Any]]:
        return self._of("ClusterRoleBinding")

    def role_bindings(self, namespace: str) -> list[dict[str, Any]]:
        return [o for o in self._of("RoleBinding") if o["metadata"]["namespace"] == namespace]


def _policy() -> PolicySource:
    def ref(name: str) -> dict[str, str]:
        return {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
    return PolicySource([
        {"kind": "ClusterRole", "metadata": {"name": "writer"},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]},
        {"kind": "RoleBinding", "metadata": {"name": "writer", "namespace": "a"}, "roleRef": ref("writer"),
         "subjects": [{"kind": "ServiceAccount", "name": "cm-writer", "namespace": "kube-system"}]},
        {"kind": "ClusterRole", "metadata": {"name": "informers"},
         "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list", "watch"]}]},
        {"kind": "ClusterRoleBinding", "metadata": {"name": "informers"}, "roleRef": ref("informers"),
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                       "name": "system:kube-controller-manager"}]},
    ])


async def test_a_controller_acts_as_its_service_account_authorized_by_rbac(cms: Store) -> None:
    seen: list[str] = []

    class RecordUser:
        def handles(self, operation: str) -> bool:
            return True

        async def admit(self, attrs: Any) -> None:
            u = current_user.get()
            seen.append(f"{u.name if u else ''} {sorted(u.groups) if u else []}")

    cms.admission.mutating.append(RecordUser())
    cs = ClientSet([cms], authorizer=RBACAuthorizer(_policy()))
    writer = cs.for_controller("cm-writer")
    assert cs.for_controller("cm-writer") is writer
    client = writer.client("", "configmaps")
    await client.create("a", cm("x"))
    assert seen == ["system:serviceaccount:kube-system:cm-writer "
                    "['system:authenticated', 'system:serviceaccounts', 'system:serviceaccounts:kube-system']"]
    with pytest.raises(APIError) as err:
        await client.create("b", cm("x"))
    assert err.value.code == 403 and err.value.reason == "Forbidden"
    assert err.value.message == ('configmaps is forbidden: User "system:serviceaccount:kube-system:cm-writer" '
                                 'cannot create resource "configmaps" in API group "" in the namespace "b"')
    with pytest.raises(APIError) as err:  # no superuser: its role has no get
        await client.get("a", "x")
    assert err.value.code == 403 and err.value.details == {"name": "x", "kind": "configmaps"}
    with pytest.raises(APIError) as err:
        await client.list("a")
    assert err.value.code == 403
    # Its informers list and watch as kube-controller-manager (kube's shared informers).
    informer = Informer(client)
    await informer.start()
    try:
        await eventually(lambda: informer.get("a", "x") is not None)
    finally:
        await informer.stop()
    with pytest.raises(APIError) as err:  # kube-controller-manager itself may not write here
        await cs.client("", "configmaps").create("a", cm("y"))
    assert 'User "system:kube-controller-manager" cannot create' in err.value.message
    # Without an authorizer (nothing to ask) the clients are the plain ones.
    plain = ClientSet([cms]).for_controller("cm-writer").client("", "configmaps")
    assert isinstance(plain, LocalClient)
    await plain.create("b", cm("x"))
