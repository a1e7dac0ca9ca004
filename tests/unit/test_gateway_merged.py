"""The gateway's merged /apis and /openapi/v3 index (core-api's groups, then extensions-api's)."""

from __future__ import annotations

import orjson
from aggregator.merged import merge_apis, merge_openapi_index
from aggregator.routing import RoutingTable


def legacy(*groups: tuple[str, list[str]]) -> tuple[int, str, bytes]:
    docs = [{"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
             "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}} for g, vs in groups]
    return 200, "application/json", orjson.dumps({"kind": "APIGroupList", "apiVersion": "v1", "groups": docs})


def aggregated(*groups: tuple[str, list[str]]) -> tuple[int, str, bytes]:
    items = [{"metadata": {"name": g}, "versions": [{"version": v, "resources": []} for v in vs]}
             for g, vs in groups]
    return 200, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", orjson.dumps(
        {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})


def test_legacy_groups_are_concatenated_first_member_first() -> None:
    result = merge_apis([legacy(("apps", ["v1"])), legacy(("apps", ["v9"]), ("stable.example.com", ["v1", "v2"]))])
    assert result is not None
    ctype, body, served = result
    doc = orjson.loads(body)
    assert ctype == "application/json" and doc["kind"] == "APIGroupList"
    assert [g["name"] for g in doc["groups"]] == ["apps", "stable.example.com"]
    assert doc["groups"][0]["versions"][0]["version"] == "v1"
    assert served == [[("apps", "v1")], [("apps", "v9"), ("stable.example.com", "v1"), ("stable.example.com", "v2")]]


def test_aggregated_items_merge_and_a_down_member_is_skipped() -> None:
    result = merge_apis([aggregated(("apps", ["v1"])), None, aggregated(("x.io", ["v1"]))])
    assert result is not None
    ctype, body, served = result
    assert "APIGroupDiscoveryList" in ctype
    assert [i["metadata"]["name"] for i in orjson.loads(body)["items"]] == ["apps", "x.io"]
    assert served[1] == []
    assert merge_apis([None, (500, "text/plain", b"boom")]) is None


def test_openapi_index_union_and_routing_of_documents() -> None:
    a = (200, "application/json", orjson.dumps({"paths": {"api/v1": {"serverRelativeURL": "/a"}}}))
    b = (200, "application/json", orjson.dumps({"paths": {"apis/x.io/v1": {"serverRelativeURL": "/b"}}}))
    merged = merge_openapi_index([a, b])
    assert merged is not None and set(orjson.loads(merged)["paths"]) == {"api/v1", "apis/x.io/v1"}
    table = RoutingTable((("core",), ("ext",)), {("x.io", "v1"): 1})
    assert table.upstreams("/openapi/v3/apis/x.io/v1") == ["ext"]
    assert table.upstreams("/apis/x.io/v1/foos") == ["ext"]
    assert table.upstreams("/openapi/v3/apis/unknown.io/v1") == ["core"]
