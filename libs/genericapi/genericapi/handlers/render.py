"""Rendering objects and lists as JSON, Table or PartialObjectMetadata(List)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
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


#: Rows (or PartialObjectMetadata items) of a Table (PartialObjectMetadataList) LIST built and
#: encoded at a time. A list of this many objects or fewer is built whole as ever; a longer one
#: holds its rows' JSON (the answer's size), never every row's dicts and the whole body besides
#: (4.4x a 20,000-ConfigMap Table's 10 MB in extra RSS, built whole). 500 rows are ~250 KB of JSON,
#: about one piece of a streamed list (LIST_PIECE_BYTES).
BATCH = 500


def _batched(head: dict[str, Any], key: str, result: ListResult,
             encode: Callable[[list[dict[str, Any]]], list[Any]]) -> Response:
    """``head`` (whose last key, ``key``, is an empty list) with that list filled by ``encode`` of
    ``BATCH`` objects at a time (each batch decoded from the cache's bytes only when reached, then
    dropped), each batch encoded once and spliced, then streamed as a JSON list is; the bytes are
    those of the whole document encoded at once."""
    start = dumps(head)
    suffix = b'"' + key.encode() + b'":[]}'
    assert start.endswith(suffix), start[-40:]
    pieces = []
    for batch in result.object_batches(BATCH):
        pieces.append(dumps(encode(batch))[1:-1])
        del batch  # before the next batch is decoded: one batch of objects alive at a time
    return list_response(start[:-2], pieces, b"]}")


def _table_list(store: Store, result: ListResult, out: Output, meta: dict[str, Any]) -> Response:
    """A long Table LIST: the Table without rows as the head, then the rows built ``BATCH`` objects
    at a time (one clock for every row's age)."""
    info = store.info
    now = datetime.now(UTC)

    def table(batch: list[dict[str, Any]]) -> dict[str, Any]:
        return tables.build_table(info.group, info.plural, batch, include_object=out.include_object, now=now,
                                  list_meta=meta, printer=store.strategy.table_printer)

    return _batched(table([]), "rows", result, lambda batch: table(batch)["rows"])


def render_list(store: Store, result: ListResult, out: Output, pretty: bool) -> Response:
    info = store.info
    meta = _list_meta(result)
    if out.mode == "table":
        if result.count > BATCH and not pretty:
            return _table_list(store, result, out, meta)
        table = tables.build_table(info.group, info.plural, [o for o, _ in result.items],
                                   include_object=out.include_object, list_meta=meta,
                                   printer=store.strategy.table_printer)
        return object_response(table, pretty=pretty)
    if out.mode == "partial":
        body: dict[str, Any] = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
                                "items": []}
        if result.count > BATCH and not pretty:
            return _batched(body, "items", result, lambda batch: [partial(o) for o in batch])
        body["items"] = [partial(o) for o, _ in result.items]
        return object_response(body, pretty=pretty)
    if pretty or out.yaml:
        doc = {"kind": info.list_kind, "apiVersion": info.api_version, "metadata": meta,
               "items": [o for o, _ in result.items]}
        return object_response(doc, pretty=pretty, as_yaml=out.yaml)
    # The hot path: items are already JSON (the cache's bytes); splice them without decoding, and
    # stream a big list rather than join it whole.
    head = dumps({"kind": info.list_kind, "apiVersion": info.api_version, "metadata": meta})
    return list_response(head[:-1] + b',"items":[', result.raws, b"]}")
