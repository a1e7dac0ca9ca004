"""A local multi-member etcd cluster on free loopback ports, whose members tests can kill and restart.

Exists for the member-loss tests: one-member etcd (``procs.EtcdServer``) cannot show what happens to
a client's watches when the member it talks to disappears while the cluster stays available.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from kubechain_cli.chain import etcd_binary, free_ports


@dataclass
class EtcdMember:
    name: str
    client_url: str
    peer_url: str
    data_dir: Path
    process: subprocess.Popen[bytes] | None = None

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.client_url + "/health", timeout=1) as r:
                return bool(json.loads(r.read()).get("health") == "true")
        except (urllib.error.URLError, OSError, ValueError):
            return False


@dataclass
class EtcdCluster:
    members: list[EtcdMember] = field(default_factory=list)

    @property
    def endpoints(self) -> list[str]:
        return [m.client_url for m in self.members]

    @classmethod
    def start(cls, base: Path, size: int = 3) -> EtcdCluster:
        ports = free_ports(2 * size)
        members = [EtcdMember(f"m{i}", f"http://127.0.0.1:{ports[2 * i]}", f"http://127.0.0.1:{ports[2 * i + 1]}",
                              base / f"m{i}") for i in range(size)]
        cluster = cls(members)
        for m in members:
            cluster._spawn(m, "new")
        cluster.wait_healthy()
        return cluster

    def _spawn(self, m: EtcdMember, state: str) -> None:
        m.data_dir.mkdir(parents=True, exist_ok=True)
        initial = ",".join(f"{o.name}={o.peer_url}" for o in self.members)
        log = open(m.data_dir / "etcd.log", "ab")
        m.process = subprocess.Popen([
            etcd_binary(), "--name", m.name, "--data-dir", str(m.data_dir / "data"),
            "--listen-client-urls", m.client_url, "--advertise-client-urls", m.client_url,
            "--listen-peer-urls", m.peer_url, "--initial-advertise-peer-urls", m.peer_url,
            "--initial-cluster", initial, "--initial-cluster-state", state,
            "--initial-cluster-token", "kubechain-test", "--heartbeat-interval", "50",
            "--election-timeout", "500", "--log-level", "error",
        ], stdout=log, stderr=subprocess.STDOUT)

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(m.healthy() for m in self.members if m.process is not None):
                return
            time.sleep(0.05)
        raise RuntimeError("etcd cluster did not become healthy")

    def kill(self, index: int) -> None:
        """SIGKILL one member (no graceful shutdown, as when its host dies)."""
        m = self.members[index]
        if m.process is not None:
            m.process.kill()
            m.process.wait(10)
            m.process = None

    def restart(self, index: int) -> None:
        """Start a killed member again on its old data; it rejoins the cluster."""
        m = self.members[index]
        if m.process is None:
            self._spawn(m, "existing")
        self.wait_healthy()

    def stop(self) -> None:
        for m in self.members:
            if m.process is not None:
                m.process.terminate()
        for m in self.members:
            if m.process is not None:
                try:
                    m.process.wait(10)
                except subprocess.TimeoutExpired:
                    m.process.kill()
                m.process = None
