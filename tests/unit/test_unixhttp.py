"""The gateway's Unix-socket HTTP client against a scripted server (no kubechain processes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from genericapi.server.unixhttp import UnixHTTPPool, UpstreamClosed

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], "asyncio.Future[None] | object"]


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    body = await reader.readexactly(length) if length else b""
    return head + body


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[str, list[bytes], list[int]]]:
    path = str(tmp_path / "s.sock")
    requests: list[bytes] = []
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            while True:
                req = await read_request(reader)
                requests.append(req)
                if b"/stream" in req:
                    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                    for part in (b"one\n", b"two\n"):
                        writer.write(b"%x\r\n%s\r\n" % (len(part), part))
                        await writer.drain()
                        await asyncio.sleep(0.05)
                    writer.write(b"0\r\n\r\n")
                elif b"/close" in req:
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
                    await writer.drain()
                    writer.close()
                    return
                else:
                    body = b'{"ok":true}'
                    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n"
                                 b"content-length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    srv = await asyncio.start_unix_server(handle, path)
    yield path, requests, connections
    srv.close()
    await srv.wait_closed()


async def test_sized_response_and_connection_reuse(server: tuple[str, list[bytes], list[int]]) -> None:
    path, requests, connections = server
    pool = UnixHTTPPool(path)
    for _ in range(3):
        resp = await pool.request("POST", "/x?y=1", [("x-remote-user", "alice")], b'{"a":1}')
        assert resp.status == 404 and resp.sized
        assert await resp.read() == b'{"ok":true}'
        assert (b"content-type", b"application/json") in resp.headers
    assert len(connections) == 1  # keep-alive: one connection for all three
    assert requests[0].startswith(b"POST /x?y=1 HTTP/1.1\r\n")
    assert b"x-remote-user: alice\r\n" in requests[0] and b"content-length: 7\r\n" in requests[0]
    assert requests[0].endswith(b'{"a":1}')
    pool.close()


async def test_chunked_body_streams_chunk_by_chunk(server: tuple[str, list[bytes], list[int]]) -> None:
    path, _requests, _connections = server
    pool = UnixHTTPPool(path)
    resp = await pool.request("GET", "/stream", [], b"")
    assert resp.status == 200 and not resp.sized
    got = [chunk async for chunk in resp.iter_chunks()]
    assert got == [b"one\n", b"two\n"]
    again = await pool.request("GET", "/other", [], b"")  # the stream's connection is reused
    assert again.status == 404 and await again.read() == b'{"ok":true}'
    pool.close()


async def test_connection_close_is_not_reused(server: tuple[str, list[bytes], list[int]]) -> None:
    path, _requests, connections = server
    pool = UnixHTTPPool(path)
    resp = await pool.request("GET", "/close", [], b"")
    assert await resp.read() == b"ok"
    resp2 = await pool.request("GET", "/other", [], b"")
    assert resp2.status == 404 and await resp2.read()
    assert len(connections) == 2
    pool.close()


async def test_missing_socket_raises_os_error(tmp_path: Path) -> None:
    pool = UnixHTTPPool(str(tmp_path / "nobody.sock"))
    with pytest.raises(OSError):
        await pool.request("GET", "/", [], b"")


async def test_backend_dying_mid_response(tmp_path: Path) -> None:
    path = str(tmp_path / "dies.sock")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await writer.drain()
        writer.close()

    srv = await asyncio.start_unix_server(handle, path)
    try:
        pool = UnixHTTPPool(path)
        resp = await pool.request("GET", "/", [], b"")
        chunks = resp.iter_chunks()
        assert await chunks.__anext__() == b"hello"
        with pytest.raises(UpstreamClosed):
            await chunks.__anext__()
    finally:
        srv.close()
        await srv.wait_closed()
