"""Identical watches through the real chain share one upstream watch at the gateway (watchhub.py, issue 15).

The chain is the session's (real etcd, core-api, gateway over HTTPS); clients are raw TLS sockets (a
test decides when each reads), kubectl 1.27 and 1.33, and the official Python client. How many
watches core-api serves is read off its ``apiserver_longrunning_requests{verb="WATCH"}`` for
PodTemplates (merged into the gateway's /metrics; nothing else here watches PodTemplates). What must
hold: clients that would get identical answers are one watch in core-api, and each gets, byte for
byte, what a private watch (another User-Agent: another key) gets, with its own head (its own
Audit-Id); a client at the stream's position joins mid-stream, one behind it gets its own; a
client's timeoutSeconds ends only it; bookmarks are positions; the last client leaving ends the
upstream watch; kubectl and the Python client see every change with two watches at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
import uuid
from typing import Any

import pytest
from kubernetes import client, config, watch
from support.procs import ChainHandle, have_kubectl, kubectl_binary
from support.waiting import eventually

pytestmark = pytest.mark.integration

RESOURCE = "podtemplates"
#: Seconds a read may take on this loaded machine.
WAIT = 30


def _template(name: str, value: str = "0") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name, "labels": {"v": value}},
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}


def _watches(chain: ChainHandle) -> int:
    """core-api's open PodTemplate watches."""
    status, _h, body = chain.request("GET", "/metrics")
    assert status == 200
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith("apiserver_longrunning_requests{") and 'verb="WATCH"' in line \
                and f'resource="{RESOURCE}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def _settled(chain: ChainHandle, expected: int) -> None:
    eventually(lambda: _watches(chain) == expected, 20, f"{expected} PodTemplate watches in core-api "
               f"(now {_watches(chain)})")


@pytest.fixture
def namespace(chain: ChainHandle) -> Any:
    name = f"shared-watch-{uuid.uuid4().hex[:6]}"
    status, _ = chain.json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                          "metadata": {"name": name}})
    assert status == 201
    yield name
    chain.json("DELETE", f"/api/v1/namespaces/{name}")


def _create(chain: ChainHandle, ns: str, name: str = "p") -> str:
    status, obj = chain.json("POST", f"/api/v1/namespaces/{ns}/{RESOURCE}", _template(name))
    assert status == 201, obj
    return str(obj["metadata"]["resourceVersion"])


def _update(chain: ChainHandle, ns: str, value: str, name: str = "p") -> str:
    status, _h, body = chain.request("PATCH", f"/api/v1/namespaces/{ns}/{RESOURCE}/{name}",
                                     raw=json.dumps({"metadata": {"labels": {"v": value}}}).encode(),
                                     headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200, body
    return str(json.loads(body)["metadata"]["resourceVersion"])


class Watch:
    """A raw watch over TLS; ``lines`` reads whole lines of the body, ``ended`` its clean end."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        self.reader, self.writer, self.head = reader, writer, head
        self.buffer = b""
        self.done = False

    @classmethod
    async def open(cls, chain: ChainHandle, ns: str, query: str, agent: str = "shared-test",
                   accept: str = "application/json") -> Watch:
        port = int(chain.url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=chain.ssl_context(), limit=1 << 22)
        writer.write(f"GET /api/v1/namespaces/{ns}/{RESOURCE}?{query} HTTP/1.1\r\nHost: x\r\n"
                     f"User-Agent: {agent}\r\nAccept: {accept}\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 20)
        assert head.startswith(b"HTTP/1.1 200 "), head
        return cls(reader, writer, head)

    async def _chunk(self) -> bytes:
        size = int((await asyncio.wait_for(self.reader.readuntil(b"\r\n"), WAIT)).strip(), 16)
        data = await asyncio.wait_for(self.reader.readexactly(size + 2), WAIT)
        if size == 0:
            self.done = True
        return data[:-2]

    async def lines(self, n: int) -> list[bytes]:
        out: list[bytes] = []
        while len(out) < n:
            while b"\n" not in self.buffer:
                chunk = await self._chunk()
                assert chunk, f"the answer ended after {out}"
                self.buffer += chunk
            line, self.buffer = self.buffer.split(b"\n", 1)
            out.append(line + b"\n")
        return out

    async def ended(self) -> None:
        assert await self._chunk() == b"" and not self.buffer

    def headers(self) -> dict[bytes, bytes]:
        return {k.strip().lower(): v.strip() for k, _, v in
                (line.partition(b":") for line in self.head.split(b"\r\n")[1:] if line)}

    def close(self) -> None:
        self.writer.transport.abort()


def _same_head(a: Watch, b: Watch) -> None:
    ha, hb = a.headers(), b.headers()
    assert ha[b"audit-id"] != hb[b"audit-id"]  # each its own request's
    own = {b"audit-id", b"date"}
    assert {k: v for k, v in ha.items() if k not in own} == {k: v for k, v in hb.items() if k not in own}


async def _in_thread(fn: Any, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


async def test_identical_watches_share_and_get_what_a_private_watch_gets(chain: ChainHandle, namespace: str) -> None:
    base = await _in_thread(_watches, chain)
    rv = await _in_thread(_create, chain, namespace)
    query = f"watch=1&resourceVersion={rv}"
    shared = [await Watch.open(chain, namespace, query) for _ in range(4)]
    private = await Watch.open(chain, namespace, query, agent="private-test")
    await _in_thread(_settled, chain, base + 2)  # the four are one watch in core-api, the other its own
    for w in shared:
        _same_head(w, private)
    rvs = [await _in_thread(_update, chain, namespace, str(i)) for i in range(1, 4)]
    expected = await private.lines(3)
    assert [json.loads(line)["object"]["metadata"]["resourceVersion"] for line in expected] == rvs
    for w in shared:
        assert await w.lines(3) == expected
    # At the stream's position (its last event): joins. Behind it: its own upstream, the same events.
    at_last = await Watch.open(chain, namespace, f"watch=1&resourceVersion={rvs[-1]}")
    behind = await Watch.open(chain, namespace, f"watch=1&resourceVersion={rvs[0]}")
    await _in_thread(_settled, chain, base + 3)
    assert await behind.lines(2) == expected[1:]
    await _in_thread(_update, chain, namespace, "last")
    line = await private.lines(1)
    for w in (*shared, at_last, behind):
        assert await w.lines(1) == line
    for w in (*shared, at_last, behind, private):
        w.close()
    await _in_thread(_settled, chain, base)  # the last one leaving ends the shared upstream watch


async def test_each_client_keeps_its_timeout_and_leaving_leaves_the_others(chain: ChainHandle,
                                                                           namespace: str) -> None:
    base = await _in_thread(_watches, chain)
    rv = await _in_thread(_create, chain, namespace)
    long = await Watch.open(chain, namespace, f"watch=1&resourceVersion={rv}&timeoutSeconds=300")
    started = time.monotonic()
    short = await Watch.open(chain, namespace, f"watch=1&resourceVersion={rv}&timeoutSeconds=3")
    opened = time.monotonic()
    gone = await Watch.open(chain, namespace, f"watch=1&resourceVersion={rv}")
    await _in_thread(_settled, chain, base + 1)
    await short.ended()  # kube's clean end of the body, at its own time
    assert time.monotonic() - opened > 2.5 and time.monotonic() - started < 15
    gone.close()
    await _in_thread(_update, chain, namespace, "1")
    assert json.loads((await long.lines(1))[0])["type"] == "MODIFIED"
    await _in_thread(_settled, chain, base + 1)
    long.close()
    await _in_thread(_settled, chain, base)


async def test_bookmarks_are_positions_to_join_at(chain: ChainHandle, namespace: str) -> None:
    base = await _in_thread(_watches, chain)
    rv = await _in_thread(_create, chain, namespace)
    query = "watch=1&allowWatchBookmarks=true&resourceVersion={}"
    first = [await Watch.open(chain, namespace, query.format(rv)) for _ in range(2)]
    await _in_thread(_settled, chain, base + 1)
    marks = [json.loads((await w.lines(1))[0]) for w in first]  # the chain's bookmark interval is 1 s
    assert marks[0] == marks[1] and marks[0]["type"] == "BOOKMARK"
    mark_rv = marks[0]["object"]["metadata"]["resourceVersion"]
    while True:  # the stream's position is its latest bookmark: read up to what it has sent now
        joined = await Watch.open(chain, namespace, query.format(mark_rv))
        if await _in_thread(_watches, chain) == base + 1:
            break
        joined.close()  # a later bookmark had moved the stream on: try again at that one
        mark_rv = json.loads((await first[0].lines(1))[0])["object"]["metadata"]["resourceVersion"]
        await first[1].lines(1)
    new_rv = await _in_thread(_update, chain, namespace, "1")
    for w in (*first, joined):
        while True:
            event = json.loads((await w.lines(1))[0])
            if event["type"] != "BOOKMARK":
                break
        assert event["type"] == "MODIFIED" and event["object"]["metadata"]["resourceVersion"] == new_rv
    for w in (*first, joined):
        w.close()


async def test_table_watches_share_from_their_start(chain: ChainHandle, namespace: str) -> None:
    base = await _in_thread(_watches, chain)
    rv = await _in_thread(_create, chain, namespace)
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    watches = [await Watch.open(chain, namespace, f"watch=1&resourceVersion={rv}", accept=accept) for _ in range(3)]
    await _in_thread(_settled, chain, base + 1)
    await _in_thread(_update, chain, namespace, "1")
    lines = [await w.lines(1) for w in watches]
    assert lines[0] == lines[1] == lines[2]
    assert json.loads(lines[0][0])["object"]["columnDefinitions"]  # each one's first event has the columns
    for w in watches:
        w.close()


@pytest.mark.skipif(not (have_kubectl("1.27") and have_kubectl("1.33")), reason="kubectl 1.27 and 1.33 needed")
def test_kubectl_get_watch_two_at_once(chain: ChainHandle, namespace: str) -> None:
    _create(chain, namespace)
    env = dict(os.environ, KUBECONFIG=chain.kubeconfig, KUBECACHEDIR=str(chain.chain.data_dir / "kubectl-cache"))
    procs = [subprocess.Popen([kubectl_binary(v), "get", RESOURCE, "-n", namespace, "-w",
                               "-o", "custom-columns=NAME:.metadata.name,V:.metadata.labels.v"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for v in ("1.27", "1.33", "1.33")]
    outputs: list[list[str]] = [[] for _ in procs]

    def read(i: int) -> None:
        stdout = procs[i].stdout
        assert stdout is not None
        for line in stdout:
            outputs[i].append(line.split())

    readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(len(procs))]
    for t in readers:
        t.start()
    try:
        eventually(lambda: all(["p", "0"] in out for out in outputs), 30, f"kubectl listed: {outputs}")
        for value in ("1", "2"):
            _update(chain, namespace, value)
            eventually(lambda v=value: all(["p", v] in out for out in outputs), 30, f"kubectl saw {value}: {outputs}")
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)
    for out in outputs:
        assert [row for row in out if row[0] == "p"] == [["p", "0"], ["p", "1"], ["p", "2"]]


def test_python_client_watch_twice_at_once(chain: ChainHandle, namespace: str) -> None:
    rv = _create(chain, namespace)
    api = client.CoreV1Api(config.new_client_from_config(config_file=chain.kubeconfig))
    seen: list[list[tuple[str, str, str]]] = [[], []]

    def stream(i: int) -> None:
        w = watch.Watch()
        for event in w.stream(api.list_namespaced_pod_template, namespace, resource_version=rv, timeout_seconds=30):
            obj = event["object"]
            seen[i].append((event["type"], obj.metadata.resource_version, obj.metadata.labels["v"]))
            if len(seen[i]) == 3:
                w.stop()

    threads = [threading.Thread(target=stream, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    time.sleep(1)
    rvs = [_update(chain, namespace, str(i)) for i in range(1, 4)]
    for t in threads:
        t.join(60)
    assert seen[0] == seen[1] == [("MODIFIED", r, str(i)) for i, r in enumerate(rvs, 1)]
