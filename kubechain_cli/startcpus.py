"""One CPU kept for core-api while a chain starts (issue 15, cold start): opt-in, measured inconclusive.

A cold start waits for core-api: its import is the longest of the three services' and its bootstrap
hooks come after it. Forked at once, the three services' imports shared two cores three ways, so
core-api's import took about twice its CPU time in wall time while the gateway and extensions-api,
which then wait for core-api anyway, got two thirds of a core each. While the chain starts, the other
services are kept off one of the CPUs this process may use (``sched_setaffinity``, which needs no
privilege and is undone the same way), so core-api has it to itself; once the chain is ready (or the
start failed) every thread of theirs gets the whole set back. Nothing is done with fewer than two
CPUs, where affinity cannot be set, or on a machine already busy (a one-minute load average of
``BUSY_LOAD_PER_CPU`` per CPU): the reservation moves idle capacity to core-api, and there is none to move
there (a busy CPU kept from the other services would only slow them, and the gateway too must be up).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

#: ``KUBECHAIN_START_CPU_RESERVE=1`` turns the reservation on. Off by default: ``bench/chain_start.py
#: --env-ab`` on this 2-CPU machine, loaded by other work, found it 1.31x faster at a load of 6-12,
#: 1.06x at 12-17 and 0.77x slower at 8-10; it has not been measured on a quiet machine, where it is
#: meant to help.
ENV_SWITCH = "KUBECHAIN_START_CPU_RESERVE"
#: A machine is busy, and nothing is reserved, from a one-minute load average of this many runnable
#: tasks per CPU (a chain's own start leaves ~2-3 behind it on 2 CPUs).
BUSY_LOAD_PER_CPU = 4


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return [pid]


def _set(tid: int, cpus: set[int]) -> None:
    with contextlib.suppress(OSError):  # gone, or not ours to change: it keeps what it had
        os.sched_setaffinity(tid, cpus)


class CPUReservation:
    """The other services kept off one CPU until ``release``."""

    def __init__(self, allowed: set[int], others: Iterable[int]) -> None:
        self.allowed = set(allowed)
        self.reserved = min(self.allowed)
        self.pids = list(others)
        for pid in self.pids:
            for tid in _threads(pid):
                _set(tid, self.allowed - {self.reserved})

    def release(self) -> None:
        """Every thread of the other services may use every CPU again (twice over: a thread made
        while the first pass ran inherited the narrow set from its maker)."""
        for _ in range(2):
            for pid in self.pids:
                for tid in _threads(pid):
                    _set(tid, self.allowed)
        self.pids = []


def reserve(others: Iterable[int]) -> CPUReservation | None:
    """Keep ``others`` (pids) off one CPU; None where that is not possible or not useful."""
    if not hasattr(os, "sched_setaffinity") or os.environ.get(ENV_SWITCH, "0") != "1":
        return None
    try:
        allowed = os.sched_getaffinity(0)
    except OSError:
        return None
    if len(allowed) < 2 or os.getloadavg()[0] >= BUSY_LOAD_PER_CPU * len(allowed):
        return None
    return CPUReservation(allowed, others)
