"""OpenAPI of service-backed APIServices: kube-openapi's merge rules and the download/refresh controller.

The controller runs against a real HTTP backend (aiohttp on a free port) reached through the same
route objects the proxy uses; the merge functions against small hand-written Swagger documents.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import orjson
import pytest
from aggregator.apiservices.openapi_aggregation import LOCAL_ETAG_PREFIX, OpenAPIAggregation, SpecError, parse_swagger
from aggregator.apiservices.openapi_specmerge import (
    equal_modulo_gvks,
    filter_by_path_prefixes,
    merge_ignoring_path_conflicts,
)
from aggregator.apiservices.routes import ServiceRoutes, build_routes
from aggregator.openapi_merge import OpenAPIV2Cache
from aiohttp import web
from genericapi.apimachinery.serviceresolver import ServiceResolutionError, ServiceResolver

D = "#/definitions/"


def ok(ref: str, path_params: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"get": {"parameters": [{"name": p, "in": "path", "type": "string"} for p in path_params],
                    "responses": {"200": {"description": "OK", "schema": {"$ref": D + ref}}}}}


# -- merge rules --------------------------------------------------------------------------------
def test_filter_keeps_the_group_version_paths_and_what_they_use() -> None:
    doc: dict[str, Any] = {"swagger": "2.0",
           "paths": {"/apis/w.io/v1/things": ok("w.Thing"), "/apis/w.io/": ok("w.Group"), "/version/": ok("w.Ver")},
           "definitions": {"w.Thing": {"properties": {"spec": {"$ref": D + "w.Spec"}}}, "w.Spec": {"type": "object"},
                           "w.Group": {"type": "object"}, "w.Ver": {"type": "object"},
                           "w.Unreferenced": {"type": "string"}}}
    before = copy.deepcopy(doc)
    out = filter_by_path_prefixes(doc, ["/apis/w.io/v1/"])
    assert list(out["paths"]) == ["/apis/w.io/v1/things"]
    # Definitions only the dropped paths used go; ones no path ever used stay (kube's rule).
    assert sorted(out["definitions"]) == ["w.Spec", "w.Thing", "w.Unreferenced"]
    assert doc == before


def test_conflicting_definitions_are_renamed_and_references_follow() -> None:
    dest: dict[str, Any] = {"swagger": "2.0", "paths": {"/api/v1/pods": ok("meta.ObjectMeta")},
            "definitions": {"meta.ObjectMeta": {"type": "object", "properties": {"name": {}, "uid": {}}},
                            "meta.ObjectMeta_v2": {"type": "object", "description": "someone else's"}}}
    source: dict[str, Any] = {"swagger": "2.0", "paths": {"/apis/w.io/v1/things": ok("w.Thing")},
              "definitions": {"w.Thing": {"properties": {"metadata": {"$ref": D + "meta.ObjectMeta"}}},
                              "meta.ObjectMeta": {"type": "object", "properties": {"name": {}}}}}
    kept = copy.deepcopy(source)
    merge_ignoring_path_conflicts(dest, source)
    assert source == kept
    # _v2 is taken by a different schema: the next free suffix.
    assert dest["definitions"]["meta.ObjectMeta_v3"] == {"type": "object", "properties": {"name": {}}}
    assert dest["definitions"]["w.Thing"]["properties"]["metadata"] == {"$ref": D + "meta.ObjectMeta_v3"}
    assert dest["definitions"]["meta.ObjectMeta"]["properties"] == {"name": {}, "uid": {}}
    assert "/apis/w.io/v1/things" in dest["paths"]

    # A second source with the same trimmed schema reuses the renamed definition.
    other = {"paths": {"/apis/x.io/v1/xs": ok("meta.ObjectMeta")},
             "definitions": {"meta.ObjectMeta": {"type": "object", "properties": {"name": {}}}}}
    merge_ignoring_path_conflicts(dest, other)
    assert "meta.ObjectMeta_v4" not in dest["definitions"]
    assert dest["paths"]["/apis/x.io/v1/xs"]["get"]["responses"]["200"]["schema"] == {"$ref": D + "meta.ObjectMeta_v3"}


def test_definitions_equal_but_for_gvks_are_merged_with_joined_sorted_gvks() -> None:
    gvk = "x-kubernetes-group-version-kind"
    dest: dict[str, Any] = {"paths": {"/a/": ok("opts")},
            "definitions": {"opts": {"type": "object", gvk: [{"group": "z.io", "version": "v1", "kind": "Opts"}]}}}
    source: dict[str, Any] = {"paths": {"/b/": ok("opts")},
              "definitions": {"opts": {"type": "object", gvk: [{"group": "a.io", "version": "v1", "kind": "Opts"}]}}}
    assert equal_modulo_gvks(dest["definitions"]["opts"], source["definitions"]["opts"])
    merge_ignoring_path_conflicts(dest, source)
    assert [g["group"] for g in dest["definitions"]["opts"][gvk]] == ["a.io", "z.io"]
    assert "opts_v2" not in dest["definitions"]


def test_path_conflicts_keep_the_existing_path_and_drop_what_only_it_used() -> None:
    dest = {"paths": {"/apis/w.io/v1/things": ok("mine")}, "definitions": {"mine": {"type": "object"}}}
    source = {"paths": {"/apis/w.io/v1/things": ok("theirs"), "/apis/w.io/v1/others": ok("other")},
              "definitions": {"theirs": {"type": "string"}, "other": {"type": "object"}}}
    merge_ignoring_path_conflicts(dest, source)
    assert dest["paths"]["/apis/w.io/v1/things"] == ok("mine")
    assert "/apis/w.io/v1/others" in dest["paths"]
    assert sorted(dest["definitions"]) == ["mine", "other"]
    # Only conflicting paths, or no paths at all: nothing merged.
    merge_ignoring_path_conflicts(dest, {"paths": {"/apis/w.io/v1/things": ok("x")}, "definitions": {"x": {}}})
    merge_ignoring_path_conflicts(dest, {"definitions": {"y": {}}})
    assert sorted(dest["definitions"]) == ["mine", "other"]


def test_conflicting_parameters_are_renamed() -> None:
    dest: dict[str, Any] = {"paths": {}, "parameters": {"pretty": {"name": "pretty", "in": "query", "type": "string"}}}
    source = {"paths": {"/apis/w.io/v1/t": {"get": {"parameters": [{"$ref": "#/parameters/pretty"}]}}},
              "parameters": {"pretty": {"name": "pretty", "in": "query", "type": "boolean"}}}
    merge_ignoring_path_conflicts(dest, source)
    assert dest["parameters"]["pretty_v2"]["type"] == "boolean"
    assert dest["paths"]["/apis/w.io/v1/t"]["get"]["parameters"] == [{"$ref": "#/parameters/pretty_v2"}]


@pytest.mark.parametrize(("body", "message"), [
    (b'{"swagger": "2.0", "paths": {', "invalid JSON"),
    (b"[1, 2]", "expected a Swagger document"),
    (b'{"paths": []}', "paths: expected an object"),
    (b'{"definitions": {"A": 5}}', "definitions.A: expected an object"),
])
def test_bodies_that_are_not_swagger_documents_are_refused(body: bytes, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_swagger(body)


# -- the download controller against a real backend ----------------------------------------------
def swagger(version: str = "v1", description: str = "a thing") -> dict[str, Any]:
    return {"swagger": "2.0", "info": {"title": "w", "version": version},
            "paths": {f"/apis/w.io/{version}/things": ok("w.Thing"), "/apis/w.io/": ok("w.Group")},
            "definitions": {"w.Thing": {"description": description, "type": "object"},
                            "w.Group": {"type": "object"}}}


@dataclass
class Backend:
    v2: bytes = orjson.dumps(swagger())
    etag: str | None = '"E1"'
    v3_status: int = 200
    seen: list[dict[str, str]] = field(default_factory=list)
    port: int = 0

    async def openapi_v2(self, request: web.Request) -> web.Response:
        self.seen.append(dict(request.headers))
        if self.etag and request.headers.get("If-None-Match") == self.etag:
            return web.Response(status=304)
        headers = {"ETag": self.etag} if self.etag else {}
        return web.Response(body=self.v2, content_type="application/json", headers=headers)

    async def openapi_v3(self, request: web.Request) -> web.Response:
        index = {"paths": {"apis/w.io/v1": {"serverRelativeURL": "/openapi/v3/apis/w.io/v1?hash=H1"},
                           "version": {"serverRelativeURL": "/openapi/v3/version?hash=H2"}}}
        return web.json_response(index, status=self.v3_status)


@pytest.fixture
async def backend() -> AsyncIterator[Backend]:
    b = Backend()
    app = web.Application()
    app.router.add_get("/openapi/v2", b.openapi_v2)
    app.router.add_get("/openapi/v3", b.openapi_v3)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    b.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield b
    await runner.cleanup()


class FixedResolver:
    def __init__(self) -> None:
        self.urls: dict[str, str] = {}

    def resolve(self, namespace: str, name: str, port: int) -> str:
        if name not in self.urls:
            raise ServiceResolutionError("ServiceNotFound", f'service/{name} in "{namespace}" is not present')
        return self.urls[name]


def apiservice(group: str = "w.io", version: str = "v1", available: bool = True, service: str = "api",
               group_priority: int = 1000) -> dict[str, Any]:
    return {"metadata": {"name": f"{version}.{group}"},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": group_priority,
                     "versionPriority": 15, "insecureSkipTLSVerify": True,
                     "service": {"namespace": "ns", "name": service, "port": 443}},
            "status": {"conditions": [{"type": "Available", "status": "True" if available else "False"}]}}


async def until(probe: Callable[[], bool], within: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not probe():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


class Harness:
    def __init__(self, interval: float = 60.0) -> None:
        self.routes = ServiceRoutes()
        self.resolver = FixedResolver()
        self.agg = OpenAPIAggregation(lambda: self.routes, cast(ServiceResolver, self.resolver), interval=interval,
                                      timeout=5)

    def apply(self, *objs: dict[str, Any]) -> None:
        self.routes, _dropped = build_routes(objs, self.routes, None, lambda _s: [])
        self.agg.sync(list(objs), self.routes)

    async def close(self) -> None:
        await self.agg.stop()
        for route in self.routes.by_group_version.values():
            if route.proxy is not None:
                await route.proxy.close()


async def test_download_filters_uses_etags_and_lists_the_v3_entry(backend: Backend) -> None:
    h = Harness()
    h.resolver.urls["api"] = f"http://127.0.0.1:{backend.port}"
    h.apply(apiservice())
    try:
        assert await h.agg.refresh("v1.w.io")
        [doc] = h.agg.ordered_v2()
        assert list(doc["paths"]) == ["/apis/w.io/v1/things"] and "w.Group" not in doc["definitions"]
        assert h.agg.v3_entries() == {"apis/w.io/v1": {"serverRelativeURL": "/openapi/v3/apis/w.io/v1?hash=H1"}}
        assert h.agg.serves_v3("apis/w.io/v1") and not h.agg.serves_v3("version")
        assert backend.seen[0]["X-Remote-User"] == "system:aggregator" and "If-None-Match" not in backend.seen[0]
        generation = h.agg.generation
        assert await h.agg.refresh("v1.w.io")
        assert backend.seen[1]["If-None-Match"] == '"E1"'
        assert h.agg.generation == generation  # 304: unchanged

        backend.v2, backend.etag = orjson.dumps(swagger(description="changed")), '"E2"'
        assert await h.agg.refresh("v1.w.io")
        assert h.agg.ordered_v2()[0]["definitions"]["w.Thing"]["description"] == "changed"
        assert h.agg.generation == generation + 1
    finally:
        await h.close()


async def test_a_backend_without_etags_gets_a_local_hash_never_sent_back(backend: Backend) -> None:
    backend.etag = None
    h = Harness()
    h.resolver.urls["api"] = f"http://127.0.0.1:{backend.port}"
    h.apply(apiservice())
    try:
        assert await h.agg.refresh("v1.w.io")
        assert h.agg.states["v1.w.io"].v2_etag.startswith(LOCAL_ETAG_PREFIX)
        generation = h.agg.generation
        assert await h.agg.refresh("v1.w.io")
        assert "If-None-Match" not in backend.seen[1]
        assert h.agg.generation == generation  # same bytes, same local hash
    finally:
        await h.close()


async def test_failures_keep_the_last_document_and_removal_drops_it(backend: Backend,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    h = Harness()
    h.resolver.urls["api"] = f"http://127.0.0.1:{backend.port}"
    h.apply(apiservice())
    try:
        assert await h.agg.refresh("v1.w.io")
        good = h.agg.ordered_v2()
        backend.v2, backend.etag = b'{"swagger": "2.0", "paths": {', '"BROKEN"'
        with caplog.at_level(logging.WARNING):
            assert not await h.agg.refresh("v1.w.io")
        assert "v1.w.io" in caplog.text and "invalid JSON" in caplog.text
        assert h.agg.ordered_v2() == good
        backend.etag = '"E500"'
        backend.v2 = b"boom"
        h.apply(apiservice(available=False))  # kube's proxy would answer 503: not even asked
        asked = len(backend.seen)
        assert not await h.agg.refresh("v1.w.io")
        assert len(backend.seen) == asked and h.agg.states["v1.w.io"].last_error == "service unavailable"
        assert h.agg.ordered_v2() == good and h.agg.v3_entries()
        generation = h.agg.generation
        h.apply()
        assert h.agg.ordered_v2() == [] and h.agg.v3_entries() == {}
        assert h.agg.generation == generation + 1
    finally:
        await h.close()


async def test_a_backend_without_openapi_v3_lists_no_entry(backend: Backend) -> None:
    backend.v3_status = 404
    h = Harness()
    h.resolver.urls["api"] = f"http://127.0.0.1:{backend.port}"
    h.apply(apiservice())
    try:
        assert await h.agg.refresh("v1.w.io")
        assert h.agg.v3_entries() == {} and len(h.agg.ordered_v2()) == 1
    finally:
        await h.close()


async def test_the_loop_downloads_new_apiservices_retries_on_change_and_refreshes_periodically(
        backend: Backend) -> None:
    h = Harness(interval=1.5)
    h.agg.start()
    try:
        h.apply(apiservice())  # not resolvable yet: fails, backs off
        state = h.agg.states["v1.w.io"]
        await until(lambda: state.failures == 1)
        assert state.v2 is None and "is not present" in state.last_error
        h.resolver.urls["api"] = f"http://127.0.0.1:{backend.port}"
        h.apply(apiservice(available=False))
        h.apply(apiservice(available=True))  # a failing APIService that changed is retried at once
        await until(lambda: state.v2 is not None and state.failures == 0, 1.0)  # well before the 1.5 s backoff
        before = len(backend.seen)
        await until(lambda: len(backend.seen) > before)  # periodic refresh
    finally:
        await h.close()


async def test_documents_are_ordered_by_group_priority_then_name(backend: Backend) -> None:
    h = Harness()
    h.resolver.urls.update(api=f"http://127.0.0.1:{backend.port}")
    low, high = apiservice("low.io", group_priority=100), apiservice("high.io", group_priority=5000)
    same_group = apiservice("high.io", "v2", group_priority=10)
    for obj in (low, high, same_group):
        obj["spec"]["version"] = obj["metadata"]["name"].split(".")[0]
    h.apply(low, high, same_group)
    try:
        for state in h.agg.states.values():
            state.v2 = {"name": state.name}
        assert [d["name"] for d in h.agg.ordered_v2()] == ["v1.high.io", "v2.high.io", "v1.low.io"]
    finally:
        await h.close()


# -- the merged /openapi/v2 -----------------------------------------------------------------------
class Specs:
    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs
        self.generation = 0

    def ordered_v2(self) -> list[dict[str, Any]]:
        return self.docs


async def test_the_merged_document_adds_service_specs_and_follows_their_generation() -> None:
    member = {"swagger": "2.0", "info": {"title": "Kubernetes"}, "paths": {"/api/v1/pods": ok("core.Pod")},
              "definitions": {"core.Pod": {"type": "object"}, "w.Thing": {"type": "string"}}}
    specs = Specs([{"paths": {"/apis/w.io/v1/things": ok("w.Thing")},
                    "definitions": {"w.Thing": {"type": "object", "description": "from the backend"}}}])

    async def fetch() -> list[bytes | None]:
        return [orjson.dumps(member)]

    cache = OpenAPIV2Cache(fetch, services=lambda: specs)
    first = await cache.get(("m", 1))
    assert first is not None
    assert first.doc["definitions"]["w.Thing_v2"]["description"] == "from the backend"
    assert first.doc["paths"]["/apis/w.io/v1/things"]["get"]["responses"]["200"]["schema"]["$ref"] == D + "w.Thing_v2"
    assert await cache.get(("m", 1)) is first and cache.builds == 1
    specs.docs, specs.generation = [], 1
    second = await cache.get(("m", 1))
    assert second is not None and cache.builds == 2
    assert "/apis/w.io/v1/things" not in second.doc["paths"] and "w.Thing_v2" not in second.doc["definitions"]


async def test_a_failing_v3_index_does_not_hold_back_the_v2_document(backend: Backend) -> None:
    backend.v3_status = 500
    h = Harness()
    h.resolver.urls["api"] = f"http://127.0.0.1:{backend.port}"
    h.apply(apiservice())
    try:
        assert not await h.agg.refresh("v1.w.io")
        state = h.agg.states["v1.w.io"]
        assert state.v2 is not None and state.v3 is None and state.failures == 1
        assert "OpenAPI v3 index" in state.last_error and "500" in state.last_error
    finally:
        await h.close()
