"""The reverse proxy streams bodies both ways with bounded buffers (issue 15), on real sockets.

A backend (an ASGI app under uvicorn, on a Unix socket and on TCP: both proxy clients) and the
proxy under uvicorn with the gateway's own HTTP protocol, in this process; aiohttp as the client.
Each test is arranged so that whole-body buffering in the proxy cannot pass it: the backend holds
back the second half of a 4 MB answer until the client has 1 MB of it; the client holds back
the rest of a 2.5 MB upload until the backend has 512 KiB of it. Also: a backend dying mid-body
cuts the client's answer off (never a wrong complete one) and the proxy serves the next request;
a chunked upload crossing the body limit is kube's 413 and the backend never sees it whole; a
client leaving mid-body frees the backend's connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import uvicorn
from genericapi.apimachinery import errors as apierrors
from genericapi.server.corking import CorkedHttpToolsProtocol
from genericapi.server.proxy import BUFFER_BYTES, AbortHandler, ClientGone, ReverseProxy, _read_body, _StreamedBody
from starlette.types import Receive, Scope, Send
from support.streaming_backend import pattern, send_pieces, start_sized

MB = 1 << 20
LIMIT = 3 * MB  # the gateway's body limit (genericapi.handlers.body.MAX_BODY_BYTES)
BIG = 4 * MB
DEADLINE = 30.0



class Backend:
    """The upstream: answers by path, and lets the tests see what it received and when."""

    def __init__(self) -> None:
        self.received = 0
        self.release = asyncio.Event()
        self.freed = asyncio.Event()
        self.uploads: list[dict[str, Any]] = []
        self.aborted_uploads = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path == "/big":  # half of a sized answer, then the rest once the test says so
            await start_sized(send, BIG)
            await send_pieces(send, 0, BIG // 2)
            await self.release.wait()
            await send_pieces(send, BIG // 2, BIG // 2)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        elif path == "/dies":  # 1 MB of a 4 MB answer, then the backend fails (uvicorn closes)
            await start_sized(send, BIG)
            await send_pieces(send, 0, MB)
            raise RuntimeError("the backend dies mid-answer (expected by the test)")
        elif path == "/endless":  # far more than anyone reads; notes when its client is gone
            await start_sized(send, 1 << 40)
            gone = asyncio.ensure_future(_disconnected(receive))
            sent = 0
            while not gone.done():
                await send({"type": "http.response.body", "body": pattern(sent, 64 * 1024), "more_body": True})
                sent += 64 * 1024
                await asyncio.sleep(0)
            self.freed.set()
        elif path == "/upload":
            await self._upload(scope, receive, send)
        elif path == "/early":  # answers without reading the body (as a 401 or a 413 would)
            body = b'{"early":true}'
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
        else:
            body = b'{"small":true}'
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

    async def _upload(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.received = 0
        digest = hashlib.sha256()
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                self.aborted_uploads += 1
                return
            chunk = msg.get("body", b"")
            digest.update(chunk)
            self.received += len(chunk)
            if not msg.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        seen = {"bytes": self.received, "sha256": digest.hexdigest(),
                "content-length": headers.get("content-length"),
                "transfer-encoding": headers.get("transfer-encoding")}
        self.uploads.append(seen)
        body = json.dumps(seen).encode()
        await send({"type": "http.response.start", "status": 201,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})




async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # the test process keeps its own signal handling
        yield


async def _serve(config: uvicorn.Config) -> tuple[_Server, asyncio.Task[None]]:
    server = _Server(config)
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    return server, task


def _port(server: uvicorn.Server) -> int:
    return int(server.servers[0].sockets[0].getsockname()[1])


def _only(upstream: str) -> Callable[[Scope], list[str]]:
    return lambda _scope: [upstream]


class Rig:
    def __init__(self, backend: Backend, proxy_url: dict[str, str]) -> None:
        self.backend = backend
        self.url = proxy_url


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    backend = Backend()
    quiet: dict[str, Any] = {"log_level": "critical", "lifespan": "off", "access_log": False}
    sock = str(tmp_path / "backend.sock")
    servers = [await _serve(uvicorn.Config(backend, uds=sock, **quiet)),
               await _serve(uvicorn.Config(backend, host="127.0.0.1", port=0, **quiet))]
    upstreams = {"unix": f"unix://{sock}", "tcp": f"http://127.0.0.1:{_port(servers[1][0])}"}
    proxies = {kind: ReverseProxy(_only(u), max_body_bytes=LIMIT) for kind, u in upstreams.items()}
    fronts = {kind: await _serve(uvicorn.Config(p, host="127.0.0.1", port=0, http=CorkedHttpToolsProtocol, **quiet))
              for kind, p in proxies.items()}
    yield Rig(backend, {kind: f"http://127.0.0.1:{_port(s)}" for kind, (s, _t) in fronts.items()})
    backend.release.set()
    for server, task in [*fronts.values(), *servers]:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10)
    for p in proxies.values():
        await p.close()


async def _until(what: str, check: Callable[[], bool]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while not check():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def _within(what: str, step: Awaitable[Any]) -> Any:
    try:
        return await asyncio.wait_for(step, DEADLINE)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


KINDS = ["unix", "tcp"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_large_sized_answer_reaches_the_client_before_the_backend_finished_it(kind: str, rig: Rig) -> None:
    async with aiohttp.ClientSession() as session:
        resp = await _within("the answer's head", session.get(rig.url[kind] + "/big"))
        assert resp.status == 200 and resp.headers["Content-Length"] == str(BIG)
        got = bytearray()
        while len(got) < MB:  # the backend still holds back its second half
            chunk = await _within("the first MB", resp.content.readany())
            assert chunk, "the body ended early"
            got += chunk
        assert not rig.backend.release.is_set()
        rig.backend.release.set()
        got += await _within("the rest", resp.content.read())
        assert bytes(got) == pattern(0, BIG)
        resp.release()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sized", [True, False], ids=["content-length", "chunked"])
async def test_a_large_upload_reaches_the_backend_while_the_client_still_sends_it(
        kind: str, sized: bool, rig: Rig) -> None:
    total = 2 * MB + MB // 2
    body = pattern(0, total)

    async def upload() -> AsyncIterator[bytes]:
        yield body[:MB]
        await _until("the backend to receive 512 KiB before the client sends the rest",
                     lambda: rig.backend.received >= 512 * 1024)
        for offset in range(MB, total, 256 * 1024):
            yield body[offset:offset + 256 * 1024]

    headers = {"Content-Type": "application/octet-stream"}
    if sized:
        headers["Content-Length"] = str(total)
    async with aiohttp.ClientSession() as session:
        resp = await _within("the upload's answer", session.post(rig.url[kind] + "/upload", data=upload(),
                                                                 headers=headers))
        seen = await resp.json()
    assert resp.status == 201
    assert seen["bytes"] == total and seen["sha256"] == hashlib.sha256(body).hexdigest()
    if sized:  # the client's Content-Length is passed on; a chunked body stays chunked
        assert (seen["content-length"], seen["transfer-encoding"]) == (str(total), None)
    else:
        assert (seen["content-length"], seen["transfer-encoding"]) == (None, "chunked")


@pytest.mark.parametrize("kind", KINDS)
async def test_small_bodies_pass_whole(kind: str, rig: Rig) -> None:
    body = pattern(0, BUFFER_BYTES - 1)
    async with aiohttp.ClientSession() as session:
        async with session.post(rig.url[kind] + "/upload", data=body) as resp:
            seen = await resp.json()
        assert resp.status == 201 and seen["bytes"] == len(body)
        assert seen["content-length"] == str(len(body))
        async with session.get(rig.url[kind] + "/small") as resp:
            assert (resp.status, await resp.read()) == (200, b'{"small":true}')


@pytest.mark.parametrize("kind", KINDS)
async def test_a_backend_dying_mid_body_cuts_the_answer_off(kind: str, rig: Rig,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="genericapi.server.proxy")
    async with aiohttp.ClientSession() as session:
        resp = await _within("the answer's head", session.get(rig.url[kind] + "/dies"))
        assert resp.status == 200 and resp.headers["Content-Length"] == str(BIG)
        with pytest.raises(aiohttp.ClientPayloadError):
            await _within("the cut-off body", resp.read())
        resp.close()
        async with session.get(rig.url[kind] + "/small") as again:  # the proxy serves the next one
            assert (again.status, await again.read()) == (200, b'{"small":true}')
    assert any(r.getMessage().startswith("timeout or abort while handling: method=GET URI='/dies': ")
               for r in caplog.records)


def test_uvicorn_logs_no_traceback_for_an_aborted_answer() -> None:
    """Go's net/http logs nothing for ErrAbortHandler; other failures keep uvicorn's traceback."""
    def record(err: BaseException) -> logging.LogRecord:
        return logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "Exception in ASGI application",
                                 None, (type(err), err, None))

    uvicorn_log = logging.getLogger("uvicorn.error")
    assert not uvicorn_log.filter(record(AbortHandler()))
    assert uvicorn_log.filter(record(RuntimeError("a bug")))


@pytest.mark.parametrize("kind", KINDS)
async def test_a_chunked_upload_crossing_the_limit_is_kubes_413(kind: str, rig: Rig) -> None:
    async def upload() -> AsyncIterator[bytes]:
        for offset in range(0, 4 * MB, 256 * 1024):
            yield pattern(offset, 256 * 1024)

    async with aiohttp.ClientSession() as session:
        resp = await _within("the answer", session.put(rig.url[kind] + "/upload", data=upload()))
        data = await resp.read()
    assert resp.status == 413 and resp.headers["Content-Type"] == "application/json"
    assert data == apierrors.request_entity_too_large(LIMIT).body()
    await _until("the backend to see the upload cut off", lambda: rig.backend.aborted_uploads == 1)
    assert rig.backend.uploads == []  # it never had the whole body, so it acted on nothing


@pytest.mark.parametrize("kind", KINDS)
async def test_a_client_leaving_mid_body_frees_the_backend_connection(kind: str, rig: Rig) -> None:
    async with aiohttp.ClientSession() as session:
        resp = await _within("the answer's head", session.get(rig.url[kind] + "/endless"))
        got = 0
        while got < MB:
            got += len(await _within("the body", resp.content.readany()))
        resp.close()
    await _within("the backend to see its client gone", rig.backend.freed.wait())


# -- the request body's reading, message by message ------------------------------------------
def _script(*messages: dict[str, Any]) -> tuple[Receive, list[int]]:
    """A receive callable handing out ``messages`` in order, and a count of calls made."""
    queue = list(messages)
    calls = [0]

    async def receive() -> dict[str, Any]:
        calls[0] += 1
        return queue.pop(0)

    return receive, calls


def _part(body: bytes, more: bool = True) -> dict[str, Any]:
    return {"type": "http.request", "body": body, "more_body": more}


def _scope(length: int | None = None) -> Scope:
    headers = [(b"content-length", str(length).encode())] if length is not None else []
    return {"type": "http", "headers": headers}


async def test_a_body_in_one_message_is_read_with_one_receive() -> None:
    receive, calls = _script(_part(b"{}", more=False))
    assert await _read_body(_scope(2), receive, LIMIT) == b"{}"
    assert calls == [1]


async def test_a_body_ending_within_the_buffer_is_joined() -> None:
    receive, _calls = _script(_part(b"a" * 1000), _part(b"b" * 1000), _part(b"", more=False))
    assert await _read_body(_scope(), receive, LIMIT) == b"a" * 1000 + b"b" * 1000


async def test_a_longer_body_is_its_start_and_a_stream_of_the_rest() -> None:
    piece = b"x" * (BUFFER_BYTES // 2)
    receive, calls = _script(_part(piece), _part(piece), _part(b"tail1"), _part(b"tail2", more=False))
    body = await _read_body(_scope(BUFFER_BYTES + 10), receive, LIMIT)
    assert isinstance(body, _StreamedBody)
    assert (body.prefix, body.length, body.started, calls[0]) == (piece + piece, BUFFER_BYTES + 10, False, 2)
    assert [chunk async for chunk in body] == [b"tail1", b"tail2"]
    assert body.started and not body.too_large and not body.client_gone


async def test_a_chunked_body_crossing_the_limit_is_refused_before_or_while_it_streams() -> None:
    receive, _calls = _script(_part(b"x" * 10), _part(b"x" * LIMIT))
    with pytest.raises(apierrors.APIError) as refused:
        await _read_body(_scope(), receive, LIMIT)  # within the start: at once
    assert refused.value.code == 413
    piece = b"x" * BUFFER_BYTES
    receive, _calls = _script(_part(piece), _part(b"y" * LIMIT), _part(b"", more=False))
    body = await _read_body(_scope(), receive, LIMIT)
    assert isinstance(body, _StreamedBody) and body.length is None
    with pytest.raises(apierrors.APIError) as refused:
        [chunk async for chunk in body]
    assert refused.value.code == 413 and body.too_large


async def test_a_client_leaving_mid_body_ends_the_stream() -> None:
    receive, _calls = _script(_part(b"x" * BUFFER_BYTES), {"type": "http.disconnect"})
    body = await _read_body(_scope(), receive, LIMIT)
    assert isinstance(body, _StreamedBody)
    with pytest.raises(ClientGone):
        [chunk async for chunk in body]
    assert body.client_gone


@pytest.mark.parametrize("kind", KINDS)
async def test_an_answer_before_the_body_ended_is_relayed(kind: str, rig: Rig) -> None:
    """The backend answers while the client still sends a streamed body: the client gets that
    answer, and the proxy serves the next request."""
    async def upload() -> AsyncIterator[bytes]:
        for offset in range(0, 2 * MB, 256 * 1024):
            yield pattern(offset, 256 * 1024)
            await asyncio.sleep(0.01)

    async with aiohttp.ClientSession() as session:
        async with session.post(rig.url[kind] + "/early", data=upload(),
                                headers={"Content-Length": str(2 * MB)}) as resp:
            assert (resp.status, await _within("the early answer", resp.read())) == (403, b'{"early":true}')
        async with session.get(rig.url[kind] + "/small") as again:
            assert (again.status, await again.read()) == (200, b'{"small":true}')
