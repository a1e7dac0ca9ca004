"""CPU time per request of each process of a chain, read from ``/proc/<pid>/stat``.

Throughput on a shared 2-core machine moves with whatever else runs; the CPU a process spends per
request does not (much). Issue 15's targets (CPU per create of all services, gateway ÷ core-api
CPU per GET) are read this way, and it is what settled the supposed gateway regression of
2026-11-25 (see the README's Performance section).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from subprocess import Popen
from typing import Any

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


class ProcCPU:
    """Snapshots of every running process of a chain; ``per_request`` gives µs per request."""

    def __init__(self, processes: Mapping[str, Popen[Any]]) -> None:
        self.processes = processes

    def snapshot(self) -> dict[str, float]:
        return {name: cpu_seconds(p.pid) for name, p in self.processes.items() if p.poll() is None}

    @staticmethod
    def per_request(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
        """µs of CPU per request in each process between two snapshots."""
        return {name: (after[name] - before[name]) / n * 1e6 for name in before if name in after}
