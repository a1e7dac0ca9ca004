"""The gateway streams bodies both ways with bounded buffers (issue 15), through the real chain.

An aggregated API server in the test process (tests/support/streaming_backend.py), registered
with an ExternalName Service and an APIService as a user would, is reached through the real
gateway over HTTPS. Each check is arranged so that a gateway holding a body whole cannot pass it:
the backend holds back the second half of a 4 MiB answer until the client has 1 MiB of it; the
client holds back the rest of a 2.5 MiB upload until the backend has 512 KiB of it; and the
gateway's peak RSS (VmHWM, reset first) while 8 clients each download 32 MiB, or each upload
16 MiB, stays far below what holding those bodies would take (the clients wait for every
answer's head before reading, the backend for every upload before reading: with whole-body
buffering all 8 bodies would sit in the gateway at once). Also: the backend dying mid-answer cuts
the client's answer off and the gateway serves the next request; a chunked ConfigMap upload
crossing kube's 3 MiB limit is kube's 413 and nothing is created.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from support.procmem import reset_peak, status_kib
from support.procs import ChainHandle
from support.streaming_backend import GROUP, GV, MIB, VERSION, StreamingBackend, pattern, serve_backend
from support.waiting import eventually

from kubechain_cli.chain import free_port

pytestmark = pytest.mark.integration

NAMESPACE = "streaming-it"
APISERVICE = f"{VERSION}.{GROUP}"
BLOBS = f"/apis/{GV}/namespaces/{NAMESPACE}/blobs"
DEADLINE = 60.0
CLIENTS = 8
#: Eight 32 MiB answers held at once would be 256 MiB. Streamed, each costs the gateway its
#: transports' buffers whatever its size: measured 3.5-4 MiB of peak RSS per concurrent stream
#: (TLS both sides, uvloop's and aiohttp's flow-control marks, allocator slack), the same for 5
#: and for 20 MiB answers.
DOWNLOAD = 32 * MIB
MAX_DOWNLOAD_GROWTH_KIB = 64 * 1024
#: The size the other upload checks use (under kube's 3 MiB limit for built-in resources).
UPLOAD = 5 * MIB // 2
#: Eight 16 MiB uploads held at once would be 128 MiB (a service-backed APIService has no body
#: limit in kube's aggregator: the aggregated server decides); streamed, ~2 MiB each was measured.
BIG_UPLOAD = 16 * MIB
MAX_UPLOAD_GROWTH_KIB = 48 * 1024
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture(scope="module")
def backend(chain: ChainHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StreamingBackend]:
    port = free_port()
    cert_dir = tmp_path_factory.mktemp("streaming") / "certs"
    with serve_backend(port, cert_dir, "api", NAMESPACE) as server:
        bundle = base64.b64encode((cert_dir / "ca.crt").read_bytes()).decode()
        chain.kubectl("create", "namespace", NAMESPACE, check=False)
        chain.kubectl("apply", "-f", "-", input=f"""
apiVersion: v1
kind: Service
metadata: {{name: api, namespace: {NAMESPACE}}}
spec: {{type: ExternalName, externalName: localhost, ports: [{{port: {port}}}]}}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: {APISERVICE}}}
spec:
  group: {GROUP}
  version: {VERSION}
  groupPriorityMinimum: 1000
  versionPriority: 15
  caBundle: {bundle}
  service: {{name: api, namespace: {NAMESPACE}, port: {port}}}
""")
        eventually(lambda: _available(chain), 60, f"{APISERVICE} Available")
        eventually(lambda: chain.request("GET", f"/apis/{GV}")[0] == 200, 30, "the group-version through the gateway")
        yield server
        chain.kubectl("delete", "apiservice", APISERVICE, "--ignore-not-found", check=False)
        chain.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false", check=False)


def _available(chain: ChainHandle) -> bool:
    status, obj = chain.json("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{APISERVICE}")
    conditions = (obj or {}).get("status", {}).get("conditions") or [] if status == 200 else []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)


def _connect(chain: ChainHandle) -> http.client.HTTPSConnection:
    host, port = chain.url.removeprefix("https://").rsplit(":", 1)
    return http.client.HTTPSConnection(host, int(port), context=chain.ssl_context(), timeout=DEADLINE)


def _until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)




def _upload(chain: ChainHandle, body: bytes, chunked: bool = False,
            between: Callable[[], None] | None = None) -> tuple[int, Any]:
    """POST ``body`` (its first MiB, then ``between()``, then the rest); status and JSON answer."""
    conn = _connect(chain)

    def chunks() -> Iterator[bytes]:
        yield body[:MIB]
        if between is not None:
            between()
        for offset in range(MIB, len(body), 256 * 1024):
            yield body[offset:offset + 256 * 1024]

    headers = {"Content-Type": "application/octet-stream"}
    if not chunked:
        headers["Content-Length"] = str(len(body))
    try:
        try:
            conn.request("POST", BLOBS, body=chunks(), headers=headers, encode_chunked=chunked)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered before the whole body went out: read the answer
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_a_large_answer_reaches_the_client_before_the_backend_finished_it(
        chain: ChainHandle, backend: StreamingBackend) -> None:
    backend.release.clear()
    backend.hold = True
    conn = _connect(chain)
    try:
        conn.request("GET", f"{BLOBS}/big?size={4 * MIB}")
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("Content-Length") == str(4 * MIB)
        first = resp.read(MIB)  # only half of the answer exists yet
        assert first == pattern(0, MIB) and not backend.release.is_set()
        backend.release.set()
        assert first + resp.read() == pattern(0, 4 * MIB)
    finally:
        conn.close()


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_large_upload_reaches_the_backend_while_the_client_still_sends_it(
        chain: ChainHandle, backend: StreamingBackend, chunked: bool) -> None:
    backend.expect(1)
    body = pattern(7, UPLOAD)
    status, seen = _upload(chain, body, chunked, between=lambda: _until(
        "the backend to have 512 KiB of the upload before the client sends the rest",
        lambda: backend.received >= 512 * 1024))
    assert status == 201, seen
    assert (seen["bytes"], seen["sha256"]) == (UPLOAD, hashlib.sha256(body).hexdigest())
    expected = (None, "chunked") if chunked else (str(UPLOAD), None)
    assert (seen["content-length"], seen["transfer-encoding"]) == expected


def test_the_backend_dying_mid_answer_cuts_the_answer_off(chain: ChainHandle, backend: StreamingBackend) -> None:
    conn = _connect(chain)
    try:
        conn.request("GET", f"{BLOBS}/dies?size={4 * MIB}")
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("Content-Length") == str(4 * MIB)
        with pytest.raises(http.client.IncompleteRead) as cut:
            resp.read()
        assert MIB <= len(cut.value.partial) < 4 * MIB
    finally:
        conn.close()
    status, _h, data = chain.request("GET", f"/apis/{GV}")  # the gateway serves the next request
    assert status == 200 and json.loads(data)["groupVersion"] == GV


def test_a_chunked_upload_crossing_the_limit_is_kubes_413(chain: ChainHandle) -> None:
    """To core-api (the 3 MiB limit is kube's for its own resources): the body streams on until
    it crosses the limit, then the 413; the ConfigMap is not created."""
    name = "streaming-413"
    head = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"' + name.encode() + b'"},"data":{"a":"'

    def chunks() -> Iterator[bytes]:
        yield head
        for _ in range(16):
            yield b"x" * (256 * 1024)
        yield b'"}}'

    conn = _connect(chain)
    try:
        try:
            conn.request("POST", CONFIGMAPS, body=chunks(), headers={"Content-Type": "application/json"},
                         encode_chunked=True)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered before the whole body went out: read the answer
        resp = conn.getresponse()
        status, answer = resp.status, json.loads(resp.read())
    finally:
        conn.close()
    assert status == 413
    assert answer == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": "Request entity too large: limit is 3145728", "reason": "RequestEntityTooLarge",
                      "code": 413}
    assert chain.request("GET", f"{CONFIGMAPS}/{name}")[0] == 404


def test_eight_large_downloads_keep_the_gateways_peak_memory_bounded(
        chain: ChainHandle, backend: StreamingBackend) -> None:
    backend.hold = False
    pid = chain.chain.processes["aggregator"].pid
    heads = threading.Barrier(CLIENTS, timeout=DEADLINE)

    def download(_i: int) -> int:
        conn = _connect(chain)
        try:
            conn.request("GET", f"{BLOBS}/big?size={DOWNLOAD}")
            resp = conn.getresponse()
            heads.wait()  # every answer has begun before any is read
            digest = hashlib.sha256()
            size = 0
            while chunk := resp.read(256 * 1024):
                digest.update(chunk)
                size += len(chunk)
            assert digest.hexdigest() == hashlib.sha256(pattern(0, DOWNLOAD)).hexdigest()
            return size
        finally:
            conn.close()

    before = reset_peak(pid)
    with ThreadPoolExecutor(CLIENTS) as pool:
        sizes = list(pool.map(download, range(CLIENTS)))
    grown = status_kib(pid, "VmHWM") - before
    assert sizes == [DOWNLOAD] * CLIENTS
    assert grown < MAX_DOWNLOAD_GROWTH_KIB, (
        f"the gateway's peak RSS grew by {grown} KiB relaying {CLIENTS} x {DOWNLOAD >> 20} MiB answers")
    backend.hold = True


def test_eight_large_uploads_keep_the_gateways_peak_memory_bounded(
        chain: ChainHandle, backend: StreamingBackend) -> None:
    pid = chain.chain.processes["aggregator"].pid
    body = pattern(3, BIG_UPLOAD)
    backend.expect(CLIENTS)  # the backend reads no body before all eight requests reached it
    before = reset_peak(pid)
    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            answers = list(pool.map(lambda _i: _upload(chain, body), range(CLIENTS)))
    finally:
        backend.expect(1)
    grown = status_kib(pid, "VmHWM") - before
    for status, seen in answers:
        assert status == 201 and seen["bytes"] == BIG_UPLOAD
    assert grown < MAX_UPLOAD_GROWTH_KIB, (
        f"the gateway's peak RSS grew by {grown} KiB relaying {CLIENTS} x {BIG_UPLOAD >> 20} MiB uploads")
