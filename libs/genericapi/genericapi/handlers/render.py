"""Rendering objects and lists as JSON, Table or PartialObjectMetadata(List)."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from genericapi.apimachinery import tables
from genericapi.registry.options import ListResult
from genericapi.registry.store import Store

from .negotiation import Output
from .responses import dumps, list_response, object_response


def partial(obj: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata") or {}}


def render_object(store: Store, obj: dict[str, Any], out: Output, pretty: bool,
                  status: int = 200) -> Response:
    if out.mode == "table":
        info = store.info
        table = tables.build_table(info.group, info.plural, [obj], include_object=out.include_object,
                                   printer=store.strategy.table_printer)
        return object_response(table, status, pretty=pretty)
    if out.mode == "partial":
        return object_response(partial(obj), status, pretty=pretty)
    return object_response(obj, status, pretty=pretty, as_yaml=out.yaml)


def _list_meta(result: ListResult) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": str(result.revision)} if result.revision else {}
    if result.continue_token:
        meta["continue"] = result.continue_token
    if result.remaining is not None:
        meta["remainingItemCount"] = result.remaining
    return meta


def render_list(store: Store, result: ListResult, out: Output, pretty: bool) -> Response:
    info = store.info
    meta = _list_meta(result)
    if out.mode == "table":
        table = tables.build_table(info.group, info.plural, [o for o, _ in result.items],
                                   include_object=out.include_object, list_meta=meta,
                                   printer=store.strategy.table_printer)
        return object_response(table, pretty=pretty)
    if out.mode == "partial":
        body = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
                "items": [partial(o) for o, _ in result.items]}
        return object_response(body, pretty=pretty)
    if pretty or out.yaml:
        doc = {"kind": info.list_kind, "apiVersion": info.api_version, "metadata": meta,
               "items": [o for o, _ in result.items]}
        return object_response(doc, pretty=pretty, as_yaml=out.yaml)
    # The hot path: items are already JSON (the cache's bytes); splice them without decoding, and
    # stream a big list rather than join it whole.
    head = dumps({"kind": info.list_kind, "apiVersion": info.api_version, "metadata": meta})
    return list_response(head[:-1] + b',"items":[', [raw for _, raw in result.items], b"]}")
