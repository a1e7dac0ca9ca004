"""``kubechain up`` as a user runs it: ready, prints the KUBECONFIG line, kubectl works, Ctrl-C
stops everything."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.procs import kubectl_binary

from kubechain_cli.chain import free_port

pytestmark = pytest.mark.integration


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def test_up_prints_kubeconfig_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    data = tmp_path / "kc"
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kubechain_cli", "up", "--data-dir", str(data),
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines: list[str] = []
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip())
            if line.strip().startswith("export KUBECONFIG="):
                break
        export = [ln.strip() for ln in lines if ln.strip().startswith("export KUBECONFIG=")]
        assert export == [f"export KUBECONFIG={data.resolve() / 'kubeconfig'}"], lines
        assert lines[0].startswith(f"kubechain is ready at https://127.0.0.1:{port} (")
        children = _children(proc.pid)
        assert len(children) == 4  # etcd, core-api, extensions-api, aggregator
        env = dict(os.environ, KUBECONFIG=str(data / "kubeconfig"))
        got = subprocess.run([kubectl_binary(), "get", "namespace", "kube-system", "-o", "name"], env=env,
                             capture_output=True, text=True, timeout=30)
        assert got.stdout.strip() == "namespace/kube-system", got.stderr
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
        rest = proc.stdout.read()
        assert "kubechain stopped" in rest
        for child in children:
            assert not Path(f"/proc/{child}").exists() or "zombie" in Path(f"/proc/{child}/status").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_up_fails_clearly_when_the_port_is_taken(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "kubechain_cli", "up", "--data-dir", str(tmp_path / "kc"),
                               "--port", str(port)], capture_output=True, text=True, timeout=90)
    assert proc.returncode == 1
    assert "kubechain: aggregator exited" in proc.stderr
