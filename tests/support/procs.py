"""Real processes for tests: an etcd server and the whole chain, on free loopback ports."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubechain_cli.chain import Chain, etcd_binary, free_ports


@dataclass
class EtcdServer:
    endpoint: str
    process: subprocess.Popen[bytes]
    data_dir: Path

    @classmethod
    def start(cls, data_dir: Path) -> EtcdServer:
        client, peer = free_ports(2)
        endpoint = f"http://127.0.0.1:{client}"
        log = open(data_dir / "etcd.log", "ab")
        proc = subprocess.Popen([
            etcd_binary(), "--name", "test", "--data-dir", str(data_dir / "etcd"),
            "--listen-client-urls", endpoint, "--advertise-client-urls", endpoint,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"test=http://127.0.0.1:{peer}", "--log-level", "error",
        ], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(endpoint + "/health", timeout=1) as r:
                    if json.loads(r.read()).get("health") == "true":
                        return cls(endpoint, proc, data_dir)
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.05)
        proc.kill()
        raise RuntimeError("etcd did not start")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def kubectl_binary(version: str = "") -> str:
    """The kubectl on PATH, or the per-minor binary beside its real file (``kubectl.1.27``)."""
    base = shutil.which("kubectl")
    if base is None:
        raise RuntimeError("kubectl is not on PATH")
    if not version:
        return base
    path = Path(os.path.realpath(base)).parent / f"kubectl.{version}"
    if not path.exists():
        raise RuntimeError(f"no {path}")
    return str(path)


def have_kubectl(version: str) -> bool:
    try:
        kubectl_binary(version)
    except RuntimeError:
        return False
    return True


def kubectl_params(*versions: str) -> list[Any]:
    """``pytest.param`` per kubectl minor version, each skipped (with the reason) where it is missing."""
    import pytest

    return [pytest.param(v, marks=pytest.mark.skipif(not have_kubectl(v), reason=f"no kubectl.{v}"))
            for v in versions]


def start_chain(chain: Chain, timeout: float = 60) -> ChainHandle:
    """Start ``chain``; on failure stop it and print the tail of every process log."""
    try:
        chain.start(timeout=timeout)
    except Exception:
        chain.stop()
        for log in sorted((chain.data_dir / "logs").glob("*.log")):
            print(f"== {log.name}\n{log.read_text()[-4000:]}")
        raise
    return ChainHandle(chain)


@dataclass
class ChainHandle:
    chain: Chain

    @property
    def kubeconfig(self) -> str:
        return str(self.chain.kubeconfig)

    @property
    def url(self) -> str:
        return self.chain.server_url

    def kubectl(self, *args: str, version: str = "", input: str | None = None, check: bool = True,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
        # Discovery cached per chain: kubectl keys its cache by host:port, and a later chain on a
        # reused port serving other groups (--runtime-config) was answered from the earlier one's.
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, KUBECACHEDIR=str(self.chain.data_dir / "kubectl-cache"))
        env.pop("KUBECTL_EXTERNAL_DIFF", None)
        proc = subprocess.run([kubectl_binary(version), *args], input=input, capture_output=True, text=True,
                              env=env, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def ssl_context(self) -> ssl.SSLContext:
        return self.chain.ssl_context()

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                raw: bytes | None = None, auth: bool = True) -> tuple[int, dict[str, str], bytes]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        hdrs = {"Content-Type": "application/json"} if data is not None else {}
        hdrs.update(headers or {})
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=hdrs)
        if auth:
            ctx = self.ssl_context()
        else:
            ctx = ssl.create_default_context(cafile=self.chain.pki.ca)
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
                return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
        except urllib.error.HTTPError as err:
            return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()

    def json(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        status, _h, data = self.request(method, path, body, **kw)
        return status, json.loads(data) if data else None
