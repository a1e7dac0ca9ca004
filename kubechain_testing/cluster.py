"""The chain a test session talks to, with no pytest in it: started here (``Kubechain.start``: the
real etcd and services as processes, as ``kubechain up`` runs them) or an already-running API
server reached through a kubeconfig (``Kubechain.attach``). Also a small kubectl runner.

Kept apart from the fixtures so a script, or another test runner, can use the same start-up.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from kubechain_cli.chain import Chain

#: What a service's log says when the port it was given was taken meanwhile (another test worker).
_PORT_TAKEN = ("address already in use", "Errno 98")


class KubechainStartError(RuntimeError):
    """The chain did not become ready (the message carries the tail of each service's log), or the
    kubeconfig given to attach to names no reachable, ready server."""


class KubectlError(RuntimeError):
    """kubectl exited non-zero; ``returncode``, ``stdout`` and ``stderr`` are kept."""

    def __init__(self, argv: list[str], returncode: int, stdout: str, stderr: str) -> None:
        super().__init__(f"{' '.join(argv)} exited with {returncode}: {stderr.strip() or stdout.strip()}")
        self.argv = argv
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


def kubernetes_client() -> Any:
    """The ``kubernetes`` package, or an error saying how to get it (it is optional for kubechain)."""
    try:
        import kubernetes
    except ImportError as err:
        raise ImportError("kubechain's test fixtures need the official Python client: "
                          "pip install 'kubechain[testing]' (or kubernetes)") from err
    return kubernetes


@dataclass
class Kubectl:
    """Runs kubectl against one kubeconfig, in one namespace unless the arguments name another
    (``-n``/``-A`` given later win). ``kubectl("get", "cm", "-o", "name")`` returns stdout and
    raises ``KubectlError`` when kubectl fails (``check=False`` returns the CompletedProcess)."""

    kubeconfig: Path
    namespace: str = ""
    binary: str = "kubectl"
    timeout: float = 60.0

    def argv(self, *args: str) -> list[str]:
        base = [self.binary, "--kubeconfig", str(self.kubeconfig)]
        if self.namespace:
            base += ["--namespace", self.namespace]
        return [*base, *args]

    def run(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*args), input=input, capture_output=True, text=True,
                              timeout=self.timeout, check=False)

    def __call__(self, *args: str, input: str | None = None) -> str:
        done = self.run(*args, input=input)
        if done.returncode != 0:
            raise KubectlError(self.argv(*args), done.returncode, done.stdout, done.stderr)
        return done.stdout


@dataclass
class Kubechain:
    """A ready API server: its kubeconfig and URL, and the ``Chain`` when this session started it."""

    kubeconfig: Path
    server_url: str
    chain: Chain | None = None
    #: Whether core-api runs its controllers; None when attached (not ours to know).
    controllers: bool | None = None
    startup_seconds: float = 0.0

    @classmethod
    def start(cls, data_dir: Path, *, controllers: bool = True, timeout: float = 60.0,
              attempts: int = 3) -> Kubechain:
        """Start etcd, core-api, extensions-api and the gateway in ``data_dir`` on a free port. A
        start that lost its port to another process (say, a parallel test worker) is retried."""
        from kubechain_cli.chain import Chain, free_port  # here: loading the plugin stays cheap (~0.25 s)

        started = time.monotonic()
        for attempt in range(attempts):
            chain = Chain(data_dir, port=free_port(), controllers=controllers)
            try:
                chain.start(timeout=timeout)
            except Exception as err:
                chain.stop()
                logs = _log_tails(chain)
                if attempt + 1 < attempts and any(mark in logs for mark in _PORT_TAKEN):
                    continue
                raise KubechainStartError(f"kubechain did not start in {data_dir}: {err}\n{logs}") from err
            return cls(chain.kubeconfig, chain.server_url, chain, controllers, time.monotonic() - started)
        raise AssertionError("unreachable")

    @classmethod
    def attach(cls, kubeconfig: Path, timeout: float = 30.0) -> Kubechain:
        """Use the API server a kubeconfig's current context names, once it answers ``/readyz``."""
        kubeconfig = kubeconfig.expanduser().resolve()
        if not kubeconfig.is_file():
            raise KubechainStartError(f"kubeconfig {kubeconfig} does not exist")
        server = _current_server(kubeconfig)
        handle = cls(kubeconfig, server)
        kubernetes = kubernetes_client()
        import urllib3

        deadline = time.monotonic() + timeout
        with handle.api_client() as api:
            core = kubernetes.client.CoreV1Api(api)
            while True:
                try:  # an authenticated read: the server is up and these credentials work
                    core.list_namespace(limit=1, _request_timeout=5)
                    return handle
                except kubernetes.client.ApiException as err:
                    if err.status not in (429, 500, 502, 503, 504):
                        raise KubechainStartError(f"{server} (from {kubeconfig}) refused a list of namespaces: "
                                                  f"{err.status} {err.reason}") from None
                    last = f"{err.status} {err.reason}"
                except (urllib3.exceptions.HTTPError, OSError) as err:
                    last = str(err)
                if time.monotonic() > deadline:
                    raise KubechainStartError(f"{server} (from {kubeconfig}) is not ready after {timeout}s: {last}")
                time.sleep(0.2)

    def api_client(self) -> ApiClient:
        """A new ``kubernetes.client.ApiClient`` for this server; close it (or use ``with``)."""
        kubernetes = kubernetes_client()
        client: ApiClient = kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig))
        return client

    def kubectl(self, namespace: str = "", binary: str = "kubectl") -> Kubectl:
        return Kubectl(self.kubeconfig, namespace, binary)

    def stop(self, timeout: float = 3.0) -> None:
        """Stop the processes this session started (an attached server is left alone). A test
        chain is thrown away, so a process still stopping after ``timeout`` seconds is killed: a
        client's idle keep-alive connection otherwise holds the gateway for its whole graceful stop."""
        if self.chain is not None:
            self.chain.stop(timeout=timeout)


def _current_server(kubeconfig: Path) -> str:
    try:
        config = yaml.safe_load(kubeconfig.read_text()) or {}
        context_name = config.get("current-context", "")
        context = next(c["context"] for c in config.get("contexts") or [] if c.get("name") == context_name)
        return str(next(c["cluster"]["server"] for c in config.get("clusters") or []
                        if c.get("name") == context.get("cluster")))
    except (yaml.YAMLError, StopIteration, KeyError, TypeError, AttributeError) as err:
        raise KubechainStartError(f"kubeconfig {kubeconfig}: no server for its current context "
                                  f"({type(err).__name__}: {err})") from err


def _log_tails(chain: Chain, chars: int = 3000) -> str:
    log_dir = chain.log_dir or chain.data_dir / "logs"
    parts = []
    for log in sorted(log_dir.glob("*.log")):
        text = log.read_text(errors="replace")
        parts.append(f"== {log} (last {chars} characters)\n{text[-chars:]}")
    return "\n".join(parts)
