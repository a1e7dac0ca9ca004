"""Resident memory of each process of a chain, read from ``/proc/<pid>/status``.

Issue 15's memory targets (extra RSS during a LIST ÷ response bytes, core-api RSS per stored
object, memory per watcher) are differences of VmRSS, or of the peak VmHWM after resetting it
with ``echo 5 > /proc/<pid>/clear_refs``, in the server processes themselves: the bench client's
own memory never counts. The companion of bench/proccpu.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from subprocess import Popen
from typing import Any


def status_kib(pid: int, field: str) -> int:
    """One ``kB`` field of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``); 0 once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class ProcMem:
    """VmRSS and VmHWM of every running process of a chain (named as ``Chain.processes``), in KiB."""

    def __init__(self, processes: Mapping[str, Popen[Any]]) -> None:
        self.processes = processes

    def _running(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.processes.items() if p.poll() is None}

    def rss(self) -> dict[str, int]:
        return {name: status_kib(pid, "VmRSS") for name, pid in self._running().items()}

    def reset_peaks(self) -> None:
        """Set each process's VmHWM to its VmRSS now (the kernel's clear_refs 5)."""
        for pid in self._running().values():
            Path(f"/proc/{pid}/clear_refs").write_text("5")

    def peaks(self) -> dict[str, int]:
        return {name: status_kib(pid, "VmHWM") for name, pid in self._running().items()}

    @staticmethod
    def growth(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
        """KiB each process grew by between two readings."""
        return {name: after[name] - before[name] for name in before if name in after}
