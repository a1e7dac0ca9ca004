"""Give the memory a burst of new connections freed back to the system (issue 15, memory per watcher).

Opening many TLS connections at once (an informer fleet reconnecting, ``bench.py``'s 1,000 watches)
allocates and frees a lot of short-lived memory during the handshakes (OpenSSL's handshake state,
certificate parsing, uvloop's buffers). glibc's malloc keeps those freed pages resident inside its
heap, between the connections' long-lived objects, so the gateway's RSS stayed ~20 KiB per open
watch above what the watches use (bench/watch_memory_probe.py --mallinfo --trim: 73 -> 51 KiB per
watcher after ``malloc_trim``). Go's runtime returns such memory on its own (the scavenger); here,
``note_connection`` counts connections as they are made and, once a burst of at least
``BURST`` has been followed by ``QUIET`` seconds without new ones, calls glibc's ``malloc_trim(0)``
once (it releases free pages anywhere in the heap, not only at its top). At most once per
``MIN_INTERVAL`` seconds; a no-op where libc has no ``malloc_trim`` (not glibc).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

#: Connections made since the last trim that make a burst worth trimming after.
BURST = 64
#: Seconds without a new connection that end a burst.
QUIET = 0.5
#: Trims are this far apart at least (a trim walks the heap: a few ms for hundreds of MB).
MIN_INTERVAL = 10.0


def _load_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    fn: Callable[[int], int] = trim
    return fn


class BurstTrimmer:
    """Counts new connections; trims once after each burst (see the module docstring)."""

    def __init__(self, trim: Callable[[int], int] | None = None, burst: int = BURST, quiet: float = QUIET,
                 min_interval: float = MIN_INTERVAL) -> None:
        self._trim = trim if trim is not None else _load_trim()
        self.burst = burst
        self.quiet = quiet
        self.min_interval = min_interval
        self.made = 0
        self.last_made = 0.0
        self.last_trim = -min_interval
        self.trims = 0
        self._timer: asyncio.TimerHandle | None = None

    def note_connection(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._trim is None:
            return
        self.made += 1
        self.last_made = loop.time()
        if self.made >= self.burst and self._timer is None:
            self._timer = loop.call_at(self.last_made + self.quiet, self._check, loop)

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now = loop.time()
        due = max(self.last_made + self.quiet, self.last_trim + self.min_interval)
        if now < due - 0.001:  # still arriving, or trimmed a moment ago: look again then
            self._timer = loop.call_at(due, self._check, loop)
            return
        self.made = 0
        self.last_trim = now
        trim = self._trim
        if trim is None:
            return
        started = time.perf_counter()
        trim(0)
        self.trims += 1
        log.debug("malloc_trim after a burst of connections: %.1f ms", (time.perf_counter() - started) * 1000)


#: The process's trimmer (every listening protocol of a service notes into it).
TRIMMER = BurstTrimmer()
