"""A long Table LIST is built and encoded BATCH rows at a time and streamed as a JSON list is
(genericapi.handlers.render): its bytes are exactly those of the whole Table encoded at once, for
every ``includeObject``, short and long lists, and with a continue token and remaining count."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from coreapi.strategies import strategy_class
from genericapi.apimachinery import tables
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.handlers.negotiation import Output
from genericapi.handlers.render import BATCH, render_list
from genericapi.handlers.responses import StreamedListResponse
from genericapi.registry.options import ListResult
from genericapi.registry.store import Store
from genericapi.storage.etcd import EtcdClient
from starlette.responses import Response

CM = ResourceInfo("", "v1", "ConfigMap", "configmaps", "configmap", True, ("cm",))
POD = ResourceInfo("", "v1", "Pod", "pods", "pod", True, ("po",))


def store(info: ResourceInfo) -> Store:
    """A real store with the kind's strategy (its printer); rendering reads only its resource info
    and strategy (nothing reaches etcd)."""
    return Store(info, strategy_class(info)(info), EtcdClient(["http://127.0.0.1:1"]), f"/render/{info.plural}")


def objects(info: ResourceInfo, n: int) -> list[dict[str, Any]]:
    """Objects without a creationTimestamp: every row's age is "<unknown>" whenever it is built."""
    out = []
    for i in range(n):
        obj: dict[str, Any] = {"apiVersion": "v1", "kind": info.kind,
                               "metadata": {"name": f"o-{i:05d}", "namespace": "ns", "uid": f"u-{i}",
                                            "resourceVersion": str(10 + i), "labels": {"i": str(i)}}}
        if info.kind == "Pod":
            obj["spec"] = {"containers": [{"name": "c", "image": "nginx"}]}
            obj["status"] = {"phase": "Pending"}
        else:
            obj["data"] = {"k": "v" * (i % 50)}
        out.append(obj)
    return out


def body_of(resp: Response) -> bytes:
    if isinstance(resp, StreamedListResponse):
        return b"".join(resp.body)
    return bytes(resp.body)


def sent(resp: Response) -> bytes:
    """What the response sends over ASGI."""
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    async def receive() -> dict[str, Any]:
        raise AssertionError("nothing is read")

    asyncio.run(resp({"type": "http", "method": "GET"}, receive, send))  # type: ignore[arg-type]
    start, *rest = messages
    body = b"".join(m.get("body", b"") for m in rest)
    assert dict(start["headers"])[b"content-length"] == str(len(body)).encode()
    return body


@pytest.mark.parametrize("info", [CM, POD], ids=["configmaps", "pods"])
@pytest.mark.parametrize("include", ["None", "Metadata", "Object"])
@pytest.mark.parametrize("n", [0, 1, BATCH, BATCH + 1, 3 * BATCH + 7])
def test_batched_table_bytes_are_the_whole_tables(info: ResourceInfo, include: str, n: int) -> None:
    items = [(o, orjson.dumps(o)) for o in objects(info, n)]
    result = ListResult(items, 1234, continue_token="tok" if n else "", remaining=5 if n else None)
    resp = render_list(store(info), result, Output("table", include_object=include), pretty=False)
    meta: dict[str, Any] = {"resourceVersion": "1234"}
    if n:
        meta.update({"continue": "tok", "remainingItemCount": 5})
    whole = orjson.dumps(tables.build_table(info.group, info.plural, [o for o, _ in items], include_object=include,
                                            list_meta=meta, printer=strategy_class(info).table_printer))
    assert body_of(resp) == whole
    assert sent(resp) == whole
    assert len(orjson.loads(whole)["rows"]) == n


def test_a_long_table_streams_and_pretty_stays_whole() -> None:
    items = [(o, orjson.dumps(o)) for o in objects(POD, 4000)]
    result = ListResult(items, 99)
    streamed = render_list(store(POD), result, Output("table"), pretty=False)
    assert isinstance(streamed, StreamedListResponse)
    pretty = render_list(store(POD), result, Output("table"), pretty=True)
    assert not isinstance(pretty, StreamedListResponse)
    assert orjson.loads(bytes(pretty.body)) == orjson.loads(body_of(streamed))


@pytest.mark.parametrize("n", [0, 1, BATCH, BATCH + 1, 3 * BATCH + 7])
def test_batched_partial_metadata_lists_are_the_whole_lists(n: int) -> None:
    items = [(o, orjson.dumps(o)) for o in objects(CM, n)]
    resp = render_list(store(CM), ListResult(items, 77, remaining=3), Output("partial"), pretty=False)
    whole = orjson.dumps({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                          "metadata": {"resourceVersion": "77", "remainingItemCount": 3},
                          "items": [{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                     "metadata": o["metadata"]} for o, _ in items]})
    assert body_of(resp) == whole
    assert sent(resp) == whole
    assert isinstance(resp, StreamedListResponse) == (len(whole) > 256 * 1024)


class _Tracked(dict[str, Any]):
    """A decoded object that counts how many of its kind are alive."""

    alive = 0
    most = 0

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        _Tracked.alive += 1
        _Tracked.most = max(_Tracked.most, _Tracked.alive)

    def __del__(self) -> None:
        _Tracked.alive -= 1


class _Entry:
    """A watch cache entry as a LIST from the cache holds it: JSON kept, decoded on demand."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def decode(self) -> dict[str, Any]:
        return _Tracked(orjson.loads(self.raw))


@pytest.mark.parametrize("output", [Output("table"), Output("table", include_object="Object"), Output("partial")],
                         ids=["table", "table-object", "partial"])
def test_a_long_list_from_cache_entries_decodes_one_batch_at_a_time(output: Output) -> None:
    # 20,000 cached ConfigMaps as a Table held 5x the answer's size when every entry was decoded
    # at once (test_list_memory): only about one batch of objects may be alive at any time, and the
    # bytes are those of the objects rendered whole.
    n = 4 * BATCH + 3
    objs = objects(CM, n)
    entries = [_Entry(orjson.dumps(o)) for o in objs]
    _Tracked.alive = _Tracked.most = 0
    resp = render_list(store(CM), ListResult(None, 5, entries=entries), output, pretty=False)
    streamed = body_of(resp)
    assert _Tracked.most <= BATCH + 1, _Tracked.most
    assert _Tracked.alive == 0
    whole = render_list(store(CM), ListResult([(o, orjson.dumps(o)) for o in objs], 5), output, pretty=False)
    assert streamed == body_of(whole)
