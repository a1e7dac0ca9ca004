"""Freeze a process (SIGSTOP) and know that it is frozen before the test goes on.

Exists because ``os.kill(pid, SIGSTOP)`` returns when the signal is queued, not when the process has
stopped: every thread stops only once it is scheduled again and passes through the kernel's signal
code (a thread inside a syscall in uninterruptible sleep, such as etcd's WAL fsync, stops when that
syscall returns). On the 2-core test machine under a full suite, etcd kept answering for a while
after the signal: a read sent after ``os.kill`` was answered by the "frozen" member, the client never
moved on, and the member stopped a moment later under the watches (test_etcd_member_loss's
``test_cache_survives_channel_reset_by_a_failed_call``, test_etcd_wire's cancelled-call test).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

__all__ = ["freeze", "is_frozen", "thaw"]


def _states(pid: int) -> list[str]:
    """Each thread's state letter (``/proc/PID/task/TID/stat``'s third field)."""
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended meanwhile
        states.append(stat[stat.rindex(")") + 2])  # the name in parentheses may hold spaces
    return states


def is_frozen(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (state ``T``)."""
    states = _states(pid)
    return bool(states) and all(state in "Tt" for state in states)


def freeze(pid: int, timeout: float = 10.0) -> float:
    """SIGSTOP ``pid`` and wait until all its threads have stopped; the seconds that took.

    A process that is not alive (``ProcessLookupError``, or a zombie that never stops) fails here,
    naming what it saw, instead of letting the test believe its server is frozen."""
    started = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    delay = 0.0005
    while not is_frozen(pid):
        if time.monotonic() - started > timeout:
            raise AssertionError(f"process {pid} not stopped {timeout}s after SIGSTOP: thread states {_states(pid)}")
        time.sleep(delay)
        delay = min(delay * 2, 0.01)
    return time.monotonic() - started


def thaw(pid: int) -> None:
    """SIGCONT ``pid`` (a process already gone is fine: the test's teardown runs either way)."""
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
