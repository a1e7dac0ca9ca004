"""Through the chain: an update, a patch and a delete cost core-api one etcd call each (issue 15).

core-api's ``etcd_requests_total`` (read over its own socket, as the gateway reaches it) is compared
around each request on a RuntimeClass, a cluster-scoped kind no controller touches (a namespaced one
gets a LIST from any namespace deletion under way), once the watch cache holds the object (a GET at
resourceVersion=0 answers from the cache). Concurrent writers through the gateway
(GET, then PUT with the resourceVersion, again on a 409) end with every increment kept.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

_LINE = re.compile(r'^etcd_requests_total\{operation="([^"]*)",type="runtimeclasses.node.k8s.io"\} ([0-9.e+]+)$',
                   re.M)
TEMPLATE = {"template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}


class _Unix(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=30)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(self._path)
        self.sock = sock


def runtimeclass_calls(chain: ChainHandle) -> dict[str, int]:
    url = chain.chain.replica_urls["core-api"][0]
    assert url.startswith("unix://"), url
    conn = _Unix(url.removeprefix("unix://"))
    try:
        conn.request("GET", "/metrics", headers={"X-Remote-User": "admin", "X-Remote-Group": "system:masters"})
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    return {op: int(float(v)) for op, v in _LINE.findall(text)}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def cached(chain: ChainHandle, path: str, rv: str) -> None:
    """Wait until core-api's watch cache serves ``path`` at ``rv``."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        status, got = chain.json("GET", f"{path}?resourceVersion=0")
        if status == 200 and got["metadata"]["resourceVersion"] == rv:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} never reached the watch cache at {rv}")


@pytest.fixture
def namespace(chain: ChainHandle) -> Iterator[str]:
    name = f"cu-{uuid.uuid4().hex[:8]}"
    status, _ = chain.json("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert status == 201
    yield name
    chain.json("DELETE", f"/api/v1/namespaces/{name}")


def test_update_patch_delete_are_one_etcd_call_each(chain: ChainHandle) -> None:
    base = "/apis/node.k8s.io/v1/runtimeclasses"
    name = f"cu-{uuid.uuid4().hex[:8]}"
    status, created = chain.json("POST", base, {"metadata": {"name": name}, "handler": "runc"})
    assert status == 201, created
    path = f"{base}/{name}"
    cached(chain, path, created["metadata"]["resourceVersion"])

    before = runtimeclass_calls(chain)
    body = {**created, "metadata": {**created["metadata"], "labels": {"a": "1"}}}
    status, updated = chain.json("PUT", path, body)
    assert status == 200, updated
    assert delta(before, runtimeclass_calls(chain)) == {"update": 1}
    cached(chain, path, updated["metadata"]["resourceVersion"])

    before = runtimeclass_calls(chain)
    status, _h, raw = chain.request("PATCH", path, {"metadata": {"labels": {"b": "2"}}},
                                    headers={"Content-Type": "application/merge-patch+json"})
    patched: dict[str, Any] = json.loads(raw)
    assert status == 200 and patched["metadata"]["labels"] == {"a": "1", "b": "2"}, patched
    assert delta(before, runtimeclass_calls(chain)) == {"update": 1}
    cached(chain, path, patched["metadata"]["resourceVersion"])

    # The old resourceVersion: kube's 409 (the cached copy is current, so no second read).
    status, body409 = chain.json("PUT", path, body)
    assert status == 409 and body409["reason"] == "Conflict"
    assert body409["message"] == (f'Operation cannot be fulfilled on runtimeclasses.node.k8s.io "{name}": the '
                                  "object has been modified; please apply your changes to the latest version and "
                                  "try again")

    before = runtimeclass_calls(chain)
    status, deleted = chain.json("DELETE", path)
    assert status == 200, deleted
    assert delta(before, runtimeclass_calls(chain)) == {"delete": 1}
    assert chain.json("GET", path)[0] == 404


def test_concurrent_writers_through_the_chain_lose_nothing(chain: ChainHandle, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/podtemplates"
    status, _ = chain.json("POST", base, {"metadata": {"name": "n", "annotations": {"n": "0"}}, **TEMPLATE})
    assert status == 201
    path = f"{base}/n"
    writers = 8

    def writer(_: int) -> int:
        conflicts = 0
        while True:
            status, current = chain.json("GET", path)
            assert status == 200
            current["metadata"]["annotations"]["n"] = str(int(current["metadata"]["annotations"]["n"]) + 1)
            status, answer = chain.json("PUT", path, current)
            if status == 200:
                return conflicts
            assert status == 409 and answer["reason"] == "Conflict", answer
            conflicts += 1

    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(writer, range(writers)))
    status, final = chain.json("GET", path)
    assert status == 200 and final["metadata"]["annotations"]["n"] == str(writers)
