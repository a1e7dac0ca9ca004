"""An aggregated API server run inside the test process, for the gateway's streaming tests.

It serves ``streaming.kubechain.test/v1`` over TLS (a certificate from its own test CA, as
``sample_apiserver``) on a thread with its own event loop, so a test can see, while a request is
under way, how much of a body it has received and hold back part of an answer until told. Paths
under ``/apis/streaming.kubechain.test/v1/namespaces/<ns>/blobs/``:

- ``GET .../big?size=N``: N sized bytes (``pattern``), the second half only once ``release`` is set
  (when ``hold`` is true);
- ``GET .../dies?size=N``: a sized answer of N bytes cut off after its first MiB (the connection
  closes, as a backend process dying mid-answer);
- ``POST .../blobs``: an upload; waits (bounded) until ``expect_uploads`` uploads have arrived
  before reading any body, then answers its byte count and SHA-256 (``uploads`` records each, a
  body cut off counts in ``aborted_uploads``); ``received`` is the bytes of the current one so far.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn
from starlette.types import Receive, Scope, Send

from support.sample_apiserver import write_credentials

GROUP = "streaming.kubechain.test"
VERSION = "v1"
GV = f"{GROUP}/{VERSION}"
MIB = 1 << 20
#: How long an upload waits for the others it is told to expect.
BARRIER_SECONDS = 20.0


def pattern(start: int, size: int) -> bytes:
    """Bytes ``start`` to ``start + size`` of a body whose every byte says where it is."""
    first = start % 256
    return (bytes(range(256)) * ((size + first) // 256 + 1))[first:first + size]


class StreamingBackend:
    def __init__(self) -> None:
        self.received = 0
        self.release = threading.Event()
        self.hold = True
        self.uploads: list[dict[str, Any]] = []
        self.aborted_uploads = 0
        self.expect_uploads = 1
        self.arrived = 0
        self.all_arrived = threading.Event()
        self.lock = threading.Lock()

    def expect(self, uploads: int) -> None:
        """Uploads from now on read no body before ``uploads`` of them have arrived (bounded)."""
        with self.lock:
            self.expect_uploads = uploads
            self.arrived = 0
            self.all_arrived.clear()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"].rstrip("/")
        query = dict(p.split("=", 1) for p in scope["query_string"].decode().split("&") if "=" in p)
        if path == f"/apis/{GV}":
            await _json(send, 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GV,
                                    "resources": [{"name": "blobs", "singularName": "blob", "namespaced": True,
                                                   "kind": "Blob", "verbs": ["create", "get"]}]})
        elif path in ("/apis", f"/apis/{GROUP}"):
            gv = {"groupVersion": GV, "version": VERSION}
            group = {"name": GROUP, "versions": [gv], "preferredVersion": gv}
            await _json(send, 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]} if path == "/apis"
                        else {"kind": "APIGroup", "apiVersion": "v1", **group})
        elif path.endswith("/blobs/big"):
            await self._big(send, int(query.get("size", str(4 * MIB))))
        elif path.endswith("/blobs/dies"):
            size = int(query.get("size", str(4 * MIB)))
            await start_sized(send, size)
            await send_pieces(send, 0, MIB)
            raise RuntimeError("the streaming backend dies mid-answer (as the test asked)")
        elif path.endswith("/blobs") and scope["method"] == "POST":
            await self._upload(scope, receive, send)
        else:
            await _json(send, 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
                                    "reason": "NotFound", "message": "not found"})

    async def _big(self, send: Send, size: int) -> None:
        await start_sized(send, size)
        half = size // 2
        await send_pieces(send, 0, half)
        if self.hold:
            await asyncio.to_thread(self.release.wait, BARRIER_SECONDS * 3)
        await send_pieces(send, half, size - half)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _upload(self, scope: Scope, receive: Receive, send: Send) -> None:
        with self.lock:
            self.arrived += 1
            if self.arrived >= self.expect_uploads:
                self.all_arrived.set()
        await asyncio.to_thread(self.all_arrived.wait, BARRIER_SECONDS)
        self.received = 0
        digest = hashlib.sha256()
        size = 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                with self.lock:
                    self.aborted_uploads += 1
                return
            chunk = msg.get("body", b"")
            digest.update(chunk)
            size += len(chunk)
            self.received += len(chunk)
            if not msg.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        seen = {"bytes": size, "sha256": digest.hexdigest(), "content-length": headers.get("content-length"),
                "transfer-encoding": headers.get("transfer-encoding")}
        with self.lock:
            self.uploads.append(seen)
        await _json(send, 201, seen)


async def _json(send: Send, status: int, doc: Any) -> None:
    body = json.dumps(doc).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def start_sized(send: Send, size: int) -> None:
    """The start of a 200 answer of ``size`` bytes (a Content-Length)."""
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/octet-stream"), (b"content-length", str(size).encode())]})


async def send_pieces(send: Send, start: int, size: int) -> None:
    """Bytes ``start`` to ``start + size`` of ``pattern``, 256 KiB a send, more to come."""
    step = 256 * 1024
    for offset in range(start, start + size, step):
        await send({"type": "http.response.body", "body": pattern(offset, min(step, start + size - offset)),
                    "more_body": True})


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # a thread of the test process: no signal handling
        yield


@contextlib.contextmanager
def serve_backend(port: int, cert_dir: Path, service: str, namespace: str) -> Iterator[StreamingBackend]:
    """Run a StreamingBackend on ``127.0.0.1:port`` (HTTPS; ``cert_dir/ca.crt`` is its CA) until
    the block ends."""
    _ca, cert, key = write_credentials(cert_dir, service, namespace)
    backend = StreamingBackend()
    server = _Server(uvicorn.Config(backend, host="127.0.0.1", port=port, log_level="critical", lifespan="off",
                                    access_log=False, ssl_certfile=str(cert), ssl_keyfile=str(key)))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True, name="streaming-backend")
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the streaming backend did not start")
        time.sleep(0.01)
    try:
        yield backend
    finally:
        backend.release.set()
        server.should_exit = True
        thread.join(15)
