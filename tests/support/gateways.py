"""Talking to one particular gateway of a chain with several (``Chain(replicas=N)``).

``ChainHandle`` always uses the first gateway (the kubeconfig's). Replica tests need to write
through one gateway and read or watch through another, and to count how many requests fail while
a replica dies: ``GatewayClient`` sends JSON requests to one gateway URL over a kept-alive TLS
connection (reconnecting when it breaks, as a client would), ``GatewayWatch`` reads one watch
stream on a thread, and ``RequestLoop`` sends GETs back to back on a thread and records every
outcome with its time.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from kubechain_cli.chain import Chain


def admin_context(chain: Chain) -> ssl.SSLContext:
    """TLS to a gateway as the admin user (the kubeconfig's credentials)."""
    return chain.ssl_context()


#: Methods sent again on a new connection when a reused one turns out closed (Go's isReplayable).
_RETRIABLE = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


class GatewayClient:
    """JSON requests to one gateway; a broken connection is reopened for the next request."""

    def __init__(self, chain: Chain, url: str, timeout: float = 30) -> None:
        parts = urllib.parse.urlsplit(url)
        assert parts.hostname and parts.port, url
        self.url = url
        self._host, self._port = parts.hostname, parts.port
        self._ctx = admin_context(chain)
        self._timeout = timeout
        self._conn: http.client.HTTPSConnection | None = None

    def _connection(self) -> http.client.HTTPSConnection:
        if self._conn is None:
            self._conn = http.client.HTTPSConnection(self._host, self._port, context=self._ctx, timeout=self._timeout)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method: str, path: str, body: Any = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        """(status, raw body). Connection errors propagate (after closing the connection)."""
        data = json.dumps(body).encode() if body is not None else None
        hdrs = {"Accept": "application/json"}
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        reused = self._conn is not None
        conn = self._connection()
        try:
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            raw = resp.read()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self.close()
            if not (reused and method in _RETRIABLE):
                raise
            # A kept-alive connection the server closed while idle (its keep-alive timeout) before
            # this request reached it: Go's transport and urllib3 send an idempotent request again
            # on a new connection; so does this client, once.
            return self.request(method, path, body, headers)
        except (OSError, http.client.HTTPException):
            self.close()
            raise
        if resp.getheader("Connection", "").lower() == "close":
            self.close()
        return resp.status, raw

    def json(self, method: str, path: str, body: Any = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
        status, raw = self.request(method, path, body, headers)
        return status, json.loads(raw) if raw else None


@dataclass
class GatewayWatch:
    """One watch through a gateway, read on a thread until it ends or ``close``."""

    chain: Chain
    url: str
    path: str
    events: list[dict[str, Any]] = field(default_factory=list)
    status: int = 0
    error: BaseException | None = None
    opened: threading.Event = field(default_factory=threading.Event)
    _conn: http.client.HTTPSConnection | None = None
    _thread: threading.Thread | None = None

    def start(self) -> GatewayWatch:
        parts = urllib.parse.urlsplit(self.url)
        assert parts.hostname and parts.port
        self._conn = http.client.HTTPSConnection(parts.hostname, parts.port, context=admin_context(self.chain),
                                                 timeout=60)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self.opened.wait(15), f"watch {self.path} on {self.url} did not open"
        assert self.status == 200, f"watch {self.path} on {self.url}: status {self.status} ({self.error})"
        return self

    def _run(self) -> None:
        assert self._conn is not None
        try:
            self._conn.request("GET", self.path, headers={"Accept": "application/json"})
            resp = self._conn.getresponse()
            self.status = resp.status
            self.opened.set()
            while True:
                line = resp.readline()
                if not line:
                    break
                self.events.append(json.loads(line))
        except BaseException as err:  # recorded; the test asserts on events and error
            self.error = err
        finally:
            self.opened.set()

    def wait_for(self, predicate: Any, timeout: float) -> dict[str, Any]:
        """The first event matching ``predicate`` (waiting up to ``timeout`` seconds for it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in list(self.events):
                if predicate(event):
                    return event
            time.sleep(0.02)
        got = [(e.get("type"), ((e.get("object") or {}).get("metadata") or {}).get("name")) for e in self.events]
        raise AssertionError(f"no matching event on {self.path} via {self.url} in {timeout}s; got {got}")

    def close(self) -> None:
        if self._conn is not None:
            sock = self._conn.sock
            if sock is not None:
                try:
                    sock.shutdown(2)
                except OSError:
                    pass
            self._conn.close()
        if self._thread is not None:
            self._thread.join(5)


@dataclass
class Outcome:
    at: float
    status: int  # 0: the request raised (connection error)
    detail: str = ""


@dataclass
class RequestLoop:
    """GETs ``path`` through one gateway back to back on a thread, recording every outcome."""

    chain: Chain
    url: str
    path: str
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> RequestLoop:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        client = GatewayClient(self.chain, self.url, timeout=10)
        try:
            while not self._stop.is_set():
                try:
                    status, raw = client.request("GET", self.path)
                    detail = raw[:300].decode("utf-8", "replace") if status != 200 else ""
                    self.outcomes.append(Outcome(time.monotonic(), status, detail))
                except (OSError, http.client.HTTPException) as err:
                    self.outcomes.append(Outcome(time.monotonic(), 0, repr(err)))
        finally:
            client.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(15)

    def failures(self, since: float = 0.0) -> list[Outcome]:
        return [o for o in self.outcomes if o.at >= since and o.status != 200]

    def count(self, since: float = 0.0) -> int:
        return sum(1 for o in self.outcomes if o.at >= since)
