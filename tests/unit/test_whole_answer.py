"""A sized answer written whole (issue 15: the gateway's CPU per proxied GET), and the Unix pool's reading.

The proxy hands an answer it read whole from a Unix backend to ``wholeanswer.offered``'s
``answer_whole`` when nothing wraps the server's ``send`` (the lean exchange writes one head and the
body in one write); the gateway's one-pass chain offers ``answer_whole`` in the exchange's place,
adding what its ``send`` adds (Audit-ID, the APF headers, audit stages and annotations). Each is
checked against the path it replaces: the same bytes on the wire (Date aside), the same audit
events. The Unix pool reads every answer shape as httptools alone does (HEAD included: it used to
wait for the body its Content-Length announced), and the bad inputs: a malformed upstream answer is
kube's 503 Status, a client that left before its answer costs nothing and breaks nothing.

(A reading of the sized answer's head without httptools' callbacks was tried and dropped: it cost
7-8 us per answer against httptools' 3-4 us, parser creation included.)

Real parts: uvicorn with the gateway's LeanHttpProtocol, real sockets (TCP and Unix), httptools, the
gateway's Authenticator, APF, audit policy and sink; the backends are scripted servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httptools
import orjson
import pytest
import uvicorn
from aggregator import filters
from aggregator.audit import policy, sink
from aggregator.audit.filter import Auditor
from aggregator.auth import Authenticator
from aggregator.flowcontrol.wiring import PriorityAndFairness
from genericapi.apimachinery.authorization import PrivilegedGroups
from genericapi.apimachinery.user import UserInfo
from genericapi.server import wholeanswer
from genericapi.server.auditannotations import HEADER as ANNOTATIONS_HEADER
from genericapi.server.leanexchange import Exchange
from genericapi.server.leanhttp import LeanHttpProtocol
from genericapi.server.proxy import ReverseProxy
from genericapi.server.unixhttp import UnixHTTPPool, UpstreamClosed
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DEADLINE = 20.0
BODY = b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c"},"data":{"v":"xxxx"}}'

#: Answers a backend may give, by name: (the bytes, written in these pieces).
ANSWERS: dict[str, list[bytes]] = {
    "plain": [b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
              % (len(BODY), BODY)],
    "no-reason-odd-spaces": [b"HTTP/1.1 404\r\nContent-Type:   application/json  \r\nX-Thing:\t a b \t\r\n"
                             b"Content-Length: 2\r\n\r\n{}"],
    "connection-close": [b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"],
    "empty-body": [b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"],
    "in-two-reads": [b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-",
                     b"length: 2\r\n\r\n{}"],
    "body-in-a-second-read": [b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nab", b"cd"],
    "chunked": [b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n"],
    "no-content": [b"HTTP/1.1 204 No Content\r\nx-a: b\r\n\r\n"],
    "interim-100": [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"],
    "http-1.0": [b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok"],
}

#: Upstream answers no HTTP/1.1 parser accepts: the request fails as the backend closing would.
MALFORMED = {
    "not-http": b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    "bad-status": b"HTTP/1.1 2x0 OK\r\ncontent-length: 2\r\n\r\nok",
    "bad-length": b"HTTP/1.1 200 OK\r\ncontent-length: two\r\n\r\nok",
    "two-lengths": b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok",
    "space-before-colon": b"HTTP/1.1 200 OK\r\ncontent-length : 2\r\n\r\nok",
    "bare-lf-in-head": b"HTTP/1.1 200 OK\r\nx-a: b\nx-b: c\r\ncontent-length: 2\r\n\r\nok",
}


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head + (await reader.readexactly(length) if length else b"")


class Backend:
    """A scripted backend on a Unix socket: the request's path names the answer it gets."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.AbstractServer | None = None
        self.delay = 0.0

    async def start(self, path: str) -> None:
        self.server = await asyncio.start_unix_server(self._handle, path)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                request = await _read_request(reader)
                self.requests.append(request)
                name = request.split(b" ", 2)[1].decode().strip("/").split("?")[0]
                if self.delay:
                    await asyncio.sleep(self.delay)
                if name in MALFORMED:
                    writer.write(MALFORMED[name])
                    await writer.drain()
                    writer.close()
                    return
                pieces = ANSWERS[name]
                if request.startswith(b"HEAD "):
                    head = pieces[0].split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n"
                    pieces = [head]
                for i, piece in enumerate(pieces):
                    if i:
                        await asyncio.sleep(0.02)
                    writer.write(piece)
                    await writer.drain()
                if b"connection: close" in pieces[0] or pieces[0].startswith(b"HTTP/1.0"):
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[tuple[Backend, str]]:
    b = Backend()
    path = str(tmp_path / "backend.sock")
    await b.start(path)
    yield b, path
    await b.stop()


class _Parsed:
    """What httptools alone makes of an answer (the reference for ``_whole``)."""

    def __init__(self) -> None:
        self.headers: list[tuple[bytes, bytes]] = []
        self.body = b""
        self.done = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.done = True


def _httptools_reference(raw: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    parsed = _Parsed()
    parser = httptools.HttpResponseParser(parsed)
    if raw.startswith(b"HTTP/1.1 100"):  # the interim answer, then the final one on a fresh parser
        raw = raw.split(b"\r\n\r\n", 1)[1]
        parser = httptools.HttpResponseParser(parsed)
    parser.feed_data(raw)
    return parser.get_status_code(), parsed.headers, parsed.body


@pytest.mark.parametrize("name", [n for n in ANSWERS if n != "interim-100"])
async def test_an_answer_is_read_as_httptools_reads_it(name: str, backend: tuple[Backend, str]) -> None:
    b, path = backend
    pool = UnixHTTPPool(path)
    try:
        for _ in range(2):  # the second on the same connection, when it is kept
            resp = await asyncio.wait_for(pool.request("GET", f"/{name}", [], b""), DEADLINE)
            body = await asyncio.wait_for(resp.read(), DEADLINE)
            status, headers, ref_body = _httptools_reference(b"".join(ANSWERS[name]))
            assert (resp.status, resp.headers, body) == (status, headers, ref_body)
            assert resp.sized == any(k == b"content-length" for k, _ in headers)
        keeps = name not in ("connection-close", "http-1.0")
        assert b.connections == (1 if keeps else 2)
    finally:
        pool.close()


async def test_a_parser_used_for_one_answer_is_fresh_for_the_next(backend: tuple[Backend, str]) -> None:
    _b, path = backend
    pool = UnixHTTPPool(path)
    try:
        for name in ("chunked", "plain", "in-two-reads", "chunked", "plain", "body-in-a-second-read", "plain"):
            resp = await asyncio.wait_for(pool.request("GET", f"/{name}", [], b""), DEADLINE)
            status, headers, ref_body = _httptools_reference(b"".join(ANSWERS[name]))
            assert (resp.status, resp.headers, await resp.read()) == (status, headers, ref_body), name
    finally:
        pool.close()


async def test_a_head_answer_ends_with_its_head(backend: tuple[Backend, str]) -> None:
    """A HEAD's answer has a Content-Length and no body: it ends with its head (before, the pool waited
    for the announced body forever), and the connection serves the next request."""
    b, path = backend
    pool = UnixHTTPPool(path)
    try:
        for method in ("HEAD", "GET", "HEAD", "HEAD", "GET"):  # one connection throughout
            resp = await asyncio.wait_for(pool.request(method, "/plain", [], b""), DEADLINE)
            body = await asyncio.wait_for(resp.read(), DEADLINE)
            assert resp.status == 200 and (b"content-length", b"%d" % len(BODY)) in resp.headers
            assert body == (b"" if method == "HEAD" else BODY)
    finally:
        pool.close()
    assert b.requests[0].startswith(b"HEAD /plain ") and b.connections == 1


@pytest.mark.parametrize("name", list(MALFORMED))
async def test_a_malformed_answer_fails_the_request(name: str, backend: tuple[Backend, str]) -> None:
    _b, path = backend
    pool = UnixHTTPPool(path)
    try:
        with pytest.raises(UpstreamClosed):
            resp = await asyncio.wait_for(pool.request("GET", f"/{name}", [], b""), DEADLINE)
            await asyncio.wait_for(resp.read(), DEADLINE)
    finally:
        pool.close()


# -- through the proxy and the lean server ------------------------------------------------------------

class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _serve(app: ASGIApp) -> tuple[_Server, asyncio.Task[None], int]:
    server = _Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical", lifespan="off",
                                    access_log=False, http=LeanHttpProtocol))  # type: ignore[arg-type]
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    return server, task, int(server.servers[0].sockets[0].getsockname()[1])


class Wrapped:
    """An ASGI wrapper around ``send`` (as fault injection has): the answer goes as two messages."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.messages = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def counted(message: Message) -> None:
            self.messages += 1
            await send(message)

        await self.app(scope, receive, counted)


class Counting:
    """Counts the answers the lean exchange wrote whole (its ``answer_whole`` wrapped for the test)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.whole = 0
        real = Exchange.answer_whole

        async def counted(exchange: Exchange, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
            self.whole += 1
            await real(exchange, status, headers, body)

        monkeypatch.setattr(Exchange, "answer_whole", counted)


async def _exchange(port: int, request: bytes, close_after_send: bool = False) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    if close_after_send:
        writer.close()
        return b""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), DEADLINE)
    length = int(re.search(rb"content-length: (\d+)", head.lower()).group(1))  # type: ignore[union-attr]
    body = b"" if request.startswith(b"HEAD ") else await asyncio.wait_for(reader.readexactly(length), DEADLINE)
    writer.close()
    return head + body


def _no_date(raw: bytes) -> bytes:
    return re.sub(rb"date: [^\r]*\r\n", b"", raw)


@pytest.fixture
async def fronts(backend: tuple[Backend, str], monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[dict[str, Any]]:
    _b, path = backend
    proxy = ReverseProxy(lambda _scope: [f"unix://{path}"], drop_headers=("authorization",), rotate=False)
    counting = Counting(monkeypatch)
    wrapped = Wrapped(proxy)
    servers = {"whole": await _serve(proxy), "messages": await _serve(wrapped)}
    yield {"ports": {k: v[2] for k, v in servers.items()}, "counting": counting, "wrapped": wrapped,
           "proxy": proxy}
    for server, task, _port in servers.values():
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10)
    await proxy.close()


@pytest.mark.parametrize(("method", "name"), [
    ("GET", "plain"), ("GET", "no-reason-odd-spaces"), ("POST", "connection-close"), ("GET", "empty-body"),
    ("GET", "in-two-reads"), ("GET", "body-in-a-second-read"), ("HEAD", "plain"),
])
async def test_the_whole_answer_is_the_bytes_the_two_messages_gave(method: str, name: str,
                                                                   fronts: dict[str, Any]) -> None:
    request = (b"%s /%s?x=1 HTTP/1.1\r\nhost: h\r\nauthorization: Bearer t\r\nx-remote-user: forged\r\n"
               b"content-length: 0\r\n\r\n" % (method.encode(), name.encode()))
    got = {kind: await _exchange(port, request) for kind, port in fronts["ports"].items()}
    assert _no_date(got["whole"]) == _no_date(got["messages"])
    assert got["whole"].count(b"date: ") == 1
    assert fronts["counting"].whole == (0 if method == "HEAD" else 1)
    if method == "HEAD":  # the upstream's length, as Go's ReverseProxy copies it
        assert b"content-length: %d\r\n" % len(BODY) in got["whole"]
    assert fronts["wrapped"].messages == 2


@pytest.mark.parametrize("name", ["bad-status", "not-http", "two-lengths"])
async def test_a_malformed_upstream_answer_is_kubes_503(name: str, fronts: dict[str, Any]) -> None:
    raw = await _exchange(fronts["ports"]["whole"], b"GET /%s HTTP/1.1\r\nhost: h\r\n\r\n" % name.encode())
    head, body = raw.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 503 ")
    status = orjson.loads(body)
    assert (status["kind"], status["status"], status["reason"], status["code"]) == \
        ("Status", "Failure", "ServiceUnavailable", 503)
    assert status["message"].startswith("the backend serving this request is unavailable: ")


async def test_a_client_gone_before_its_answer_breaks_nothing(backend: tuple[Backend, str],
                                                              fronts: dict[str, Any]) -> None:
    b, _path = backend
    b.delay = 0.2
    port = fronts["ports"]["whole"]
    await _exchange(port, b"GET /plain HTTP/1.1\r\nhost: h\r\n\r\n", close_after_send=True)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while len(b.requests) < 1:
        assert loop.time() < deadline
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.4)  # the answer came to nobody
    b.delay = 0.0
    raw = await _exchange(port, b"GET /plain HTTP/1.1\r\nhost: h\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 200 OK\r\n") and raw.endswith(BODY)
    assert b.connections == 1  # the backend's connection went back to the pool and was used again


# -- the one-pass chain ---------------------------------------------------------------------------------

TOKENS = {"admin-token": UserInfo("admin", ("system:masters",)), "alice-token": UserInfo("alice", ("devs",))}
POLICY = b"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: RequestResponse}]\n"


class Collected:
    name = "collected"

    def __init__(self) -> None:
        self.docs: list[dict[str, Any]] = []

    def write(self, docs: Any) -> None:
        self.docs.extend(docs)

    def close(self) -> None:
        pass


class Recorder:
    """The server's side: records what reaches the client, as ASGI messages or one whole answer."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, list[tuple[bytes, bytes]], bytes]] = []
        self.start: Message | None = None

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.start = message
        elif not message.get("more_body") and self.start is not None:
            headers = [(k, v) for k, v in self.start["headers"] if k != b"content-length"]
            self.sent.append((self.start["status"], headers, message.get("body", b"")))

    async def answer_whole(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.sent.append((status, list(headers), body))


class Backendish:
    """The mux: answers as the proxy does, whole when offered, else as two messages."""

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.answer = (status, headers, body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        status, headers, body = self.answer
        whole = wholeanswer.offered(scope, send)
        if whole is not None:
            await whole.answer_whole(status, list(headers), body)
            return
        await send({"type": "http.response.start", "status": status,
                    "headers": [*headers, (b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})


def _chain_scope(path: str, token: str, offer: Recorder | None) -> dict[str, Any]:
    scope: dict[str, Any] = {
        "type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
        "headers": [(b"user-agent", b"kubectl/v1.33.1"), (b"authorization", b"Bearer " + token.encode()),
                    (b"audit-id", b"11111111-2222-4333-8444-555555555555")],
        "client": ("10.0.0.7", 40000), "scheme": "https", "http_version": "1.1"}
    if offer is not None:
        scope[wholeanswer.SCOPE_KEY] = offer
    return scope


@pytest.mark.parametrize(("status", "body"), [(200, BODY), (404, b'{"kind":"Status","code":404}')])
@pytest.mark.parametrize("token", ["admin-token", "alice-token"])
def test_the_chain_answers_whole_as_it_answers_with_messages(status: int, body: bytes, token: str) -> None:
    headers = [(b"content-type", b"application/json"), (b"audit-id", b"from-the-backend"),
               (ANNOTATIONS_HEADER.lower().encode(), b'{"admission.example/decision": "allowed"}')]

    async def run(whole: bool) -> tuple[list[Any], list[dict[str, Any]]]:
        backend = Collected()
        auditor = Auditor(policy.load_policy(POLICY), sink.AuditSink([backend]))
        auditor.sink.start()
        apf = PriorityAndFairness.build(None, "/registry", 600, 60.0)
        apf.controller.refresh()
        app = filters.build_handler_chain(Backendish(status, headers, body), Authenticator(dict(TOKENS)),
                                          PrivilegedGroups("system:masters", "devs"), apf, None, auditor)
        recorder = Recorder()
        delivered = False

        async def receive() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await asyncio.Event().wait()
            return {"type": "http.disconnect"}

        await app(_chain_scope("/api/v1/namespaces/default/configmaps/c", token, recorder if whole else None),
                  receive, recorder.send)
        auditor.sink.stop()
        docs = [{k: v for k, v in d.items() if k not in ("requestReceivedTimestamp", "stageTimestamp")}
                for d in backend.docs]
        return recorder.sent, docs

    async def both() -> tuple[tuple[list[Any], list[Any]], tuple[list[Any], list[Any]]]:
        return await run(True), await run(False)

    (whole_sent, whole_docs), (messages_sent, message_docs) = asyncio.run(both())
    assert whole_sent == messages_sent and len(whole_sent) == 1
    names = [k for k, _ in whole_sent[0][1]]
    assert names.count(b"audit-id") == 1 and (b"audit-id", b"11111111-2222-4333-8444-555555555555") in \
        whole_sent[0][1]
    assert ANNOTATIONS_HEADER.lower().encode() not in names
    assert names.count(b"x-kubernetes-pf-flowschema-uid") == 1
    assert whole_docs == message_docs
    assert whole_docs[-1]["annotations"]["admission.example/decision"] == "allowed"
    assert whole_docs[-1]["responseStatus"]["code"] == status
