"""The real aggregator process in front of a tiny echo backend: what the backend receives.

The gateway must put the authenticated user into ``X-Remote-*`` (never the client's own),
refuse anonymous requests itself, drop hop-by-hop headers, pass statuses and bodies through
unchanged, stream responses chunk by chunk, and answer 503 when its backend is gone.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from kubechain_cli.chain import free_port

pytestmark = pytest.mark.integration

TOKEN = "s3cr3t-alice-token"
TEAPOT_BODY = b'{"kind":"Teapot","note":"short and stout"}'
STREAM_CHUNKS = (b"chunk-1\n", b"chunk-2\n", b"chunk-3\n")
# Client-sent headers a gateway must never let through as identity.
SPOOFED_IDENTITY = (
    ("X-Remote-User", "evil"),
    ("x-remote-group", "system:masters"),
    ("X-REMOTE-GROUP", "system:masters"),
    ("X-Remote-Extra-Foo", "bar"),
    ("x-remote-extra-scopes", "everything"),
    ("X-Remote-Uid", "0"),
)


# -- the echo backend -------------------------------------------------------------------------
@dataclass
class EchoState:
    """What the backend saw, shared between its thread and the tests."""

    seen_paths: list[str] = field(default_factory=list)
    first_chunk_seen: threading.Event = field(default_factory=threading.Event)
    client_saw_first_before_last: bool = False
    last_chunk_sent_at: float = 0.0


def echo_app(state: EchoState) -> web.Application:
    async def discovery_core(request: web.Request) -> web.Response:
        return web.json_response({"kind": "APIVersions", "versions": ["v1"]})

    async def discovery_groups(request: web.Request) -> web.Response:
        return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})

    async def teapot(request: web.Request) -> web.Response:
        state.seen_paths.append(request.path)
        return web.Response(status=418, body=TEAPOT_BODY, content_type="application/json",
                            headers={"X-Backend-Marker": "teapot"})

    async def stream(request: web.Request) -> web.StreamResponse:
        state.seen_paths.append(request.path)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        await resp.write(STREAM_CHUNKS[0])
        # Wait (bounded) until the client has the first chunk: a buffering gateway never delivers it.
        loop = asyncio.get_running_loop()
        state.client_saw_first_before_last = await loop.run_in_executor(
            None, state.first_chunk_seen.wait, 5.0)
        await asyncio.sleep(0.2)
        await resp.write(STREAM_CHUNKS[1])
        await asyncio.sleep(0.2)
        state.last_chunk_sent_at = time.monotonic()
        await resp.write(STREAM_CHUNKS[2])
        await resp.write_eof()
        return resp

    async def echo(request: web.Request) -> web.Response:
        state.seen_paths.append(request.path)
        headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in request.raw_headers]
        body = orjson.dumps({"method": request.method, "path": request.path_qs, "headers": headers,
                             "body": (await request.read()).decode("latin-1")})
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/api", discovery_core)
    app.router.add_get("/apis", discovery_groups)
    app.router.add_route("*", "/teapot", teapot)
    app.router.add_get("/stream", stream)
    app.router.add_route("*", "/{tail:.*}", echo)
    return app


class EchoServer:
    """The echo app on its own event loop in a daemon thread (tests stay synchronous)."""

    def __init__(self) -> None:
        self.state = EchoState()
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    async def _start(self) -> None:
        self._runner = web.AppRunner(echo_app(self.state))
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


# -- the gateway process ----------------------------------------------------------------------
@dataclass
class GatewayProcess:
    port: int
    pki: Path
    process: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, workdir: Path, member: str, token_file: Path) -> GatewayProcess:
        port = free_port()
        log = workdir / "aggregator.log"
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(
            [sys.executable, "-m", "aggregator", "--secure-port", str(port), "--bind-address", "127.0.0.1",
             "--cert-dir", str(workdir / "pki"), "--member", member, "--token-auth-file", str(token_file),
             "--shutdown-delay", "0"],
            stdout=open(log, "ab"), stderr=subprocess.STDOUT, env=env)
        gateway = cls(port, workdir / "pki", proc, log)
        try:
            gateway.wait_healthy(30)
        except Exception:
            gateway.stop()
            raise
        return gateway

    def wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        unverified = ssl.create_default_context()
        unverified.check_hostname = False
        unverified.verify_mode = ssl.CERT_NONE
        last = ""
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"aggregator exited with {self.process.returncode}:\n"
                                   f"{self.log.read_text()[-3000:]}")
            try:
                conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=unverified, timeout=2)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    conn.close()
                    return
                conn.close()
            except OSError as err:
                last = str(err)
            time.sleep(0.05)
        raise RuntimeError(f"aggregator not healthy after {timeout}s: {last}")

    def context(self, client_cert: bool) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        if client_cert:
            ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def connect(self, client_cert: bool = False, timeout: float = 15) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context(client_cert),
                                           timeout=timeout)

    def call(self, method: str, path: str, headers: list[tuple[str, str]] | None = None,
             client_cert: bool = False, body: bytes | None = None) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One request with exactly the given headers (repeats and odd letter case kept)."""
        conn = self.connect(client_cert)
        try:
            conn.putrequest(method, path)
            for k, v in headers or []:
                conn.putheader(k, v)
            if body is not None:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        finally:
            conn.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def token_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tokens") / "tokens.csv"
    path.write_text(f'{TOKEN},alice,uid-alice,"devs,qa"\n')
    return path


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, echo: EchoServer, token_file: Path) -> Iterator[GatewayProcess]:
    gw = GatewayProcess.start(tmp_path_factory.mktemp("gateway"), echo.url, token_file)
    yield gw
    gw.stop()


def received(body: bytes) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(body)
    return doc


def header_values(doc: dict[str, Any], name: str) -> list[str]:
    return [v for k, v in doc["headers"] if k.lower() == name.lower()]


def header_names(doc: dict[str, Any]) -> set[str]:
    return {k.lower() for k, _ in doc["headers"]}


# -- identity ---------------------------------------------------------------------------------
def test_bearer_token_user_replaces_spoofed_identity(gateway: GatewayProcess) -> None:
    status, _h, body = gateway.call("GET", "/api/v1/namespaces/default/pods?limit=5", [
        ("Authorization", f"Bearer {TOKEN}"), *SPOOFED_IDENTITY])
    assert status == 200, body
    doc = received(body)
    assert doc["path"] == "/api/v1/namespaces/default/pods?limit=5"
    assert header_values(doc, "X-Remote-User") == ["alice"]
    assert sorted(header_values(doc, "X-Remote-Group")) == ["devs", "qa", "system:authenticated"]
    values = [v for _k, v in doc["headers"]]
    assert "evil" not in values and "system:masters" not in values and "everything" not in values
    assert not any(k.lower().startswith("x-remote-extra-") for k, _ in doc["headers"])
    assert "0" not in header_values(doc, "X-Remote-Uid")


def test_admin_client_certificate_is_kubernetes_admin(gateway: GatewayProcess) -> None:
    status, _h, body = gateway.call("GET", "/apis/apps/v1/deployments", list(SPOOFED_IDENTITY),
                                    client_cert=True)
    assert status == 200, body
    doc = received(body)
    assert header_values(doc, "X-Remote-User") == ["kubernetes-admin"]
    groups = header_values(doc, "X-Remote-Group")
    assert sorted(groups) == ["system:authenticated", "system:masters"]
    assert not any(k.lower().startswith("x-remote-extra-") for k, _ in doc["headers"])


def test_unknown_token_is_refused_at_the_gateway(gateway: GatewayProcess, echo: EchoServer) -> None:
    path = "/api/v1/bad-token-probe"
    status, resp_headers, body = gateway.call("GET", path, [("Authorization", "Bearer not-a-token")])
    assert status == 401, body
    assert resp_headers["Content-Type"].startswith("application/json")
    doc = orjson.loads(body)
    assert doc["kind"] == "Status" and doc["apiVersion"] == "v1"
    assert doc["status"] == "Failure" and doc["reason"] == "Unauthorized" and doc["code"] == 401
    assert path not in echo.state.seen_paths


def test_no_credentials_is_anonymous_and_spoofing_changes_nothing(gateway: GatewayProcess) -> None:
    # kube-apiserver's defaults (--anonymous-auth=true, AlwaysAllow): a request without credentials
    # is served as system:anonymous; the identity headers a client sends are still stripped.
    status, _h, body = gateway.call("GET", "/api/v1/anonymous-probe", list(SPOOFED_IDENTITY))
    assert status == 200, body
    doc = received(body)
    assert header_values(doc, "X-Remote-User") == ["system:anonymous"]
    assert header_values(doc, "X-Remote-Group") == ["system:unauthenticated"]
    values = [v for _k, v in doc["headers"]]
    assert "evil" not in values and "system:masters" not in values and "everything" not in values
    assert not any(k.lower().startswith("x-remote-extra-") for k, _ in doc["headers"])


def test_bearer_token_itself_is_not_forwarded(gateway: GatewayProcess) -> None:
    status, _h, body = gateway.call("GET", "/api/v1/token-leak", [("Authorization", f"Bearer {TOKEN}")])
    assert status == 200, body
    assert "authorization" not in header_names(received(body))


# -- hop-by-hop headers -----------------------------------------------------------------------
def test_hop_by_hop_headers_are_not_forwarded(gateway: GatewayProcess) -> None:
    status, _h, body = gateway.call("POST", "/api/v1/namespaces/default/configmaps", [
        ("Authorization", f"Bearer {TOKEN}"),
        ("Connection", "keep-alive"),
        ("Keep-Alive", "timeout=5, max=100"),
        ("TE", "trailers"),
        ("Upgrade", "example/1"),
        ("Proxy-Authorization", "Basic dXNlcjpwYXNz"),
        ("X-End-To-End", "kept"),
        ("Content-Type", "application/json"),
    ], body=b'{"a":1}')
    assert status == 200, body
    doc = received(body)
    names = header_names(doc)
    for hop in ("keep-alive", "te", "upgrade", "proxy-authorization"):
        assert hop not in names, doc["headers"]
    assert "dXNlcjpwYXNz" not in str(doc["headers"])
    assert header_values(doc, "X-End-To-End") == ["kept"]
    assert header_values(doc, "Content-Type") == ["application/json"]
    assert doc["method"] == "POST" and doc["body"] == '{"a":1}'


def test_headers_named_by_connection_are_not_forwarded(gateway: GatewayProcess) -> None:
    status, _h, body = gateway.call("GET", "/api/v1/connection-listed", [
        ("Authorization", f"Bearer {TOKEN}"), ("Connection", "keep-alive, X-Hop-Custom"),
        ("X-Hop-Custom", "must-not-pass")])
    assert status == 200, body
    assert "x-hop-custom" not in header_names(received(body))


# -- responses --------------------------------------------------------------------------------
def test_status_body_and_headers_pass_through(gateway: GatewayProcess) -> None:
    status, headers, body = gateway.call("GET", "/teapot", [("Authorization", f"Bearer {TOKEN}")])
    assert status == 418
    assert body == TEAPOT_BODY
    assert headers["Content-Type"].startswith("application/json")
    assert headers["X-Backend-Marker"] == "teapot"
    assert int(headers["Content-Length"]) == len(TEAPOT_BODY)


def test_streaming_response_arrives_chunk_by_chunk(gateway: GatewayProcess, echo: EchoServer) -> None:
    echo.state.first_chunk_seen.clear()
    conn = gateway.connect(client_cert=True, timeout=15)
    try:
        conn.request("GET", "/stream")
        resp = conn.getresponse()
        assert resp.status == 200
        first = resp.readline()
        first_at = time.monotonic()
        echo.state.first_chunk_seen.set()
        rest = resp.read()
    finally:
        conn.close()
    assert first == STREAM_CHUNKS[0]
    assert rest == b"".join(STREAM_CHUNKS[1:])
    assert echo.state.client_saw_first_before_last, "the first chunk was held back until the stream ended"
    assert first_at < echo.state.last_chunk_sent_at


# -- backend down -----------------------------------------------------------------------------
def test_backend_down_is_503_status(tmp_path: Path, token_file: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens here
    gw = GatewayProcess.start(tmp_path, dead, token_file)
    try:
        status, headers, body = gw.call("GET", "/api/v1/namespaces", [("Authorization", f"Bearer {TOKEN}")])
    finally:
        gw.stop()
    assert status == 503, body
    assert headers["Content-Type"].startswith("application/json")
    doc = orjson.loads(body)
    assert doc["kind"] == "Status" and doc["status"] == "Failure"
    assert doc["reason"] == "ServiceUnavailable" and doc["code"] == 503
