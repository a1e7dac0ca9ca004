"""kube's watch event metrics (``apiserver_watch_events_total``, ``apiserver_watch_events_sizes``),
kept in the handlers layer because the watch handler records them for every event it sends."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

WATCH_EVENTS = Counter(
    "apiserver_watch_events_total",
    "[ALPHA] Number of events sent in watch clients",
    ["group", "version", "kind"],
)
WATCH_EVENT_SIZES = Histogram(
    "apiserver_watch_events_sizes",
    "[ALPHA] Watch event size distribution in bytes",
    ["group", "version", "kind"],
    buckets=tuple(1024.0 * 2 ** i for i in range(8)),  # 1K .. 128K, kube's
)


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
