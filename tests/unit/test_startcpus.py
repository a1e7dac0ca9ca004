"""kubechain_cli.startcpus: the other services are kept off one CPU while a chain starts on an idle
machine, and every thread of theirs (those made meanwhile included) gets the whole set back afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kubechain_cli import startcpus

_CHILD = """
import sys, threading, time
stop = threading.Event()
def spawn():
    while not stop.is_set():
        threading.Thread(target=stop.wait, daemon=True).start()  # threads made while narrowed
        time.sleep(0.05)
threading.Thread(target=spawn, daemon=True).start()
print("up", flush=True)
sys.stdin.readline()
"""


def _masks(pid: int) -> set[frozenset[int]]:
    out = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out.add(frozenset(os.sched_getaffinity(int(tid))))
        except OSError:
            pass  # a thread that ended meanwhile
    return out


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two CPUs and sched_setaffinity")
def test_others_are_kept_off_one_cpu_then_given_every_cpu_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # an idle machine
    monkeypatch.setenv(startcpus.ENV_SWITCH, "1")
    allowed = frozenset(os.sched_getaffinity(0))
    child = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "up"
        reservation = startcpus.reserve([child.pid])
        assert reservation is not None
        narrow = allowed - {reservation.reserved}
        time.sleep(0.3)  # threads made now inherit the narrow set
        assert _masks(child.pid) == {narrow}
        assert os.sched_getaffinity(0) == allowed  # this process is not touched
        reservation.release()
        assert _masks(child.pid) == {allowed}
    finally:
        child.kill()
        child.wait()


def test_not_asked_for_busy_or_one_cpu_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_setaffinity", lambda _pid, _cpus: pytest.fail("affinity set"))
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.delenv(startcpus.ENV_SWITCH, raising=False)  # off unless asked for
    assert startcpus.reserve([os.getpid()]) is None
    monkeypatch.setenv(startcpus.ENV_SWITCH, "1")
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (8.0, 0.0, 0.0))  # 4 runnable per CPU: busy
    assert startcpus.reserve([os.getpid()]) is None
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert startcpus.reserve([os.getpid()]) is None
