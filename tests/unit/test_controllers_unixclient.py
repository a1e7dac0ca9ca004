"""The controllers' Unix-socket client (genericapi.controllers.unixclient) against real servers.

A scripted asyncio server shows what a framework would hide: which connection each request came
on, a kept connection the server closes while idle, a stream cut mid-body, a server too slow for
the request's deadline. The Transport over it reads answers, Status errors and watch lines as it
did with aiohttp, without importing aiohttp (checked in a fresh interpreter).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from genericapi.apimachinery.errors import APIError
from genericapi.controllers.transport import Transport
from genericapi.controllers.unixclient import UnixClient, UnixClosed, _Connection

Handler = Callable[[bytes, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]


class Scripted:
    """A Unix-socket HTTP server: ``handler(request head, reader, writer)`` answers one request and
    says whether to keep the connection. Records (connection number, request head) per request."""

    def __init__(self, path: Path, handler: Handler) -> None:
        self.path = str(path)
        self.handler = handler
        self.seen: list[tuple[int, bytes]] = []
        self.connections = 0
        self.server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> Scripted:
        self.server = await asyncio.start_unix_server(self._serve, self.path)
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length) if length else b""
                self.seen.append((number, head + body))
                if not await self.handler(head + body, reader, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def answer(status: int, body: bytes, ctype: str = "application/json") -> bytes:
    return b"HTTP/1.1 %d X\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s" % (
        status, ctype.encode(), len(body), body)


async def echo_path(request: bytes, _r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    target = request.split(b" ", 2)[1]
    writer.write(answer(200, b'{"path":"%s"}' % target))
    await writer.drain()
    return True


async def test_keeps_connections_and_reads_whole_and_chunked_answers(tmp_path: Path) -> None:
    async def handler(request: bytes, _r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        if b"/chunked" in request:
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        else:
            writer.write(answer(201, request.split(b"\r\n\r\n", 1)[1]))
        await writer.drain()
        return True

    async with Scripted(tmp_path / "s.sock", handler) as server:
        client = UnixClient(server.path)
        first = await client.request("POST", "/a", [("Accept", "application/json")], b'{"x":1}', total=5)
        assert (first.status, first.content_type, await first.read()) == (201, "application/json", b'{"x":1}')
        second = await client.request("GET", "/chunked", [], None, total=5)
        assert await second.read() == b"abcde"
        assert [n for n, _ in server.seen] == [1, 1]  # the same connection, kept alive
        head = server.seen[0][1]
        assert head.startswith(b"POST /a HTTP/1.1\r\nhost: localhost\r\nAccept: application/json\r\n")
        assert b"content-length: 7\r\n" in head
        assert b"content-length" not in server.seen[1][1]  # a GET without a body has no length
        client.close()


async def test_a_closed_kept_connection_is_replaced_for_replayable_methods_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def answer_then_close(request: bytes, _r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer(200, b"{}"))
        await writer.drain()
        return False  # a keep-alive answer, then the server closes as an idle timeout would

    async with Scripted(tmp_path / "s.sock", answer_then_close) as server:
        client = UnixClient(server.path)
        await (await client.request("GET", "/1", [], None, total=5)).read()
        await asyncio.sleep(0.05)  # the close has arrived: the kept connection is seen as unusable
        await (await client.request("GET", "/2", [], None, total=5)).read()
        assert [n for n, _ in server.seen] == [1, 2]
        # A close that is not yet seen when the request goes out: a GET is sent again on a new
        # connection; a POST (the server may have acted on it) is not.
        monkeypatch.setattr(_Connection, "usable", lambda _self: True)
        for method, replayed in (("GET", True), ("POST", False)):
            await (await client.request("GET", "/prime", [], None, total=5)).read()
            await asyncio.sleep(0.05)
            before = server.connections
            if replayed:
                ans = await client.request(method, "/again", [], b"{}", total=5)
                assert ans.status == 200 and server.connections == before + 1
                await ans.read()
            else:
                with pytest.raises(UnixClosed):
                    await client.request(method, "/again", [], b"{}", total=5)
                assert server.connections == before
        client.close()


async def test_a_cut_stream_and_a_slow_server(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def handler(request: bytes, _r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        if b"/slow" in request:
            await release.wait()
            return False
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\nline1\n\r\n")
        await writer.drain()
        return False  # cut before the last chunk

    async with Scripted(tmp_path / "s.sock", handler) as server:
        client = UnixClient(server.path)
        ans = await client.request("GET", "/watch", [], None)
        got = []
        with pytest.raises(UnixClosed):
            async for chunk in ans.chunks():
                got.append(chunk)
        assert got == [b"line1\n"]
        with pytest.raises(TimeoutError):
            await client.request("GET", "/slow", [], None, total=0.2)
        release.set()
        assert client._idle == []
        client.close()


async def test_transport_over_a_unix_link(tmp_path: Path) -> None:
    async def handler(request: bytes, _r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        target = request.split(b" ", 2)[1]
        if target.startswith(b"/api/v1/namespaces/x"):
            writer.write(answer(404, b'{"kind":"Status","code":404,"reason":"NotFound","message":"nope"}'))
        elif b"watch=1" in target:
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                         b"17\r\n{\"type\":\"ADDED\",\"n\":1}\n\r\n17\r\n{\"type\":\"ADDED\",\"n\":2}\n\r\n")
            await writer.drain()
            return False  # the server ends the watch by closing: the caller resumes
        else:
            writer.write(answer(200, b'{"target":"%s"}' % target))
        await writer.drain()
        return True

    async with Scripted(tmp_path / "s.sock", handler) as server:
        transport = Transport([f"unix://{server.path}"], user_agent="kube-controller-manager/v1.33.0")
        status, ctype, doc = await transport.request("GET", "/api/v1/pods",
                                                     params={"labelSelector": "a in (b,c)", "limit": "5"})
        assert (status, ctype) == (200, "application/json")
        assert doc == {"target": "/api/v1/pods?labelSelector=a%20in%20%28b%2Cc%29&limit=5"}
        with pytest.raises(APIError) as err:
            await transport.request("GET", "/api/v1/namespaces/x")
        assert (err.value.code, err.value.reason, err.value.message) == (404, "NotFound", "nope")
        lines: list[dict[str, Any]] = [line async for line in transport.stream_lines("/api/v1/pods", {"watch": "1"})]
        assert [line["n"] for line in lines] == [1, 2]
        head = server.seen[0][1]
        assert b"X-Remote-User: system:kube-controller-manager\r\n" in head
        assert b"User-Agent: kube-controller-manager/v1.33.0\r\n" in head
        await transport.close()
    with pytest.raises(APIError) as err:
        await Transport([f"unix://{tmp_path}/gone.sock"]).request("GET", "/api")
    assert err.value.code == 503


_NO_AIOHTTP = """
import asyncio, sys
from genericapi.controllers.transport import Transport

async def main(path):
    server = await asyncio.start_unix_server(serve, path)
    transport = Transport(["unix://" + path])
    print(await transport.request("GET", "/version"))
    await transport.close()
    server.close()

async def serve(reader, writer):
    await reader.readuntil(b"\\r\\n\\r\\n")
    writer.write(b"HTTP/1.1 200 OK\\r\\ncontent-length: 2\\r\\n\\r\\n{}")
    await writer.drain()
    writer.close()

asyncio.run(main(sys.argv[1]))
print("aiohttp" in sys.modules)
"""


def test_a_unix_link_does_not_import_aiohttp(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", _NO_AIOHTTP, str(tmp_path / "v.sock")], capture_output=True,
                         text=True, check=True, timeout=60).stdout.split("\n")
    assert out[:2] == ["(200, '', {})", "False"]
