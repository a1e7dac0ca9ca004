"""Oversized uploads are refused while they stream, measured by the processes' peak memory.

Issue 14 found the gateway buffering each upload before a backend refused it (8 x 100 MB took it
from 125 MB to 885 MB). ``test_bad_input_answers`` reads the gateway's RSS *after* such uploads;
that catches a buffering gateway only while the allocator keeps the freed chunks resident (it did
when checked: a gateway with its body limit off kept 341 MiB). This test reads the peak instead:
it resets each process's high-water mark (``VmHWM``, writing 5 to ``/proc/<pid>/clear_refs``) and
reads it after the uploads, so a body held whole even for a moment shows (the same gateway: peak
+498 MiB for 4 x 50 MiB), and it checks core-api's peak too (the body must never reach it).
kube-apiserver reads at most its 3 MiB limit + 1 byte of a body before its 413
``Request entity too large: limit is 3145728`` (k8s.io/apiserver endpoints/handlers/rest.go
``limitedReadBody``); the gateway must refuse as the body streams in, and no backend may see it.
(Past the 413 the gateway reads and drops the rest of the body where Go's server closes the
connection; that costs bandwidth, not memory, and is not asserted here.)
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.procmem import reset_peak, status_kib
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

CMS = "/api/v1/namespaces/default/configmaps"
UPLOADS = 4
SIZE = 50 << 20
#: Four 50 MiB bodies held at once would be 200 MiB; one held whole, 50 MiB plus its join's copy.
MAX_GROWTH_KIB = 100 * 1024




def _configmap_body(name: str, size: int) -> tuple[int, Iterator[bytes]]:
    """A ConfigMap whose one value makes the body ``size`` bytes, as a length and 1 MiB blocks."""
    head = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"' + name.encode() + b'"},"data":{"a":"'
    tail = b'"}}'
    block = b"x" * (1 << 20)
    blocks, rest = divmod(size - len(head) - len(tail), len(block))

    def chunks() -> Iterator[bytes]:
        yield head
        for _ in range(blocks):
            yield block
        yield b"x" * rest + tail

    return size, chunks()


def _upload(chain: ChainHandle, name: str, chunked: bool) -> tuple[int, dict[str, str]]:
    """POST the ConfigMap (sized or chunked); the answer's status and metav1.Status body."""
    host, port = chain.url.removeprefix("https://").rsplit(":", 1)
    conn = http.client.HTTPSConnection(host, int(port), context=chain.ssl_context(), timeout=120)
    length, chunks = _configmap_body(name, SIZE)
    headers = {"Content-Type": "application/json"}
    if not chunked:
        headers["Content-Length"] = str(length)
    try:
        try:
            conn.request("POST", CMS, body=chunks, headers=headers, encode_chunked=chunked)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before the whole body went out: read its answer
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_oversized_uploads_never_raise_the_gateways_peak_memory(chain: ChainHandle) -> None:
    pids = {name: chain.chain.processes[name].pid for name in ("aggregator", "core-api")}
    before = {name: reset_peak(pid) for name, pid in pids.items()}

    with ThreadPoolExecutor(UPLOADS) as pool:
        answers = list(pool.map(lambda i: _upload(chain, f"upload-peak-{i}", chunked=bool(i % 2)), range(UPLOADS)))

    grown = {name: status_kib(pid, "VmHWM") - before[name] for name, pid in pids.items()}
    for status, body in answers:
        assert (status, body.get("reason"), body.get("message")) == (
            413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728"), body
    assert grown["aggregator"] < MAX_GROWTH_KIB, (
        f"the gateway's peak RSS grew by {grown['aggregator']} KiB taking {UPLOADS} x {SIZE >> 20} MiB uploads")
    assert grown["core-api"] < MAX_GROWTH_KIB, f"core-api's peak RSS grew by {grown['core-api']} KiB"
    status, listed = chain.json("GET", CMS)
    assert status == 200
    assert not [i for i in listed["items"] if i["metadata"]["name"].startswith("upload-peak-")]
