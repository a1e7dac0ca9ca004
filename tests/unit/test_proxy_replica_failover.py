"""The reverse proxy over several replicas when one dies in the middle of its answer.

A replica killed after it sent the status line of a sized answer, before the body ended: a GET
goes to the next replica (safe to repeat), a POST gets a 503 Status (the dead replica may have
acted on it: repeating it elsewhere could apply it twice). A replica whose socket refuses
connections is skipped for every method. Scripted servers on Unix sockets and TCP, no kubechain
processes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from genericapi.server.proxy import ReverseProxy
from starlette.types import Message


async def dying(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers with a 100-byte body but closes after 10 bytes (a replica SIGKILLed mid-answer)."""
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n0123456789")
    await writer.drain()
    writer.close()


async def healthy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            if length:
                await reader.readexactly(length)
            body = b'{"replica":"healthy"}'
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: keep-alive\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass


@pytest.fixture
async def unix_replicas(tmp_path: Path) -> AsyncIterator[list[str]]:
    servers = [await asyncio.start_unix_server(dying, str(tmp_path / "dying.sock")),
               await asyncio.start_unix_server(healthy, str(tmp_path / "healthy.sock"))]
    yield [f"unix://{tmp_path / 'dying.sock'}", f"unix://{tmp_path / 'healthy.sock'}"]
    for server in servers:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def tcp_replicas() -> AsyncIterator[list[str]]:
    servers = [await asyncio.start_server(dying, "127.0.0.1", 0), await asyncio.start_server(healthy, "127.0.0.1", 0)]
    yield [f"http://127.0.0.1:{s.sockets[0].getsockname()[1]}" for s in servers]
    for server in servers:
        server.close()
        await server.wait_closed()


async def call(upstreams: list[str], method: str, body: bytes = b"") -> tuple[int, dict[str, str], Any]:
    proxy = ReverseProxy(lambda _scope: upstreams)
    sent: list[Message] = []
    incoming = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Message:
        if incoming:
            return incoming.pop(0)
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": "/api/v1/namespaces/default/configmaps",
             "raw_path": b"/api/v1/namespaces/default/configmaps", "query_string": b"", "headers": []}
    try:
        await asyncio.wait_for(proxy(scope, receive, send), 10)
    finally:
        await proxy.close()
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert int(headers["content-length"]) == len(data)
    return start["status"], headers, json.loads(data)


@pytest.mark.parametrize("kind", ["unix", "tcp"])
async def test_get_goes_to_the_next_replica_when_one_dies_mid_answer(
        kind: str, unix_replicas: list[str], tcp_replicas: list[str]) -> None:
    upstreams = unix_replicas if kind == "unix" else tcp_replicas
    status, _headers, body = await call(upstreams, "GET")  # the dying replica is tried first
    assert status == 200 and body == {"replica": "healthy"}


@pytest.mark.parametrize("kind", ["unix", "tcp"])
async def test_post_is_not_repeated_after_a_replica_died_mid_answer(
        kind: str, unix_replicas: list[str], tcp_replicas: list[str]) -> None:
    upstreams = unix_replicas if kind == "unix" else tcp_replicas
    status, headers, body = await call(upstreams, "POST", b'{"metadata":{"name":"x"}}')
    assert status == 503 and headers["content-type"] == "application/json"
    assert body["kind"] == "Status" and body["reason"] == "ServiceUnavailable"
    assert body["message"].startswith("the backend serving this request is unavailable: ")


async def test_refused_connection_is_skipped_for_every_method(tmp_path: Path, unix_replicas: list[str]) -> None:
    (tmp_path / "gone.sock").touch()  # a socket file nobody listens on any more (SIGKILLed)
    upstreams = [f"unix://{tmp_path / 'gone.sock'}", unix_replicas[1]]
    for method in ("GET", "POST", "DELETE"):
        status, _headers, body = await call(upstreams, method, b"{}" if method == "POST" else b"")
        assert status == 200 and body == {"replica": "healthy"}


async def test_every_replica_dead_is_a_503(tmp_path: Path) -> None:
    status, _headers, body = await call([f"unix://{tmp_path / 'a.sock'}", f"unix://{tmp_path / 'b.sock'}"], "GET")
    assert status == 503 and body["code"] == 503
