"""A process's memory as Linux reports it: what the memory-bound tests read around the work they measure."""

from __future__ import annotations

from pathlib import Path


def status_kib(pid: int, key: str) -> int:
    """A ``/proc/<pid>/status`` figure in KiB (``VmRSS``, ``VmHWM``, ...)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {key} for {pid}")


def reset_peak(pid: int) -> int:
    """Reset ``VmHWM`` to the current RSS (Linux 4.0+; the process's owner may) and return the RSS it
    starts from, in KiB."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    return status_kib(pid, "VmHWM")
