"""The router's own sending and request (genericapi.server.router): a plain Starlette ``Response`` is sent
as the same ASGI messages its ``__call__`` sends (so the same bytes on the wire, HEAD included), any
other kind through its own call; background tasks still run; ``APIRequest`` parses a query as
Starlette does, and an empty one to nothing without parsing; discovery reads the Accept header as
Starlette's ``Headers.get`` does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from genericapi.apimachinery import errors as apierrors
from genericapi.handlers.responses import error_response, json_response, list_response, object_response
from genericapi.server.discovery import AGGREGATED_V2, DiscoveryDocuments
from genericapi.server.router import APIRequest, APIRouter, send_response
from starlette.background import BackgroundTask
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Message


def _scope(path: str = "/x", method: str = "GET", query: bytes = b"",
           headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": query,
            "headers": headers or [], "http_version": "1.1", "scheme": "http", "server": ("t", 80),
            "root_path": ""}


async def _receive() -> Message:
    """The request has no body and the client never goes away (a stream listens for that)."""
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def _messages(call: Any) -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await call(send)
    return sent


def _responses() -> list[Response]:
    warned = json_response(b'{"kind":"ConfigMap"}', 201, warnings=['a "quoted" warning', "another"])
    warned.headers["Vary"] = "Accept"
    return [
        Response(b'{"a":1}', media_type="application/json"),
        warned,
        object_response({"kind": "List", "items": []}, pretty=True),
        object_response({"kind": "Status"}, as_yaml=True),
        error_response(apierrors.APIError(429, "TooManyRequests", "slow down", {"retryAfterSeconds": 1})),
        error_response(apierrors.path_not_found()),
        Response(status_code=204),
        Response(b"", status_code=304),
        Response(memoryview(b"abcdef")[1:4], media_type="text/plain"),
        list_response(b'{"items":[', [b'{"n":%d,"pad":"%s"}' % (i, b"x" * 4096) for i in range(100)], b"]}"),
        StreamingResponse(iter([b"one", b"two"]), media_type="application/json"),
    ]


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_direct_send_gives_starlettes_messages(method: str) -> None:
    async def run() -> None:
        for theirs, ours in zip(_responses(), _responses(), strict=True):
            scope = _scope(method=method)
            expected = await _messages(lambda send, r=theirs, s=scope: r(s, _receive, send))
            got = await _messages(lambda send, r=ours, s=scope: send_response(r, s, _receive, send))
            assert got == expected, type(theirs).__name__
            assert got[0]["type"] == "http.response.start"
    asyncio.run(run())


def test_background_task_runs_after_the_body() -> None:
    order: list[str] = []

    async def run() -> None:
        async def send(message: Message) -> None:
            order.append(message["type"])

        response = Response(b"x", background=BackgroundTask(order.append, "background"))
        await send_response(response, _scope(), _receive, send)
    asyncio.run(run())
    assert order == ["http.response.start", "http.response.body", "background"]


@pytest.mark.parametrize("query", [
    b"", b"watch=1", b"labelSelector=a%3Db&limit=5&limit=6", b"dryRun=All&fieldManager=k&pretty", b"a=&=b&&c=%ZZ",
    "name=\u00e9".encode("latin-1"),
])
def test_api_request_query_is_starlettes(query: bytes) -> None:
    ours, theirs = APIRequest(_scope(query=query)), Request(_scope(query=query))
    assert ours.query_params == theirs.query_params
    assert list(ours.query_params.multi_items()) == list(theirs.query_params.multi_items())
    assert ours.query_params is ours.query_params  # parsed once


def test_an_empty_query_is_not_parsed() -> None:
    first, second = APIRequest(_scope()), APIRequest(_scope())
    assert first.query_params is second.query_params  # the one shared empty QueryParams
    assert first.query_params == QueryParams("") and len(first.query_params) == 0
    assert first.query_params.get("watch") is None


def _router() -> APIRouter:
    async def echo(request: Request) -> Response:
        return json_response(repr(sorted(request.query_params.multi_items())).encode())

    return APIRouter([], DiscoveryDocuments([], lambda g, v: (g, v)), extra_routes={"/echo": echo})


def test_router_answers_through_the_direct_send() -> None:
    router = _router()

    async def run() -> tuple[list[Message], list[Message], list[Message]]:
        echo = await _messages(lambda send: router(_scope("/echo", query=b"b=2&a=1"), _receive, send))
        empty = await _messages(lambda send: router(_scope("/echo/"), _receive, send))
        missing = await _messages(lambda send: router(_scope("/nothing"), _receive, send))
        return echo, empty, missing
    echo, empty, missing = asyncio.run(run())
    assert echo[1]["body"] == b"[('a', '1'), ('b', '2')]"
    assert empty[1]["body"] == b"[]"
    assert missing[0]["status"] == 404
    expected = error_response(apierrors.path_not_found())
    assert missing == [{"type": "http.response.start", "status": 404, "headers": expected.raw_headers},
                       {"type": "http.response.body", "body": expected.body}]


@pytest.mark.parametrize(("headers", "ctype"), [
    ([], "application/json"),
    ([(b"accept", f"{AGGREGATED_V2};g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList".encode())],
     AGGREGATED_V2),
    ([(b"user-agent", b"x"), (b"accept", b"application/json"),
      (b"accept", f"{AGGREGATED_V2};g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList".encode())],
     "application/json"),  # the first Accept header, as Starlette's Headers.get reads it
])
def test_discovery_reads_the_accept_header(headers: list[tuple[bytes, bytes]], ctype: str) -> None:
    router = _router()
    sent = asyncio.run(_messages(lambda send: router(_scope("/apis", headers=headers), _receive, send)))
    assert sent[0]["status"] == 200
    assert dict(sent[0]["headers"])[b"content-type"] == ctype.encode()
    assert dict(sent[0]["headers"])[b"vary"] == b"Accept"
