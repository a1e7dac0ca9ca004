"""Services forked from the fork server behave as the ones executed before (kubechain_cli.forkserver):
children of the chain's process in sessions of their own, their command line in ``ps``, logs in the
data dir, flag errors reported with the same status and text, killed ones restarted (by exec), and
whatever cannot be forked is executed instead."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.procs import ChainHandle, start_chain

from kubechain_cli import forkserver
from kubechain_cli.chain import Chain, _die_with_parent, free_port

pytestmark = pytest.mark.integration


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _running(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except FileNotFoundError:
        return False


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONUNBUFFERED="1")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[forkserver.ForkServer]:
    forks = forkserver.ForkServer.launch(_env(), str(tmp_path / "forkserver.log"), preexec_fn=_die_with_parent)
    assert forks is not None, "forking is possible on this machine (Linux, subreaper)"
    yield forks
    forks.close()


def _cmdline(pid: int) -> list[bytes]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")


def test_a_forked_service_is_our_child_in_its_own_session_showing_its_command(
        server: forkserver.ForkServer, tmp_path: Path) -> None:
    # core-api waiting for an etcd that is not there: it runs until killed.
    argv = [sys.executable, "-m", "coreapi", "--etcd-servers", "https://127.0.0.1:1",
            "--bind-unix-socket", str(tmp_path / "core-api.sock")]
    proc = server.spawn(argv, str(tmp_path / "core-api.log"), _env())
    assert proc is not None, server.last_refusal
    assert isinstance(proc, forkserver.ForkedProcess) and proc.args == argv
    ppid, pgrp, session = (int(v) for v in _stat(proc.pid)[1:4])
    assert ppid == os.getpid()  # adopted: poll/wait/kill work here as on a Popen child
    assert pgrp == session == proc.pid  # start_new_session=True, as Popen gave it
    deadline = time.monotonic() + 20
    while _cmdline(proc.pid) != [a.encode() for a in argv] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _cmdline(proc.pid) == [a.encode() for a in argv]
    pgrep = subprocess.run(["pgrep", "-f", "--", f"-m coreapi.*{tmp_path}"], capture_output=True, text=True)
    assert pgrep.stdout.split() == [str(proc.pid)]
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(0.2)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL
    proc.kill()  # gone: a no-op, as Popen's


def test_a_flag_error_of_a_forked_service_is_reported_as_before(
        server: forkserver.ForkServer, tmp_path: Path) -> None:
    log = tmp_path / "aggregator.log"
    proc = server.spawn([sys.executable, "-m", "aggregator", "--no-such-flag"], str(log), _env())
    assert proc is not None, server.last_refusal
    assert proc.wait(60) == 2  # argparse's status, in the log its usage line and message
    executed = subprocess.run([sys.executable, "-m", "aggregator", "--no-such-flag"], capture_output=True,
                              text=True, timeout=60)
    assert executed.returncode == 2
    usage = executed.stderr[executed.stderr.index("usage: kubechain-aggregator"):]
    assert log.read_text().endswith(usage)
    assert "unrecognized arguments: --no-such-flag" in executed.stderr


def test_what_cannot_be_forked_is_refused_so_the_chain_executes_it(
        server: forkserver.ForkServer, tmp_path: Path) -> None:
    log = str(tmp_path / "x.log")
    assert server.spawn(["etcd", "--name", "x"], log, _env()) is None
    assert server.last_refusal == "not a forkable service"
    assert server.spawn([sys.executable, "-m", "coreapi"], log, dict(_env(), KUBECHAIN_SOMETHING="1")) is None
    assert server.last_refusal == "environment differs from the fork server's"
    server.close()
    assert server.proc.poll() is not None  # gone (killed if it was still preloading)
    assert server.spawn([sys.executable, "-m", "coreapi"], log, _env()) is None
    assert server.last_refusal == "fork server gone"


def test_a_fork_server_with_a_thread_refuses_to_fork(tmp_path: Path) -> None:
    (tmp_path / "threadstarter.py").write_text("import threading, time\n"
                                               "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")
    env = dict(_env(), PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    forks = forkserver.ForkServer.launch(env, str(tmp_path / "forkserver.log"), preload=["threadstarter"])
    assert forks is not None
    try:
        assert forks.spawn([sys.executable, "-m", "coreapi", "--help"], str(tmp_path / "c.log"), env) is None
        assert forks.last_refusal == "2 threads in the fork server"
    finally:
        forks.close()


def test_a_chain_forks_its_services_and_restarts_a_killed_one_by_exec(tmp_path: Path) -> None:
    chain = Chain(tmp_path / "data", port=free_port(), controllers=False)
    handle: ChainHandle = start_chain(chain)
    try:
        services = {name: proc for name, proc in chain.processes.items() if name != "etcd"}
        assert sorted(services) == ["aggregator", "core-api", "extensions-api"]
        assert all(isinstance(p, forkserver.ForkedProcess) for p in services.values()), services
        assert chain._forks is None  # the fork server is gone once the chain started
        assert (chain.data_dir / "logs" / "forkserver.log").read_text().startswith("forkserver: preloaded")
        assert "core-api ready" in (chain.data_dir / "logs" / "core-api.log").read_text()
        status, body = handle.json("GET", "/api/v1/namespaces/kube-system")
        assert status == 200, body
        old = chain.processes["core-api"]
        old.send_signal(signal.SIGKILL)
        assert old.wait(10) == -signal.SIGKILL
        new = chain.respawn("core-api")
        assert not isinstance(new, forkserver.ForkedProcess) and new.args == old.args
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status, body = handle.json("GET", "/api/v1/namespaces/kube-system")
            if status == 200:
                break
            time.sleep(0.2)
        assert status == 200, body
    finally:
        chain.stop()
    assert all(p.poll() is not None for p in services.values())


def test_without_forking_every_service_is_executed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(forkserver.ENV_SWITCH, "0")
    chain = Chain(tmp_path / "data", port=free_port(), controllers=False)
    start_chain(chain)
    try:
        assert not any(isinstance(p, forkserver.ForkedProcess) for p in chain.processes.values())
        assert not (chain.data_dir / "logs" / "forkserver.log").exists()
    finally:
        chain.stop()


_STARTER = """
import os, sys
from kubechain_cli import forkserver
from kubechain_cli.chain import _die_with_parent
env = dict(os.environ, PYTHONUNBUFFERED="1")
forks = forkserver.ForkServer.launch(env, sys.argv[1] + "/forkserver.log", preexec_fn=_die_with_parent)
proc = forks.spawn([sys.executable, "-m", "coreapi", "--etcd-servers", "https://127.0.0.1:1",
                    "--bind-unix-socket", sys.argv[1] + "/core-api.sock"], sys.argv[1] + "/core-api.log", env)
forks.close()
print(proc.pid, flush=True)
sys.stdin.read()  # until killed
"""


def test_a_forked_service_dies_with_the_process_that_started_the_chain(tmp_path: Path) -> None:
    starter = subprocess.Popen([sys.executable, "-c", _STARTER, str(tmp_path)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert starter.stdout is not None
        pid = int(starter.stdout.readline())
        assert int(_stat(pid)[1]) == starter.pid  # adopted by the starter, the fork server is gone
        starter.kill()
        starter.wait(10)
        deadline = time.monotonic() + 20
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(pid), "the forked service outlived the process that started it"
    finally:
        if starter.poll() is None:
            starter.kill()
