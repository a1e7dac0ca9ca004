"""A LIST's JSON body spliced from its items and streamed in pieces (genericapi.handlers.responses):
the bytes are exactly what the whole-body assembly gave, the Content-Length is exact, and serving a
25 MB list through uvicorn and the corked transport never holds more than a few pieces at once."""

from __future__ import annotations

import asyncio
import hashlib
import random
import socket
import tracemalloc
from typing import Any

import orjson
import pytest
import uvicorn
from genericapi.handlers.responses import (
    LIST_PIECE_BYTES,
    ListBody,
    StreamedListResponse,
    list_pieces,
    list_response,
)
from genericapi.server.corking import CorkedHttpToolsProtocol
from starlette.responses import Response

HEAD = b'{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":['
TAIL = b"]}"


def whole(items: list[bytes]) -> bytes:
    """The body as render_list assembled it before it streamed (``b",".join`` then concatenation)."""
    return HEAD + b",".join(items) + TAIL


def item(i: int, size: int) -> bytes:
    return orjson.dumps({"metadata": {"name": f"cm-{i}"}, "data": {"v": "x" * max(size - 40, 0)}})


CASES = {
    "empty": [],
    "one": [item(0, 300)],
    "many": [item(i, 1000) for i in range(2000)],
    "huge items over a piece": [item(0, 10), item(1, 3 * LIST_PIECE_BYTES), item(2, 10),
                                item(3, LIST_PIECE_BYTES), item(4, 2 * LIST_PIECE_BYTES)],
    "huge first and last": [item(0, LIST_PIECE_BYTES + 1), *(item(i, 500) for i in range(1, 900)),
                            item(900, LIST_PIECE_BYTES * 2)],
}


@pytest.mark.parametrize("name", list(CASES))
def test_pieces_join_to_the_whole_body_assembly(name: str) -> None:
    items = CASES[name]
    expected = whole(items)
    pieces = list(list_pieces(HEAD, items, TAIL))
    assert b"".join(pieces) == expected
    assert len(ListBody(HEAD, items, TAIL, len(expected))) == len(expected)
    # Pieces are bounded: joined ones stay under a piece plus one item; big items go out as they are.
    for piece in pieces:
        assert len(piece) < 2 * LIST_PIECE_BYTES or any(piece is raw for raw in items)
    for raw in items:
        if len(raw) >= LIST_PIECE_BYTES:
            assert any(piece is raw for piece in pieces), "a big item was copied into a join"


def test_pieces_of_any_size_join_to_the_same_bytes() -> None:
    rng = random.Random(15)
    for _ in range(200):
        items = [item(i, rng.choice((1, 40, 90, 300, 2000))) for i in range(rng.randrange(0, 40))]
        size = rng.choice((1, 2, 50, 100, 1000, 5000))
        assert b"".join(list_pieces(HEAD, items, TAIL, size)) == whole(items)


def test_small_lists_are_one_body_and_big_ones_stream() -> None:
    small = [item(i, 1000) for i in range(10)]
    resp = list_response(HEAD, [], TAIL)
    assert type(resp) is Response and resp.body == HEAD + TAIL
    resp = list_response(HEAD, small, TAIL)
    assert type(resp) is Response and resp.body == whole(small)
    assert resp.headers["content-length"] == str(len(whole(small)))
    assert resp.headers["content-type"] == "application/json"

    big = [item(i, 1000) for i in range(1000)]
    streamed = list_response(HEAD, big, TAIL)
    assert isinstance(streamed, StreamedListResponse)
    assert streamed.headers["content-length"] == str(len(whole(big)))
    assert streamed.headers["content-type"] == "application/json"
    assert len(streamed.body) == len(whole(big))  # what the request metrics read
    streamed.headers.append("Warning", '299 - "x"')  # handlers add headers to it as to any response
    assert streamed.headers.getlist("warning") == ['299 - "x"']


def test_a_streamed_list_sends_pieces_in_order_and_ends_once() -> None:
    items = CASES["huge first and last"]
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    async def receive() -> dict[str, Any]:
        raise AssertionError("a list response reads nothing")

    resp = list_response(HEAD, items, TAIL)
    asyncio.run(resp({"type": "http", "method": "GET"}, receive, send))  # type: ignore[arg-type]
    start, *body = messages
    assert start["type"] == "http.response.start" and start["status"] == 200
    assert dict(start["headers"])[b"content-length"] == str(len(whole(items))).encode()
    assert [m["more_body"] for m in body] == [True] * (len(body) - 1) + [False]
    assert body[-1]["body"] == b""
    assert b"".join(m["body"] for m in body) == whole(items)
    assert len(body) > 3


async def _read_response(port: int, path: str) -> tuple[bytes, int, str, int]:
    """GET over a real socket, hashing the body as it arrives (nothing held): head, length, sha256,
    and the most bytes one read returned."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 16)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")))
    digest = hashlib.sha256()
    got = biggest = 0
    while got < length:
        chunk = await reader.read(1 << 16)
        assert chunk, "the connection closed early"
        digest.update(chunk)
        got += len(chunk)
        biggest = max(biggest, len(chunk))
    writer.close()
    return head, got, digest.hexdigest(), biggest


def test_a_25_mb_list_through_uvicorn_and_the_corked_transport_stays_within_a_few_pieces() -> None:
    """The serving process's allocations while it answers a ~25 MB list (tracemalloc's peak beyond
    the items it already held) stay within a few pieces; joined whole, the body and its copies are
    2-3x 25 MB. The client hashes what it reads, holding nothing."""
    items = [item(i, 1250) for i in range(20_000)]
    expected = whole(items)
    want, length = hashlib.sha256(expected).hexdigest(), len(expected)
    del expected

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await list_response(HEAD, items, TAIL)(scope, receive, send)

    async def main() -> tuple[int, str, int]:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, http=CorkedHttpToolsProtocol, lifespan="off", log_level="error")
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        for _ in range(500):
            if server.started:
                break
            await asyncio.sleep(0.01)
        await _read_response(port, "/warm")
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            head, got, digest, _biggest = await _read_response(port, "/list")
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        server.should_exit = True
        await task
        return got, digest, peak

    got, digest, peak = asyncio.run(main())
    assert got == length and digest == want
    assert peak < 8 * LIST_PIECE_BYTES, f"serving the list allocated {peak} bytes at its peak"
