"""kube's watch event metrics (``apiserver_watch_events_total``, ``apiserver_watch_events_sizes``),
kept in the handlers layer because the watch handler records them for every event it sends.

One event sent to 1,000 watchers is 1,000 observations of the same size under the same labels:
recorded one by one (a counter increment and a histogram observation, each under its lock) they
were a quarter of core-api's CPU per direct delivery (py-spy, issue 15). ``sent_batched`` counts
them in a dict instead and adds them up once per event-loop turn: the counter by N, the histogram's
sum by N x size and its bucket by N, which is what N observations add. Readers of ``/metrics`` see
them by the end of the loop turn that sent them. Both series are the lean kinds
(genericapi.leanmetrics: prometheus_client's text, no lock, no label validation per update).
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left

from genericapi.leanmetrics import LeanCounter, LeanHistogram, LeanValue

WATCH_EVENTS = LeanCounter(
    "apiserver_watch_events_total",
    "[ALPHA] Number of events sent in watch clients",
    ("group", "version", "kind"),
)
WATCH_EVENT_SIZES = LeanHistogram(
    "apiserver_watch_events_sizes",
    "[ALPHA] Watch event size distribution in bytes",
    ("group", "version", "kind"),
    buckets=tuple(1024.0 * 2 ** i for i in range(8)),  # 1K .. 128K, kube's
)

#: Observations not yet added: (counter child, histogram child, size) -> how many.
_PENDING: dict[tuple[LeanValue, LeanHistogram.Child, int], int] = {}
_scheduled = False


def _observe_many(sizes: LeanHistogram.Child, size: int, n: int) -> None:
    """``n`` observations of ``size`` in a histogram child, as ``n`` calls of ``observe`` would leave it
    (sizes are whole numbers, so ``n x size`` adds to the sum what ``n`` additions of ``size`` would)."""
    sizes.sum += size * n
    sizes.counts[bisect_left(sizes.bounds, size)] += n  # the first bucket whose bound is >= size (observe's)


def flush() -> None:
    """Add up what ``sent_batched`` counted (also runs by itself at the end of the loop turn)."""
    global _scheduled
    _scheduled = False
    pending = list(_PENDING.items())
    _PENDING.clear()
    for (count, sizes, size), n in pending:
        count.value += n
        _observe_many(sizes, size, n)


class WatchEventMeter:
    """The two children of one watch's kind, looked up once per watch, not per event."""

    __slots__ = ("count", "sizes")

    def __init__(self, group: str, version: str, kind: str) -> None:
        self.count = WATCH_EVENTS.labels(group, version, kind)
        self.sizes = WATCH_EVENT_SIZES.labels(group, version, kind)

    def sent(self, data: bytes) -> bytes:
        self.count.inc()
        self.sizes.observe(len(data))
        return data

    def sent_batched(self, data: bytes) -> bytes:
        """``sent``, added up with the other sends of this loop turn (see the module docstring)."""
        global _scheduled
        key = (self.count, self.sizes, len(data))
        _PENDING[key] = _PENDING.get(key, 0) + 1
        if not _scheduled:
            try:
                asyncio.get_running_loop().call_soon(flush)
            except RuntimeError:  # no loop running: add it up now
                flush()
                return data
            _scheduled = True
        return data
