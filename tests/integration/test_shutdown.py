"""Graceful shutdown of a backend, on a chain of its own: SIGTERM to core-api turns its
``/readyz`` false for the shutdown delay, then open watches end cleanly and it exits 0.
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration

SHUTDOWN_DELAY = 2.0
#: How long after SIGTERM everything must be over (kube-apiserver's order, bounded here).
DEADLINE = 10.0


@pytest.fixture(params=["unix", "tls"])
def own_chain(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Chain]:
    chain = Chain(tmp_path / "chain", port=free_port(), bookmark_interval=1.0, watch_cache_size=200,
                  shutdown_delay=SHUTDOWN_DELAY, backend_transport=request.param)
    try:
        chain.start(timeout=60)
    except Exception:
        chain.stop()
        for log in sorted((tmp_path / "chain" / "logs").glob("*.log")):
            print(f"== {log.name}\n{log.read_text()[-4000:]}")
        raise
    yield chain
    chain.stop()


@dataclass
class WatchReader:
    """Reads one watch stream to its end on a thread, recording how it ended."""

    conn: http.client.HTTPConnection
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    events: list[dict[str, object]] = field(default_factory=list)
    status: int = 0
    error: BaseException | None = None
    ended_at: float = 0.0
    opened: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.opened.wait(15), f"watch {self.path} did not open"

    def _run(self) -> None:
        try:
            self.conn.request("GET", self.path, headers=self.headers)
            resp = self.conn.getresponse()
            self.status = resp.status
            self.opened.set()
            while True:
                line = resp.readline()
                if not line:
                    break  # http.client raises IncompleteRead if the chunked body was cut off
                self.events.append(json.loads(line))
        except BaseException as err:  # recorded and asserted on by the test
            self.error = err
        finally:
            self.ended_at = time.monotonic()
            self.opened.set()
            self.conn.close()

    def join(self, timeout: float) -> bool:
        assert self.thread is not None
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def types(self) -> list[object]:
        return [e.get("type") for e in self.events]


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (how the chain's links talk on one host)."""

    def __init__(self, socket_path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = socket_path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.socket_path)
        self.sock = sock


def backend_connection(base_url: str, ctx: ssl.SSLContext, timeout: float = 2) -> http.client.HTTPConnection:
    """A direct connection to a backend: its Unix socket, or TLS with the given client certificate."""
    parsed = urllib.parse.urlsplit(base_url)
    if parsed.scheme == "unix":
        return UnixHTTPConnection(parsed.path, timeout=timeout)
    assert parsed.hostname and parsed.port, base_url
    return http.client.HTTPSConnection(parsed.hostname, parsed.port, context=ctx, timeout=timeout)


def front_proxy_context(chain: Chain) -> ssl.SSLContext:
    """What the gateway presents to a backend over TLS (the only client certificate they trust)."""
    ctx = ssl.create_default_context(cafile=chain.pki.ca)
    ctx.load_cert_chain(*chain.pki.pair("front-proxy-client"))
    return ctx


def readyz_status(base_url: str, ctx: ssl.SSLContext) -> int:
    """The backend's own ``/readyz`` status, or -1 once it no longer accepts connections."""
    conn = backend_connection(base_url, ctx)
    try:
        conn.request("GET", "/readyz")
        return conn.getresponse().status
    except OSError:
        return -1
    finally:
        conn.close()


def test_sigterm_drains_core_api(own_chain: Chain) -> None:
    chain = own_chain
    ctx = chain.ssl_context()
    readyz = chain.backend_urls["core-api"]
    assert readyz_status(readyz, ctx) == 200

    watch_path = "/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true"
    via_gateway = WatchReader(http.client.HTTPSConnection("127.0.0.1", chain.port, context=ctx, timeout=30),
                              watch_path)
    via_gateway.start()
    assert via_gateway.status == 200, via_gateway.error
    # The same watch straight at core-api, as the gateway asks for it: its own stream must end
    # properly too (the gateway would mask a cut-off upstream by finishing its response anyway).
    direct = WatchReader(backend_connection(chain.backend_urls["core-api"], front_proxy_context(chain), 30),
                         watch_path, {"X-Remote-User": "kubernetes-admin", "X-Remote-Group": "system:masters"})
    direct.start()
    assert direct.status == 200, direct.error

    # The watch is live: a write shows up on it.
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "before-shutdown"},
                       "data": {"a": "1"}}).encode()
    req = urllib.request.Request(chain.server_url + "/api/v1/namespaces/default/configmaps", data=body,
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
        assert r.status == 201
    deadline = time.monotonic() + 10
    while not ("ADDED" in via_gateway.types() and "ADDED" in direct.types()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "ADDED" in via_gateway.types(), via_gateway.events
    assert "ADDED" in direct.types(), direct.events

    core = chain.processes["core-api"]
    sent_at = time.monotonic()
    core.send_signal(signal.SIGTERM)

    # During the shutdown delay the process still answers, but is not ready.
    statuses: list[int] = []
    while time.monotonic() - sent_at < SHUTDOWN_DELAY * 0.75:
        statuses.append(readyz_status(readyz, ctx))
        if statuses[-1] == 500:
            break
        time.sleep(0.05)
    assert 500 in statuses, f"readyz during the shutdown delay: {statuses}"
    assert core.poll() is None, "core-api exited before its shutdown delay was over"

    # Both watches end: the responses complete (final chunk received), nothing hangs.
    for name, watch in (("through the gateway", via_gateway), ("direct to core-api", direct)):
        assert watch.join(DEADLINE), f"the watch {name} did not end"
        assert watch.error is None, f"the watch {name} broke instead of ending: {watch.error!r}"
        assert watch.ended_at - sent_at >= SHUTDOWN_DELAY * 0.75, f"the watch {name} ended before the delay"
        assert watch.ended_at - sent_at < DEADLINE

    try:
        code = core.wait(max(0.5, DEADLINE - (time.monotonic() - sent_at)))
    except Exception as err:  # TimeoutExpired: report it as a failure, the fixture kills it
        pytest.fail(f"core-api did not exit within {DEADLINE}s of SIGTERM: {err}")
    assert code == 0
    assert time.monotonic() - sent_at < DEADLINE + 1


def test_sigterm_drains_the_gateway(own_chain: Chain) -> None:
    chain = own_chain
    ctx = chain.ssl_context()
    watch = WatchReader(http.client.HTTPSConnection("127.0.0.1", chain.port, context=ctx, timeout=30),
                        "/api/v1/namespaces/default/configmaps?watch=1")
    watch.start()
    assert watch.status == 200, watch.error
    gateway = chain.processes["aggregator"]
    sent_at = time.monotonic()
    gateway.send_signal(signal.SIGTERM)
    # Not ready during the delay, then the open watch ends cleanly and the process exits 0.
    statuses: list[int] = []
    while time.monotonic() - sent_at < SHUTDOWN_DELAY * 0.75:
        try:
            with urllib.request.urlopen(chain.server_url + "/readyz", context=ctx, timeout=2) as r:
                statuses.append(r.status)
        except urllib.error.HTTPError as err:
            statuses.append(err.code)
            break
        time.sleep(0.05)
    assert 500 in statuses, f"gateway readyz during the shutdown delay: {statuses}"
    assert watch.join(DEADLINE), "the watch through the gateway did not end"
    assert watch.error is None, f"the watch broke instead of ending: {watch.error!r}"
    assert gateway.wait(DEADLINE) == 0
    assert time.monotonic() - sent_at < DEADLINE


def test_an_idle_keep_alive_connection_does_not_hold_the_gateways_stop(own_chain: Chain) -> None:
    """A pooled client connection left idle (every client library keeps one) is dropped at once,
    as Go's server closes idle connections; it used to hold the stop for the whole 10 s grace."""
    chain = own_chain
    idle = http.client.HTTPSConnection("127.0.0.1", chain.port, context=chain.ssl_context(), timeout=30)
    idle.request("GET", "/api/v1/namespaces")
    idle.getresponse().read()
    gateway = chain.processes["aggregator"]
    sent_at = time.monotonic()
    gateway.send_signal(signal.SIGTERM)
    assert gateway.wait(DEADLINE) == 0
    assert time.monotonic() - sent_at < SHUTDOWN_DELAY + 3, time.monotonic() - sent_at
    idle.close()


def test_sigterm_while_a_service_waits_for_etcd_stops_it_at_once(tmp_path: Path) -> None:
    """A service still starting (here: no etcd to wait for) stops on SIGTERM at once; uvicorn alone
    would only look at the signal once start-up ended."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "coreapi", "--etcd-servers", "http://127.0.0.1:1",
                             "--bind-unix-socket", str(tmp_path / "core.sock")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        assert proc.stdout is not None
        while time.monotonic() < deadline:  # until it is in start-up proper
            line = proc.stdout.readline()
            if "waiting for etcd" in line or not line:
                break
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        assert time.monotonic() - sent < 5
    finally:
        if proc.poll() is None:
            proc.kill()
