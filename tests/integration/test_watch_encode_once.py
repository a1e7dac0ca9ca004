"""One encode per watch event, whatever the number of watchers (issue 15, kube's KEP-1152 serialize-once).

core-api is built in process on real etcd and its HTTP app serves watches on ConfigMaps to 1 and
then to 24 concurrent clients. Every JSON encode of the watched object on the server's side is
counted (the codec that turns stored bytes into served bytes, and the watch handler's own encoder),
and for Table watches every Table built for it: a change costs the same for 24 watchers as for one,
whether they ask for plain JSON, a Table (``kubectl get -w``), a Table embedding whole objects, or
PartialObjectMetadata (metadata informers), and every client still receives it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import orjson
import pytest
from coreapi.server import build_server
from genericapi.apimachinery import deepjson, tables
from genericapi.handlers import watch as watch_handler
from genericapi.registry import codec as codec_module
from genericapi.server.apiserver import GenericAPIServer, ServerConfig

pytestmark = pytest.mark.integration


class Counting:
    """A stand-in module for ``orjson``/``deepjson`` that counts encodes of one object by name."""

    def __init__(self, real: Any, name: str) -> None:
        self._real = real
        self._name = name
        self.count = 0
        self.loads = real.loads
        for attr in ("JSONDecodeError", "JSONEncodeError"):
            if hasattr(real, attr):
                setattr(self, attr, getattr(real, attr))

    def dumps(self, obj: Any, *args: Any, **kwargs: Any) -> bytes:
        if _mentions(obj, self._name):
            self.count += 1
        result: bytes = self._real.dumps(obj, *args, **kwargs)
        return result


class CountingTables:
    """A stand-in for the ``tables`` module that counts the Tables built of one object by name."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.count = 0

    def __getattr__(self, attr: str) -> Any:
        return getattr(tables, attr)

    def build_table(self, group: str, resource: str, objects: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        objects = list(objects)
        if any(_mentions(o, self._name) for o in objects):
            self.count += 1
        return tables.build_table(group, resource, objects, *args, **kwargs)


def _mentions(obj: Any, name: str) -> bool:
    """An object named ``name``, its PartialObjectMetadata, or a Table with its row."""
    if not isinstance(obj, dict):
        return False
    if (obj.get("metadata") or {}).get("name") == name:
        return True
    return obj.get("kind") == "Table" and any((row.get("cells") or [None])[0] == name
                                              for row in obj.get("rows") or [])


@pytest.fixture
async def core(etcd_server: Any) -> AsyncIterator[GenericAPIServer]:
    config = ServerConfig("core-api", [etcd_server.endpoint], etcd_prefix=f"/encode-{uuid.uuid4().hex[:8]}",
                          watch_cache_size=200)
    server = build_server(config, controllers=None)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


TABLE = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
         "application/json")  # kubectl get -w
METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
#: What each kind of watcher asks for: Accept header and extra query.
OUTPUTS = {
    "json": ("application/json", ""),
    "table": (TABLE, ""),
    "table-object": (TABLE, "&includeObject=Object"),
    "metadata": (METADATA, ""),
}


async def encodes_for_watchers(server: GenericAPIServer, watchers: dict[str, int],
                               patch: Callable[[str], list[Counting | CountingTables]],
                               ) -> tuple[int, dict[str, list[bytes]]]:
    """Encodes of one ConfigMap's create and update while clients watch (``watchers``: how many of
    each output of OUTPUTS); their bodies by output."""
    name = f"enc-{uuid.uuid4().hex[:8]}"
    counters = patch(name)
    transport = httpx.ASGITransport(app=server.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://core-api", timeout=60) as client:
        revision = (await client.get("/api/v1/namespaces/default/configmaps")).json()["metadata"]["resourceVersion"]
        url = f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={revision}&timeoutSeconds=4"
        store = server.by_resource[("", "configmaps")]
        registered = store.cache._live()._watchers
        before = len(registered)
        bodies = {output: [asyncio.ensure_future(client.get(url + OUTPUTS[output][1],
                                                             headers={"Accept": OUTPUTS[output][0]}))
                           for _ in range(n)]
                  for output, n in watchers.items()}
        # Every watch registered before the changes, so each receives them as they are dispatched
        # (a watch that started late would replay them from the window, encoded for itself).
        for _ in range(1500):
            if len(registered) >= before + sum(watchers.values()):
                break
            await asyncio.sleep(0.02)
        assert len(registered) >= before + sum(watchers.values()), "the watches did not start in 30 s"
        created = await store.create("default", {"apiVersion": "v1", "kind": "ConfigMap",
                                                 "metadata": {"name": name}, "data": {"k": "v"}})
        created["data"] = {"k": "w"}
        await store.update("default", name, created)
        responses = {output: await asyncio.gather(*futures) for output, futures in bodies.items()}
    return sum(c.count for c in counters), {o: [r.content for r in rs] for o, rs in responses.items()}


def _check_bodies(output: str, bodies: list[bytes]) -> None:
    """Every watcher got ADDED then MODIFIED, in the representation it asked for."""
    for body in bodies:
        events = [orjson.loads(line) for line in body.splitlines()]
        assert [e["type"] for e in events] == ["ADDED", "MODIFIED"], body
        objects = [e["object"] for e in events]
        if output == "json":
            assert [o["data"]["k"] for o in objects] == ["v", "w"]
        elif output == "metadata":
            assert {o["kind"] for o in objects} == {"PartialObjectMetadata"}
            assert "data" not in objects[0]
        else:
            assert {o["kind"] for o in objects} == {"Table"}
            assert [len(o["rows"]) for o in objects] == [1, 1]
            # kube's watch Table: column definitions on a watch's first event only (NoHeaders after).
            assert [c["name"] for c in objects[0]["columnDefinitions"]][:1] == ["Name"]
            assert objects[1]["columnDefinitions"] is None
            embedded = [o["rows"][0]["object"] for o in objects]
            if output == "table-object":
                assert [e["data"]["k"] for e in embedded] == ["v", "w"]
            else:
                assert {e["kind"] for e in embedded} == {"PartialObjectMetadata"}
    # What is shared is what each would have had: the watchers of one output got the same bytes.
    assert len(set(bodies)) == 1


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], list[Counting | CountingTables]]:
    def patch(name: str) -> list[Counting | CountingTables]:
        codec_count, handler_count, table_count = Counting(orjson, name), Counting(deepjson, name), CountingTables(name)
        monkeypatch.setattr(codec_module, "orjson", codec_count)
        monkeypatch.setattr(watch_handler, "deepjson", handler_count)
        monkeypatch.setattr(watch_handler, "tables", table_count)
        return [codec_count, handler_count, table_count]
    return patch


@pytest.mark.parametrize("output", list(OUTPUTS))
async def test_one_encode_per_event_whatever_the_watchers(core: GenericAPIServer, output: str,
                                                          counting: Callable[[str], list[Counting | CountingTables]],
                                                          ) -> None:
    one, bodies_one = await encodes_for_watchers(core, {output: 1}, counting)
    many, bodies_many = await encodes_for_watchers(core, {output: 24}, counting)
    _check_bodies(output, bodies_one[output])
    _check_bodies(output, bodies_many[output])
    assert one >= 2  # the count sees the encodes (one per change at least)
    assert many == one, f"{many} encodes for 24 {output} watchers, {one} for one"


async def test_each_output_encoded_once_beside_the_others(core: GenericAPIServer,
                                                          counting: Callable[[str], list[Counting | CountingTables]],
                                                          ) -> None:
    """Watchers of every output on one event stream: each output costs its own encode, once, whatever
    the watchers of it and of the others; and each gets its own representation."""
    one, _ = await encodes_for_watchers(core, {output: 1 for output in OUTPUTS}, counting)
    many, bodies = await encodes_for_watchers(core, {output: 6 for output in OUTPUTS}, counting)
    for output, got in bodies.items():
        _check_bodies(output, got)
    assert one >= 2 * len(OUTPUTS)
    assert many == one, f"{many} encodes for 6 watchers of each output, {one} for one of each"


async def test_selected_watchers_see_their_own_event_types(core: GenericAPIServer) -> None:
    """A selector turns a shared event into ADDED or DELETED for its watcher (the object entering or
    leaving the selection): the shared encodings are per event type, so each watcher still gets its own
    type, with the same Table row as the others. Leaving the selection is kube's DELETED: the previous
    object's content at the change's resourceVersion (cacheWatcher.convertToWatchEvent)."""
    name = f"sel-{uuid.uuid4().hex[:8]}"
    transport = httpx.ASGITransport(app=core.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://core-api", timeout=60) as client:
        revision = (await client.get("/api/v1/namespaces/default/configmaps")).json()["metadata"]["resourceVersion"]
        url = f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={revision}&timeoutSeconds=4"
        store = core.by_resource[("", "configmaps")]
        registered = store.cache._live()._watchers
        before = len(registered)
        plain = [asyncio.ensure_future(client.get(url, headers={"Accept": TABLE})) for _ in range(3)]
        selected = [asyncio.ensure_future(client.get(url + "&labelSelector=tier%3Dweb", headers={"Accept": accept}))
                    for accept in (TABLE, TABLE, TABLE, "application/json", "application/json")]
        for _ in range(1500):
            if len(registered) >= before + 8:
                break
            await asyncio.sleep(0.02)
        obj = await store.create("default", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                                             "data": {"k": "1"}})
        obj["metadata"]["labels"] = {"tier": "web"}
        obj = await store.update("default", name, obj)
        entered = obj["metadata"]["resourceVersion"]
        obj["metadata"]["labels"] = {"tier": "db"}
        obj["data"] = {"k": "2"}
        obj = await store.update("default", name, obj)
        left = obj["metadata"]["resourceVersion"]
        got_plain = [r.content for r in await asyncio.gather(*plain)]
        got_selected = [r.content for r in await asyncio.gather(*selected)]

    def events(body: bytes) -> list[tuple[str, str, dict[str, str], str]]:
        out = []
        for line in body.splitlines():
            event = orjson.loads(line)
            obj = event["object"]
            if obj["kind"] == "Table":
                obj = obj["rows"][0]["object"]
            meta = obj["metadata"]
            out.append((event["type"], meta["name"], meta.get("labels", {}), meta["resourceVersion"]))
        return out

    for body in got_plain:
        assert [e[:3] for e in events(body)] == [("ADDED", name, {}), ("MODIFIED", name, {"tier": "web"}),
                                                 ("MODIFIED", name, {"tier": "db"})]
    for body in got_selected:
        assert events(body) == [("ADDED", name, {"tier": "web"}, entered), ("DELETED", name, {"tier": "web"}, left)]
    deleted = orjson.loads(got_selected[-1].splitlines()[1])["object"]
    assert deleted["data"] == {"k": "1"}  # the content before the change
    assert len(set(got_selected[:3])) == 1 and len(set(got_selected[3:])) == 1
