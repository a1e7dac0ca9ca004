"""Extra core-api processes for replica and restart tests.

The session chain has one core-api behind the gateway. Tests about replicas (two core-api on one
etcd), leader election across processes and restarts midway need core-api processes of their
own that they may SIGKILL without breaking the chain other tests use. ``CoreAPIProcess`` starts
``python -m coreapi`` on a plain-HTTP loopback port (or a Unix socket), against any etcd and key
prefix, and talks to it directly: a backend trusts the caller here as the gateway would be
trusted, so no credentials are involved.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubechain_cli.chain import _die_with_parent, _UnixHTTPConnection, etcd_tls_flags, etcd_tls_for, free_port


def backend_request(url: str, method: str, path: str, body: Any = None, timeout: float = 30,
                    headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """One JSON request to a backend link (``http://host:port`` or ``unix:///path``): (status, body)."""
    if url.startswith("unix://"):
        conn: http.client.HTTPConnection = _UnixHTTPConnection(url[len("unix://"):], timeout)
    else:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    hdrs = {"Accept": "application/json", "X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    hdrs.update(headers or {})
    try:
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, json.loads(raw) if raw else None
    finally:
        conn.close()


@dataclass
class CoreAPIProcess:
    """One core-api process of our own (killable), on plain HTTP."""

    etcd_endpoints: str
    etcd_prefix: str
    log_path: Path
    controllers: bool = True
    extra_args: list[str] = field(default_factory=list)
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> CoreAPIProcess:
        self.port = free_port()
        argv = [sys.executable, "-m", "coreapi", "--port", str(self.port), "--etcd-servers", self.etcd_endpoints,
                *etcd_tls_flags(etcd_tls_for(self.etcd_endpoints)),
                "--etcd-prefix", self.etcd_prefix, "--shutdown-delay", "0.1", "--watch-bookmark-interval", "1",
                "--log-level", "INFO", "--controllers" if self.controllers else "--no-controllers",
                *self.extra_args]
        out = open(self.log_path, "ab")
        self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                        env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True,
                                        preexec_fn=_die_with_parent)
        return self

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"core-api exited with {self.process.returncode}: {self.log_tail()}")
            try:
                status, _ = self.json("GET", "/readyz", timeout=2)
                if status == 200:
                    return
            except (OSError, ValueError, http.client.HTTPException):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"core-api did not become ready in {timeout}s: {self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def json(self, method: str, path: str, body: Any = None, timeout: float = 30) -> tuple[int, Any]:
        if path in ("/readyz", "/healthz", "/livez"):
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                resp.read()
                return resp.status, None
            finally:
                conn.close()
        return backend_request(self.url, method, path, body, timeout=timeout)

    def kill(self) -> None:
        """SIGKILL: no pre-shutdown hook, the lease is not released (a crash)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def etcdctl(endpoints: str, *args: str, value: bytes | None = None) -> bytes:
    """Run etcdctl (the one beside the etcd binary) against ``endpoints``: straight to etcd,
    behind every API server's back; its standard output."""
    from kubechain_cli.chain import etcd_binary

    binary = etcd_binary().rsplit("/", 1)[0] + "/etcdctl"
    tls = etcd_tls_for(endpoints)  # a chain's etcd needs its client certificate
    certs = ["--cacert", tls.cafile, "--cert", tls.certfile, "--key", tls.keyfile] if tls else []
    return subprocess.run([binary, "--endpoints", endpoints, *certs, *args], input=value, capture_output=True,
                          check=True, timeout=30).stdout


def etcd_keys(endpoints: str, prefix: str) -> list[str]:
    """Every key under ``prefix`` in etcd (read with etcdctl, not through any API server)."""
    return [k for k in etcdctl(endpoints, "get", prefix, "--prefix", "--keys-only").decode().splitlines() if k]


def etcd_value(endpoints: str, key: str) -> bytes:
    """The raw value of one key (empty when absent)."""
    out = etcdctl(endpoints, "get", key, "--print-value-only")
    return out[:-1] if out.endswith(b"\n") else out  # etcdctl's one newline; the value may end in 0x0a too


def etcd_delete(endpoints: str, key: str) -> None:
    """Delete one key behind every API server's back (what a crash between two writes leaves)."""
    assert etcdctl(endpoints, "del", key).strip() == b"1", f"{key} was not there to delete"


def etcd_put(endpoints: str, key: str, value: bytes) -> None:
    """Write one key behind every API server's back (to stage what a crash leaves)."""
    etcdctl(endpoints, "put", key, value=value)
