"""LeanHttpProtocol (genericapi.server.leanhttp) served by uvicorn over real sockets: what uvicorn's own
httptools protocol gave the gateway still holds (keep-alive, pipelining, chunked bodies, 100-continue,
HEAD, streams, disconnects, malformed and oversized heads, back-pressure, graceful shutdown, TLS with
the client certificate in the scope)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from genericapi.server.certs import ensure_certificates, issue_client_certificate
from genericapi.server.leanhttp import MAX_HEADER_BYTES, LeanHttpProtocol
from starlette.types import Receive, Scope, Send


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


class App:
    """Answers by path: /echo (the body received, with how many receives it took), /stream (chunks
    until told to stop), /hold (waits for the client to go), /big (a large sized answer),
    /slow (answers after a delay); records what it saw."""

    def __init__(self) -> None:
        self.scopes: list[Scope] = []
        self.disconnected = asyncio.Event()
        self.release = asyncio.Event()
        self.stream_sent = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.scopes.append(scope)
        path = scope["path"]
        if path == "/echo":
            body, receives = b"", 0
            while True:
                msg = await receive()
                receives += 1
                body += msg.get("body", b"")
                if not msg.get("more_body"):
                    break
            await _answer(send, 200, b"%d:%s" % (receives, body))
        elif path == "/stream":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            for i in range(3):
                await send({"type": "http.response.body", "body": b'{"n":%d}\n' % i, "more_body": True})
                await asyncio.sleep(0.01)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        elif path == "/hold":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"x\n", "more_body": True})
            while (await receive())["type"] != "http.disconnect":
                pass
            self.disconnected.set()
        elif path == "/flood":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            piece = b"y" * 16384
            while not self.release.is_set():
                await send({"type": "http.response.body", "body": piece, "more_body": True})
                self.stream_sent += len(piece)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        elif path == "/slow":
            await asyncio.sleep(0.3)
            await _answer(send, 200, b"slow")
        else:
            await _answer(send, 200, path.encode())


async def _answer(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class Served:
    def __init__(self, server: _Server, task: asyncio.Task[None], app: App) -> None:
        self.server = server
        self.task = task
        self.app = app

    @property
    def port(self) -> int:
        return int(self.server.servers[0].sockets[0].getsockname()[1])

    def transports(self) -> list[asyncio.Transport]:
        return [c.transport for c in self.server.server_state.connections]  # type: ignore[attr-defined]


async def _serve(app: App, **options: Any) -> Served:
    config = uvicorn.Config(app, host="127.0.0.1", port=0, http=LeanHttpProtocol, lifespan="off", loop="none",
                            log_level="warning", access_log=False, server_header=False, proxy_headers=False,
                            **options)
    server = _Server(config)
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    return Served(server, task, app)


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    s = await _serve(App())
    yield s
    s.server.should_exit = True
    await asyncio.wait_for(s.task, 15)


async def _read_response(reader: asyncio.StreamReader) -> tuple[bytes, dict[bytes, bytes], bytes]:
    """One response: status line, headers, body (sized, chunked, or to EOF); 10 s at most."""
    return await asyncio.wait_for(_read_one(reader), 10)


async def _read_one(reader: asyncio.StreamReader) -> tuple[bytes, dict[bytes, bytes], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    headers = {}
    for line in lines[1:]:
        if line:
            k, _, v = line.partition(b":")
            headers[k.strip().lower()] = v.strip()
    status = lines[0]
    if b"content-length" in headers:
        return status, headers, await reader.readexactly(int(headers[b"content-length"]))
    if headers.get(b"transfer-encoding") == b"chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                return status, headers, body
            body += chunk[:-2]
    return status, headers, await reader.read()


async def test_keep_alive_reuses_one_connection(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    for path in (b"/a", b"/b", b"/c"):
        writer.write(b"GET %s HTTP/1.1\r\nhost: x\r\n\r\n" % path)
        status, headers, body = await _read_response(reader)
        assert (status, body) == (b"HTTP/1.1 200 OK", path)
        assert b"date" in headers and b"connection" not in headers
    assert len(served.server.server_state.connections) == 1
    assert [s["path"] for s in served.app.scopes] == ["/a", "/b", "/c"]
    writer.close()


async def test_pipelined_requests_are_answered_in_order(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\nGET /fast HTTP/1.1\r\nhost: x\r\n\r\n"
                 b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\n\r\nabc")
    answers = [(await _read_response(reader))[2] for _ in range(3)]
    assert answers == [b"slow", b"/fast", b"1:abc"]
    writer.close()


async def test_http10_and_connection_close_close_after_the_answer(served: Served) -> None:
    for request in (b"GET /x HTTP/1.0\r\n\r\n", b"GET /y HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"):
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
        writer.write(request)
        status, headers, body = await _read_response(reader)
        assert (status, body) == (b"HTTP/1.1 200 OK", request.split(b" ")[1])
        assert headers[b"connection"] == b"close"
        assert await reader.read() == b""  # closed by the server
        writer.close()


async def test_chunked_request_body_reaches_the_app(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"POST /echo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n")
    await asyncio.sleep(0.05)
    writer.write(b"4\r\ndefg\r\n0\r\n\r\n")
    status, _, body = await _read_response(reader)
    assert status == b"HTTP/1.1 200 OK" and body.endswith(b":abcdefg")
    writer.close()


async def test_expect_100_continue_is_answered_when_the_app_reads(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\nexpect: 100-continue\r\n\r\n")
    assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5) == b"HTTP/1.1 100 Continue\r\n\r\n"
    writer.write(b"hello")
    status, _, body = await _read_response(reader)
    assert (status, body) == (b"HTTP/1.1 200 OK", b"1:hello")
    writer.close()


async def test_head_has_the_headers_and_no_body(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"HEAD /abc HTTP/1.1\r\nhost: x\r\n\r\nGET /def HTTP/1.1\r\nhost: x\r\n\r\n")
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and b"content-length: 4" in head
    # The next bytes are the next answer's: the HEAD answer had no body.
    assert (await _read_response(reader))[2] == b"/def"
    writer.close()


async def test_streamed_answer_is_chunked_and_each_piece_flushed(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert b"transfer-encoding: chunked" in head
    # The first event arrives while the app is still sending (it is not held for the rest).
    await asyncio.wait_for(reader.readuntil(b'{"n":0}\n\r\n'), 5)
    rest = await reader.readuntil(b"0\r\n\r\n")
    assert b'{"n":2}' in rest
    writer.close()


async def test_client_disconnect_reaches_the_app(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"GET /hold HTTP/1.1\r\nhost: x\r\n\r\n")
    await reader.readuntil(b"x\n")
    writer.close()
    await asyncio.wait_for(served.app.disconnected.wait(), 5)


@pytest.mark.parametrize("request_bytes", [b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nbad header\r\n\r\n",
                                           b"GET /\xff HTTP/1.1\r\nhost: x\r\n\r\n"])
async def test_malformed_request_is_a_400_and_closed(served: Served, request_bytes: bytes) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(request_bytes)
    status, headers, body = await asyncio.wait_for(_read_response(reader), 5)
    assert status == b"HTTP/1.1 400 Bad Request"
    assert body == b"Invalid HTTP request received." and headers[b"connection"] == b"close"
    assert await reader.read() == b""
    writer.close()


async def test_oversized_head_is_gos_431(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n")
    filler = b"x-filler: " + b"a" * 8000 + b"\r\n"
    with contextlib.suppress(ConnectionError):
        for _ in range(MAX_HEADER_BYTES // len(filler) + 2):
            writer.write(filler)
            await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert answer.endswith(b"\r\n\r\n431 Request Header Fields Too Large")
    assert served.app.scopes == []
    writer.close()


async def test_a_head_just_under_the_limit_is_served(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"GET /ok HTTP/1.1\r\nhost: x\r\nx-filler: " + b"a" * (MAX_HEADER_BYTES - 5000) + b"\r\n\r\n")
    status, _, body = await asyncio.wait_for(_read_response(reader), 10)
    assert (status, body) == (b"HTTP/1.1 200 OK", b"/ok")
    writer.close()


async def test_a_reader_that_stops_reading_does_not_grow_the_servers_buffer(served: Served) -> None:
    """Back-pressure: a client that stops reading a stream stops the app's sends (the transport's
    buffer stays near its high-water mark, the app is not let write megabytes into memory)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port, limit=1024)
    transport = writer.transport
    transport.pause_reading()  # the client reads nothing from now on
    writer.write(b"GET /flood HTTP/1.1\r\nhost: x\r\n\r\n")
    await asyncio.sleep(0.5)
    sent = served.app.stream_sent
    await asyncio.sleep(0.5)
    assert served.app.stream_sent == sent, "the app kept sending to a client that reads nothing"
    buffered = max(t.get_write_buffer_size() for t in served.transports())
    # What is held is the transport's high-water mark plus one piece (the kernel's buffers aside).
    assert buffered <= 256 * 1024, buffered
    assert sent < 32 * 1024 * 1024
    served.app.release.set()
    transport.resume_reading()
    tail = b""
    while not tail.endswith(b"\r\n0\r\n\r\n"):  # the rest arrives once the client reads again
        piece = await asyncio.wait_for(reader.read(1 << 20), 30)
        assert piece, "the stream ended without its last chunk"
        tail = (tail + piece)[-16:]
    writer.close()


async def test_graceful_shutdown_finishes_in_flight_and_drops_idle() -> None:
    s = await _serve(App(), timeout_graceful_shutdown=10)
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", s.port)
    idle_writer.write(b"GET /first HTTP/1.1\r\nhost: x\r\n\r\n")
    await _read_response(idle_reader)
    busy_reader, busy_writer = await asyncio.open_connection("127.0.0.1", s.port)
    busy_writer.write(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n")
    await asyncio.sleep(0.05)
    s.server.should_exit = True
    status, headers, body = await asyncio.wait_for(_read_response(busy_reader), 5)
    assert (status, body) == (b"HTTP/1.1 200 OK", b"slow")
    assert headers[b"connection"] == b"close"
    assert await asyncio.wait_for(idle_reader.read(), 5) == b""
    await asyncio.wait_for(s.task, 10)
    idle_writer.close()
    busy_writer.close()


async def test_idle_keep_alive_connection_is_closed_after_the_timeout() -> None:
    s = await _serve(App(), timeout_keep_alive=1)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
        writer.write(b"GET /a HTTP/1.1\r\nhost: x\r\n\r\n")
        await _read_response(reader)
        await asyncio.sleep(0.6)
        writer.write(b"GET /b HTTP/1.1\r\nhost: x\r\n\r\n")  # activity moves the clock on
        assert (await _read_response(reader))[2] == b"/b"
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await asyncio.wait_for(reader.read(), 5) == b""
        assert 0.8 <= loop.time() - started <= 3
        writer.close()
    finally:
        s.server.should_exit = True
        await asyncio.wait_for(s.task, 10)


async def test_tls_puts_the_client_certificate_in_the_scope(tmp_path: Path) -> None:
    paths = ensure_certificates(tmp_path)
    cert, key = issue_client_certificate(tmp_path, "alice", ["dev"])
    (tmp_path / "alice.crt").write_bytes(cert)
    (tmp_path / "alice.key").write_bytes(key)
    crt, server_key = paths.pair("apiserver")
    s = await _serve(App(), ssl_certfile=crt, ssl_keyfile=server_key, ssl_ca_certs=paths.ca,
                     ssl_cert_reqs=ssl.CERT_OPTIONAL)
    try:
        ctx = ssl.create_default_context(cafile=paths.ca)
        ctx.check_hostname = False
        ctx.load_cert_chain(str(tmp_path / "alice.crt"), str(tmp_path / "alice.key"))
        reader, writer = await asyncio.open_connection("127.0.0.1", s.port, ssl=ctx)
        for path in (b"/one", b"/two"):
            writer.write(b"GET %s HTTP/1.1\r\nhost: x\r\n\r\n" % path)
            assert (await _read_response(reader))[2] == path
        scopes = s.app.scopes
        assert [sc["scheme"] for sc in scopes] == ["https", "https"]
        subject = scopes[0]["extensions"]["tls"]["peercert"]["subject"]
        assert (("commonName", "alice"),) in subject and (("organizationName", "dev"),) in subject
        anonymous = ssl.create_default_context(cafile=paths.ca)
        anonymous.check_hostname = False
        reader2, writer2 = await asyncio.open_connection("127.0.0.1", s.port, ssl=anonymous)
        writer2.write(b"GET /anon HTTP/1.1\r\nhost: x\r\n\r\n")
        assert (await _read_response(reader2))[2] == b"/anon"
        assert "extensions" not in s.app.scopes[-1]
        writer.close()
        writer2.close()
    finally:
        s.server.should_exit = True
        await asyncio.wait_for(s.task, 10)
