"""What the gateway forwards and where: request headers to upstreams, and the routing table.

The identity headers (``X-Remote-User`` / ``-Group`` / ``-Extra-*``) are trusted by the
backends, so a client's own copies must never pass the gateway, whatever their case; only the
gateway's authenticated identity (the ``extra`` headers) is added.
"""

from __future__ import annotations

from typing import Any

import pytest
from aggregator.routing import RoutingTable
from genericapi.server.proxy import HOP_BY_HOP, _forward_headers


def _scope(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http", "headers": list(headers)}


def test_hop_by_hop_headers_are_dropped() -> None:
    scope = _scope(
        (b"host", b"gateway:6443"),
        (b"connection", b"keep-alive"),
        (b"keep-alive", b"timeout=5"),
        (b"transfer-encoding", b"chunked"),
        (b"te", b"trailers"),
        (b"trailer", b"X-Checksum"),
        (b"upgrade", b"h2c"),
        (b"proxy-authorization", b"Basic Zm9vOmJhcg=="),
        (b"proxy-authenticate", b"Basic"),
        (b"content-length", b"12"),
        (b"accept", b"application/json"),
        (b"content-type", b"application/merge-patch+json"),
        (b"user-agent", b"kubectl/v1.33.0"),
    )
    assert _forward_headers(scope, []) == [
        ("accept", "application/json"),
        ("content-type", "application/merge-patch+json"),
        ("user-agent", "kubectl/v1.33.0"),
    ]


def test_header_names_are_matched_case_insensitively() -> None:
    scope = _scope((b"Connection", b"close"), (b"Transfer-Encoding", b"chunked"), (b"Accept", b"*/*"))
    assert _forward_headers(scope, []) == [("accept", "*/*")]


@pytest.mark.parametrize("name", [
    b"x-remote-user", b"X-Remote-User", b"X-REMOTE-GROUP", b"x-remote-extra-scopes",
    b"X-Remote-Extra-Authentication.kubernetes.io%2fpod-name", b"x-remote-uid",
])
def test_client_identity_headers_never_pass(name: bytes) -> None:
    forwarded = _forward_headers(_scope((name, b"system:admin"), (b"accept", b"*/*")),
                                 [("X-Remote-User", "alice")])
    assert forwarded == [("accept", "*/*"), ("X-Remote-User", "alice")]
    assert not any(v == "system:admin" for _, v in forwarded)


def test_similar_names_are_not_dropped() -> None:
    scope = _scope((b"x-remote", b"1"), (b"x-remoteuser", b"2"), (b"x-forwarded-for", b"10.0.0.1"),
                   (b"x-request-id", b"abc"))
    assert [k for k, _ in _forward_headers(scope, [])] == ["x-remote", "x-remoteuser", "x-forwarded-for",
                                                            "x-request-id"]


def test_repeated_headers_keep_their_order_and_latin1_values() -> None:
    scope = _scope((b"accept", b"a"), (b"cookie", b"x=1"), (b"accept", b"b"), (b"x-note", "café".encode("latin-1")))
    assert _forward_headers(scope, [("X-Remote-Group", "g1"), ("X-Remote-Group", "g2")]) == [
        ("accept", "a"), ("cookie", "x=1"), ("accept", "b"), ("x-note", "café"),
        ("X-Remote-Group", "g1"), ("X-Remote-Group", "g2"),
    ]


def test_no_headers() -> None:
    assert _forward_headers(_scope(), []) == []


def test_hop_by_hop_set_is_lower_case() -> None:
    assert all(name == name.lower() for name in HOP_BY_HOP)


# -- routing table --------------------------------------------------------------------------------

CORE = ("http://core-a", "http://core-b")
EXTENSIONS = ("http://ext-a",)


@pytest.fixture
def table() -> RoutingTable:
    return RoutingTable((CORE, EXTENSIONS), {
        ("", "v1"): 0,
        ("apps", "v1"): 0,
        ("apiextensions.k8s.io", "v1"): 1,
        ("example.com", "v1alpha1"): 1,
    })


@pytest.mark.parametrize(("path", "expected"), [
    ("/api/v1/namespaces/default/pods", CORE),
    ("/api/v1", CORE),
    ("/api/v1/", CORE),
    ("/apis/apps/v1/namespaces/ns/deployments/web/scale", CORE),
    ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", EXTENSIONS),
    ("/apis/example.com/v1alpha1/namespaces/x/widgets", EXTENSIONS),
    ("/apis/example.com/v1alpha1", EXTENSIONS),
    ("/apis/example.com/v1alpha1/watch/widgets", EXTENSIONS),
    # unknown group-versions, and anything that is not a group-version path, go to the first member
    ("/apis/example.com/v2/widgets", CORE),
    ("/apis/unknown.io/v1/things", CORE),
    ("/api/v2/pods", CORE),
    ("/apis/example.com", CORE),
    ("/apis", CORE),
    ("/api", CORE),
    ("/", CORE),
    ("", CORE),
    ("/healthz", CORE),
    # a group-version's OpenAPI v3 document comes from the member serving that group-version
    ("/openapi/v3/apis/example.com/v1alpha1", EXTENSIONS),
    ("/openapi/v3/apis/unknown.io/v1", CORE),
    ("/openapi/v3", CORE),
    ("/version", CORE),
])
def test_upstreams(table: RoutingTable, path: str, expected: tuple[str, ...]) -> None:
    assert table.upstreams(path) == list(expected)


def test_upstreams_returns_a_fresh_list(table: RoutingTable) -> None:
    first = table.upstreams("/api/v1/pods")
    first.append("http://evil")
    assert table.upstreams("/api/v1/pods") == list(CORE)


def test_no_members_means_no_upstreams() -> None:
    assert RoutingTable(()).upstreams("/api/v1/pods") == []


def test_empty_table_sends_everything_to_the_first_member() -> None:
    table = RoutingTable((CORE, EXTENSIONS))
    assert table.upstreams("/apis/apiextensions.k8s.io/v1/customresourcedefinitions") == list(CORE)


# -- the routing table and discovery from the members' control streams ----------------------

def _pushed(index: int, member: str, api_groups: dict[str, list[str]], generation: int = 1,
            core: tuple[str, ...] = ()) -> Any:
    from aggregator.control import MemberDiscovery

    def doc(groups: dict[str, list[str]]) -> dict[str, Any]:
        return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
                "items": [{"metadata": {"name": g} if g else {}, "versions": [{"version": v} for v in vs]}
                          for g, vs in groups.items()]}
    api = doc({"": list(core)}) if core else doc({})
    return MemberDiscovery(member, index, f"unix:///run/{member}", "inst", generation, api, doc(api_groups),
                           b"", b"")


def _gateway() -> Any:
    from aggregator.auth import Authenticator
    from aggregator.control import ControlChannel, MemberTargets
    from aggregator.server import Gateway, GatewayConfig

    gw = Gateway(GatewayConfig(members=[list(CORE), list(EXTENSIONS)]), Authenticator({}), None)
    gw.control = ControlChannel([MemberTargets("core-api", ("unix:///run/core",)),
                                 MemberTargets("extensions-api", ("unix:///run/ext",))], gw.on_discovery)
    return gw


def _deliver(gw: Any, update: Any) -> None:
    gw.control.replicas[update.index][0].latest = update
    gw.on_discovery(update)


async def test_routing_table_is_rebuilt_from_every_pushed_update() -> None:
    gw = _gateway()
    _deliver(gw, _pushed(0, "core-api", {"apps": ["v1"]}, core=("v1",)))
    assert gw.table.by_group_version == {("", "v1"): 0, ("apps", "v1"): 0}
    _deliver(gw, _pushed(1, "extensions-api", {"example.com": ["v1", "v1beta1"], "apps": ["v1"]}))
    # the first member in chain order keeps a group-version both serve
    assert gw.table.upstreams("/apis/apps/v1/deployments") == list(CORE)
    assert gw.table.upstreams("/apis/example.com/v1beta1/widgets") == list(EXTENSIONS)
    # a CRD removed: its group-version falls back to the chain's head
    _deliver(gw, _pushed(1, "extensions-api", {}, generation=2))
    assert ("example.com", "v1") not in gw.table.by_group_version
    assert gw.table.upstreams("/apis/example.com/v1/widgets") == list(CORE)


def test_streamed_discovery_needs_every_member() -> None:
    from aggregator import merged

    core = _pushed(0, "core-api", {"apps": ["v1"]}, core=("v1",))
    ext = _pushed(1, "extensions-api", {"apps": ["v2"], "example.com": ["v1", "v1beta1"]})
    assert merged.streamed_aggregated([core, None], "/apis") is None
    assert merged.streamed_aggregated([], "/apis") is None
    doc = merged.streamed_aggregated([core, ext], "/apis")
    assert doc is not None
    assert [(i["metadata"]["name"], [v["version"] for v in i["versions"]]) for i in doc["items"]] == \
        [("apps", ["v1"]), ("example.com", ["v1", "v1beta1"])]
    api = merged.streamed_aggregated([core, ext], "/api")
    assert api is not None and [v["version"] for v in api["items"][0]["versions"]] == ["v1"]
    legacy = merged.legacy_group_list(doc)
    assert legacy["kind"] == "APIGroupList"
    assert legacy["groups"][1] == {"name": "example.com",
                                   "versions": [{"groupVersion": "example.com/v1", "version": "v1"},
                                                {"groupVersion": "example.com/v1beta1", "version": "v1beta1"}],
                                   "preferredVersion": {"groupVersion": "example.com/v1", "version": "v1"}}
    ctype, body = merged.aggregated_response(doc, "v2beta1")
    assert "v=v2beta1" in ctype and b'"apidiscovery.k8s.io/v2beta1"' in body


def test_openapi_v2_documents_merge_first_member_wins() -> None:
    from aggregator.openapi_merge import merge_documents

    core = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "paths": {"/api/v1/pods": {"get": {}}}, "definitions": {"Pod": {"type": "object"}, "X": {"a": 1}},
            "security": [{"BearerToken": []}], "securityDefinitions": {"BearerToken": {"type": "apiKey"}}}
    ext = {"swagger": "2.0", "info": {"title": "other"}, "paths": {"/apis/e.com/v1/ws": {"get": {}}},
           "definitions": {"X": {"a": 2}, "com.e.v1.W": {"type": "object"}}}
    out = merge_documents([core, ext])
    assert out is not None
    assert out["info"]["title"] == "Kubernetes" and out["security"] == [{"BearerToken": []}]
    assert list(out["paths"]) == ["/api/v1/pods", "/apis/e.com/v1/ws"]
    assert out["definitions"]["X"] == {"a": 1} and "com.e.v1.W" in out["definitions"]
    assert merge_documents([]) is None


async def test_openapi_v2_cache_follows_generations_and_skips_partial_merges() -> None:
    import orjson
    from aggregator.openapi_merge import OpenAPIV2Cache

    answers: list[bytes | None] = [orjson.dumps({"swagger": "2.0", "paths": {"/a": {}}}), None]

    async def fetch() -> list[bytes | None]:
        return list(answers)

    cache = OpenAPIV2Cache(fetch)
    first = await cache.get(("g1",))
    assert first is not None and list(first.doc["paths"]) == ["/a"]
    await cache.get(("g1",))
    assert cache.builds == 2  # a member missing: never cached
    answers[1] = b"not json"
    await cache.get(("g1",))
    assert cache.builds == 3
    answers[1] = orjson.dumps({"swagger": "2.0", "paths": {"/b": {}}})
    full = await cache.get(("g1",))
    assert full is not None and list(full.doc["paths"]) == ["/a", "/b"]
    assert await cache.get(("g1",)) is full and cache.builds == 4
    assert await cache.get(None) is not full  # no generation known: merged again
    answers[1] = orjson.dumps({"swagger": "2.0", "paths": {}})
    changed = await cache.get(("g2",))
    assert changed is not None and list(changed.doc["paths"]) == ["/a"]
    assert (await changed.protobuf())[:1]  # encodes
    answers[0] = answers[1] = None
    assert await cache.get(("g3",)) is None
