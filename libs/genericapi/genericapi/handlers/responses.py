"""Encoding responses: JSON bodies (``pretty``), Status errors, and the headers they carry; a big
LIST's body spliced from its items' JSON and sent piece by piece (``list_response``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import orjson
import yaml
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from genericapi.apimachinery import deepjson
from genericapi.apimachinery.errors import APIError

JSON_TYPE = "application/json"


def dumps(obj: Any, pretty: bool = False) -> bytes:
    """JSON of a response body; deepjson (its fallback) only for values past orjson's 254 levels,
    orjson inline otherwise (no extra call on the hot path)."""
    if pretty:
        return deepjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n"
    try:
        return orjson.dumps(obj)
    except orjson.JSONEncodeError:
        return deepjson.dumps(obj)


def json_response(body: bytes, status: int = 200, warnings: list[str] | None = None,
                  content_type: str = JSON_TYPE) -> Response:
    resp = Response(body, status_code=status, media_type=content_type)
    if warnings:
        for w in warnings:
            resp.headers.append("Warning", format_warning(w))
    return resp


def object_response(obj: Any, status: int = 200, pretty: bool = False, as_yaml: bool = False,
                    warnings: list[str] | None = None) -> Response:
    if as_yaml:
        text = yaml.safe_dump(obj, default_flow_style=False, sort_keys=False)
        return json_response(text.encode(), status, warnings, "application/yaml")
    return json_response(dumps(obj, pretty), status, warnings)


def error_response(err: APIError, pretty: bool = False) -> Response:
    body = dumps(err.status(), pretty) if pretty else err.body()
    resp = Response(body, status_code=err.code, media_type=JSON_TYPE)
    for k, v in err.headers.items():
        resp.headers[k] = v
    return resp


def format_warning(text: str) -> str:
    """An RFC 7234 warning header value as kube-apiserver writes it (code 299, agent "-")."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


#: About this many bytes of a LIST's body are joined per send (``list_pieces``). A list this big or
#: smaller is answered as one body, as any response; a bigger one is never held whole: the memory
#: it costs beyond its items' shared bytes is a piece or two in flight. 256 KiB makes a 25 MB list
#: ~100 sends (a send and a loop turn are microseconds, nothing next to copying the piece), and a
#: piece is about what a socket takes at once (Linux's default send buffer is 208 KiB), so the
#: writer pauses on the transport's flow control instead of piling pieces up.
LIST_PIECE_BYTES = 256 * 1024


def list_pieces(head: bytes, items: Sequence[bytes], tail: bytes,
                size: int = LIST_PIECE_BYTES) -> Iterator[bytes]:
    """``head + b",".join(items) + tail`` in pieces of about ``size`` bytes (their concatenation is
    exactly that). An item of ``size`` bytes or more is yielded as it is: the cache's bytes are
    sent, never copied into a join."""
    parts = [head]
    filled = len(head)
    comma = False
    for raw in items:
        if comma:
            parts.append(b",")
            filled += 1
        comma = True
        if len(raw) >= size:
            yield b"".join(parts)
            yield raw
            parts, filled = [], 0
            continue
        parts.append(raw)
        filled += len(raw)
        if filled >= size:
            yield b"".join(parts)
            parts, filled = [], 0
    parts.append(tail)
    yield b"".join(parts)


class ListBody:
    """A LIST's body not yet joined: ``len()`` is its byte count (what a ``Response.body``'s length
    says, read by the request metrics), iterating yields its pieces (``list_pieces``)."""

    __slots__ = ("head", "items", "length", "tail")

    def __init__(self, head: bytes, items: Sequence[bytes], tail: bytes, length: int) -> None:
        self.head, self.items, self.tail, self.length = head, items, tail, length

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[bytes]:
        return list_pieces(self.head, self.items, self.tail)


class StreamedListResponse(Response):
    """A big LIST's JSON answered with its exact Content-Length and sent piece by piece, each piece
    joined only when the previous one has been handed to the transport (kube 1.33 streams a list
    item by item: StreamingCollectionEncodingToJSON). Everything that can fail has failed before
    this is built (the items are in hand), so the status line never promises what is not sent."""

    body: ListBody  # type: ignore[assignment]  # sized like bytes; never joined whole

    def __init__(self, body: ListBody, status: int = 200) -> None:
        self.status_code = status
        self.background = None
        self.body = body
        self.raw_headers = [(b"content-length", str(len(body)).encode()),
                            (b"content-type", JSON_TYPE.encode())]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        for piece in self.body:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            # One loop turn per piece: it reaches the socket (or the transport pauses us) before
            # the next is joined, and other requests run in between.
            await asyncio.sleep(0)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def list_response(head: bytes, items: Sequence[bytes], tail: bytes) -> Response:
    """``head + b",".join(items) + tail`` as a JSON response: one body when it is small (most
    LISTs), streamed in pieces (``StreamedListResponse``) when it is bigger than one piece."""
    length = len(head) + sum(map(len, items)) + len(items) + len(tail)  # a comma too many: exact below
    if length <= LIST_PIECE_BYTES:
        return Response(head + b",".join(items) + tail, media_type=JSON_TYPE)
    return StreamedListResponse(ListBody(head, items, tail, length - 1 if items else length))
