"""Opt-in probes for bench/watch_memory_probe.py (loaded only through PYTHONPATH by that script;
nothing else in the tree imports it). On SIGUSR2 a process writes, into $WMPROBE_DIR:

- with WMPROBE_TRACEMALLOC=N: tracemalloc started at interpreter start-up with N frames, a
  snapshot ``<pid>-<count>.snap``;
- with WMPROBE_MALLINFO=1: glibc's ``mallinfo2()`` as ``<pid>-<count>.mallinfo`` (JSON): bytes
  malloc has in use, free inside its heaps (fragmentation, never returned) and in mmapped blocks;
- with WMPROBE_TRIM=1 glibc's ``malloc_trim(0)`` runs first (free heap pages back to the system).
"""

from __future__ import annotations

import os

if os.environ.get("WMPROBE_TRACEMALLOC") or os.environ.get("WMPROBE_MALLINFO"):
    import ctypes
    import json
    import signal
    import tracemalloc

    _frames = int(os.environ.get("WMPROBE_TRACEMALLOC") or 0)
    if _frames:
        tracemalloc.start(_frames)
    _count = [0]

    class _MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost")]

    def _dump(_sig: int, _frame: object) -> None:
        _count[0] += 1
        out = os.path.join(os.environ.get("WMPROBE_DIR", "/tmp"), f"{os.getpid()}-{_count[0]}")
        if os.environ.get("WMPROBE_TRIM"):
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        if os.environ.get("WMPROBE_MALLINFO"):
            libc = ctypes.CDLL("libc.so.6")
            libc.mallinfo2.restype = _MallInfo2
            info = libc.mallinfo2()
            with open(out + ".mallinfo.tmp", "w") as f:
                json.dump({name: getattr(info, name) for name, _t in _MallInfo2._fields_}, f)
            os.replace(out + ".mallinfo.tmp", out + ".mallinfo")
        if _frames:
            tracemalloc.take_snapshot().dump(out + ".snap.tmp")
            os.replace(out + ".snap.tmp", out + ".snap")

    signal.signal(signal.SIGUSR2, _dump)
