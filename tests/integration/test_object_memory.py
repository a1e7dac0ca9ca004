"""core-api's memory per stored object, controllers on as ``kubechain up`` runs them (issue 15: <= 3 KB).

What each stored ConfigMap costs core-api: the watch cache's entry (its JSON and selector
attributes, no decoded dict: storage/cacher.py) and the window's event, plus what the in-process
controllers keep of it (the garbage collector's informer copy and graph node; the root-CA
publisher keeps only ``kube-root-ca.crt``). This test has a chain of its own with controllers on,
stores one ConfigMap through core-api (a 200-byte payload, as bench/list_bench.py's), copies it
into etcd COUNT times (names and uids changed; the watch cache and every informer receive them as
they would creates), waits until core-api lists them all and its RSS settles, and bounds VmRSS
growth ÷ COUNT. Memory, not time: the figure holds under load. Decoded dicts kept in the cache
(~2.3 KB each) or a second full copy per informer would cross the bound.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import orjson
import pytest
from support.coreapi_procs import backend_request
from support.etcdfill import put_copies
from support.procmem import status_kib
from support.procs import ChainHandle, start_chain

from kubechain_cli.chain import Chain, _UnixHTTPConnection, free_port

pytestmark = pytest.mark.integration

NS = "object-memory"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
COUNT = 10_000
#: Bytes of core-api VmRSS per stored ConfigMap (see the module docstring for what it holds).
MAX_BYTES_PER_OBJECT = 3_000
ADMIN = {"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"}


def _count(chain: Chain) -> int:
    conn = _UnixHTTPConnection(chain.backend_urls["core-api"].removeprefix("unix://"), 120)
    try:
        conn.request("GET", CMS, headers={"Accept": "application/json", **ADMIN})
        resp = conn.getresponse()
        raw = resp.read()
        assert resp.status == 200, raw[:300]
        return len(orjson.loads(raw)["items"])
    finally:
        conn.close()


def _settled_rss(pid: int, quiet_kib: int = 256, timeout: float = 60.0) -> int:
    """VmRSS once it has moved less than ``quiet_kib`` over two seconds (controllers done)."""
    deadline = time.monotonic() + timeout
    last = status_kib(pid, "VmRSS")
    while True:
        time.sleep(2.0)
        now = status_kib(pid, "VmRSS")
        if abs(now - last) < quiet_kib or time.monotonic() > deadline:
            return now
        last = now


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChainHandle]:
    chain = Chain(tmp_path_factory.mktemp("object-memory"), port=free_port())
    handle = start_chain(chain)
    try:
        yield handle
    finally:
        chain.stop()


def test_core_api_rss_per_stored_object_with_controllers_on(own: ChainHandle) -> None:
    chain = own.chain
    url = chain.backend_urls["core-api"]
    status, body = backend_request(url, "POST", "/api/v1/namespaces",
                                   {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    assert status == 201, body
    status, body = backend_request(url, "POST", CMS, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-00000"}, "data": {"v": "x" * 200}})
    assert status == 201, body
    pid = chain.processes["core-api"].pid
    _count(chain)  # whatever a first LIST leaves allocated for good is not the objects'
    before = _settled_rss(pid)
    asyncio.run(put_copies(chain, f"{chain.etcd_prefix}/configmaps/{NS}/cm-00000".encode(), range(1, COUNT + 1)))
    deadline = time.monotonic() + 120
    while _count(chain) < COUNT + 2 and time.monotonic() < deadline:  # + cm-00000 and kube-root-ca.crt
        time.sleep(0.5)
    assert _count(chain) == COUNT + 2
    after = _settled_rss(pid)
    per_object = (after - before) * 1024 / COUNT
    print(f"core-api RSS per stored ConfigMap (controllers on): {per_object:.0f} bytes "
          f"({before} -> {after} KiB for {COUNT})")
    assert per_object <= MAX_BYTES_PER_OBJECT, f"{per_object:.0f} bytes per stored ConfigMap"
