"""``kubechain up`` heals itself: any child killed with SIGKILL comes back, nothing written is lost.

The real CLI (``python -m kubechain_cli up``) in its own data dir, a writer creating ConfigMaps
through kubectl's own client library (the official Python client) while one child after the
other (core-api, extensions-api, the gateway, etcd) is killed. The chain must answer again within
a bounded window after each kill, every acknowledged write must still be there, and only SIGTERM
stops it (graceful: every child gone, exit code 0).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from kubechain_cli.chain import free_port

pytestmark = pytest.mark.integration

#: Seconds a killed child may take to serve again (restart backoff 0.5 s + start + readiness).
HEAL_BUDGET = 20.0


@pytest.fixture
def up(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    data = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-m", "kubechain_cli", "up", "--data-dir", str(data),
                             "--port", str(free_port())], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "is ready at" in line or not line:
            break
    else:
        proc.kill()
        pytest.fail("kubechain up did not become ready")
    yield proc, data
    if proc.poll() is None:  # the test failed midway: stop it as a user would, then make sure
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    subprocess.run(["pkill", "-9", "-f", str(data)], check=False)


def child_pids(data: Path, module: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", "--", f"{module}.*{data}"], capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in out]


def child_pid(data: Path, module: str) -> int:
    pids = child_pids(data, module)
    assert pids, f"no {module} process for {data}"
    return pids[0]


def api(data: Path) -> client.CoreV1Api:
    cfg = client.Configuration()
    config.load_kube_config(str(data / "kubeconfig"), client_configuration=cfg)
    cfg.retries = 0
    return client.CoreV1Api(client.ApiClient(cfg))


def create(core: client.CoreV1Api, name: str) -> bool:
    try:
        core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name)),
                                          _request_timeout=5)
        return True
    except Exception:
        return False


@pytest.mark.parametrize("victims", [("-m coreapi", "-m extensionsapi", "-m aggregator", "etcdbin/etcd")])
def test_killed_children_come_back_and_nothing_is_lost(up: tuple[subprocess.Popen[str], Path],
                                                       victims: tuple[str, ...]) -> None:
    proc, data = up
    core = api(data)
    acknowledged: list[str] = []
    counter = 0
    for victim in victims:
        pid = child_pid(data, victim)
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        healed_after = None
        while time.monotonic() - killed_at < HEAL_BUDGET:
            counter += 1
            name = f"sup-{counter}"
            if create(core, name):
                acknowledged.append(name)
                if healed_after is None and time.monotonic() - killed_at > 0.1:
                    healed_after = time.monotonic() - killed_at
                    break
            time.sleep(0.1)
        assert healed_after is not None, f"the chain did not answer within {HEAL_BUDGET}s after killing {victim}"
        deadline = time.monotonic() + HEAL_BUDGET
        while time.monotonic() < deadline and child_pids(data, victim) in ([], [pid]):
            time.sleep(0.1)
        assert child_pids(data, victim) not in ([], [pid]), f"{victim} was not started again"
        # The killed child itself serves again (not only the parts of the chain that did not need it).
        if "extensionsapi" in victim:
            deadline = time.monotonic() + HEAL_BUDGET
            while time.monotonic() < deadline:
                try:
                    client.ApiextensionsV1Api(core.api_client).list_custom_resource_definition(_request_timeout=5)
                    break
                except Exception:
                    time.sleep(0.2)
            else:
                pytest.fail("extensions-api did not serve again")
    stored = {cm.metadata.name for cm in core.list_namespaced_config_map("default").items}
    missing = [name for name in acknowledged if name not in stored]
    assert not missing, f"acknowledged writes lost: {missing}"

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    output = proc.stdout.read() if proc.stdout else ""
    for victim in ("core-api", "extensions-api", "aggregator", "etcd"):
        assert f"{victim} exited with -9; restarting in" in output
        assert f"{victim} restarted (restart 1)" in output
    assert "kubechain stopped" in output
    leftover = subprocess.run(["pgrep", "-f", str(data)], capture_output=True, text=True).stdout.split()
    assert leftover == []


def test_sigterm_while_starting_stops_at_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-m", "kubechain_cli", "up", "--data-dir", str(data),
                             "--port", str(free_port())], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (data / "logs" / "aggregator.log").exists():
        time.sleep(0.05)  # until every child is started (and none is ready yet)
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run(["pkill", "-9", "-f", str(data)], check=False)
    assert proc.returncode == 1, out
    assert "SIGTERM while starting; stopped" in out
    time.sleep(0.5)
    assert subprocess.run(["pgrep", "-f", str(data)], capture_output=True, text=True).stdout.split() == []
