"""Where events go: a bounded queue and one writer thread in front of every backend.

The request path must never wait on a disk or a webhook, so ``AuditSink.process`` only puts the
event on a bounded queue (kube's buffered backend: a full queue drops the event and counts it in
``apiserver_audit_error_total{plugin="buffered"}``). One thread takes events off in batches, renders
each once (event.render) and hands the batch to every backend: the log backend writes it there, the
webhook backend passes it to its batching task on the event loop. Metrics carry kube's names.

The queue is a ``deque`` (appends and pops are atomic) rather than ``queue.Queue``, whose lock and
condition cost the event loop a few µs per event. The writer takes what has piled up every 20 ms
(sooner when 256 are waiting), so a request costs an append, not a thread wake-up: events reach the
log within about 20 ms. Rendering is Python work that holds
the GIL: the writer yields it every millisecond so the event loop never waits long for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

from genericapi.server.metrics import LeanCounter
from prometheus_client import Counter

from .event import Event, render

log = logging.getLogger(__name__)

#: Counted on every event, so lean (no lock, no per-call validation; prometheus_client's exposition).
#: Unlabelled: its one series is made here, so /metrics shows it at 0 from the start as
#: prometheus_client's unlabelled Counter does.
EVENT_FAMILY = LeanCounter("apiserver_audit_event_total",
                           "Counter of audit events generated and sent to the audit backend.", ())
EVENTS = EVENT_FAMILY.labels()
ERRORS = Counter("apiserver_audit_error_total",
                 "Counter of audit events that failed to be audited properly. Plugin identifies the plugin "
                 "affected by the error.", ["plugin"])
#: Counted on every request (a lean counter: no lock, no per-call validation; same exposition).
LEVELS = LeanCounter("apiserver_audit_level_total", "Counter of policy levels for audit events (1 per request).",
                     ("level",))
BUFFERED_ERRORS = ERRORS.labels("buffered")

#: The writer's pass interval, and the queue length that wakes it before the interval is up.
FLUSH_INTERVAL = 0.02
WAKE_AT = 256
#: Seconds the writer renders before it yields the GIL to the event loop.
WRITER_SLICE = 0.001
#: kube's defaultBatchBufferSize: events held before new ones are dropped.
DEFAULT_BUFFER_SIZE = 10000


def plugin_error(plugin: str, err: object, count: int) -> None:
    """kube's HandlePluginError: count the lost events and say why."""
    ERRORS.labels(plugin).inc(count)
    log.error("Error in audit plugin '%s' affecting %d audit events: %s", plugin, count, err)


class Backend(Protocol):
    """A destination of rendered events (called from the writer thread)."""

    name: str

    def write(self, docs: Sequence[dict[str, Any]]) -> None: ...

    def close(self) -> None: ...


class AuditSink:
    """The bounded queue, the writer thread and the backends behind them."""

    def __init__(self, backends: Sequence[Backend], buffer_size: int = DEFAULT_BUFFER_SIZE) -> None:
        self.backends = list(backends)
        self._max = max(1, buffer_size)
        self._queue: deque[Event] = deque()
        self._wake = threading.Event()
        self._sleeping = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._dropped = 0

    def start(self) -> None:
        if self._thread is None:
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="audit-writer", daemon=True)
            self._thread.start()

    def process(self, event: Event) -> None:
        """Hand one event over without waiting (dropped and counted when the queue is full)."""
        EVENTS.inc()
        if len(self._queue) >= self._max:
            BUFFERED_ERRORS.inc()
            self._dropped += 1
            if self._dropped == 1 or self._dropped % 1000 == 0:
                log.error("Error in audit plugin 'buffered' affecting 1 audit events: audit buffer queue blocked "
                          "(%d dropped so far)", self._dropped)
            return
        self._queue.append(event)
        if self._sleeping and len(self._queue) >= WAKE_AT:
            self._sleeping = False
            self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued, then stop the thread and close the backends."""
        if self._thread is not None:
            self._stopping = True
            self._wake.set()
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.error("audit writer still busy at shutdown; %d queued events are lost", len(self._queue))
            self._thread = None
        for backend in self.backends:
            backend.close()

    def _run(self) -> None:
        while True:
            if len(self._queue) < WAKE_AT and not self._stopping:
                # Let events gather: one pass every FLUSH_INTERVAL (or as soon as WAKE_AT are queued),
                # not a thread wake-up and GIL hand-over per request.
                self._sleeping = True
                if len(self._queue) < WAKE_AT and not self._stopping:  # re-checked after the flag is up
                    self._wake.wait(FLUSH_INTERVAL)
                self._wake.clear()
                self._sleeping = False
            if not self._queue:
                if self._stopping:
                    return
                continue
            batch: list[Event] = []
            while self._queue and len(batch) < 512:
                batch.append(self._queue.popleft())
            docs = []
            slice_end = time.monotonic() + WRITER_SLICE
            for ev in batch:
                try:
                    docs.append(render(ev))
                except Exception as err:
                    plugin_error("render", err, 1)
                if time.monotonic() >= slice_end:
                    # Hand the GIL back: the event loop waiting for it would otherwise stall until the
                    # interpreter's switch interval (5 ms) forces this thread to let go. Not after every
                    # event: a busy loop gives the GIL back only at that interval, and the writer would
                    # render one event per turn and fall behind.
                    time.sleep(0)
                    slice_end = time.monotonic() + WRITER_SLICE
            if docs:
                for backend in self.backends:
                    try:
                        backend.write(docs)
                    except Exception as err:
                        plugin_error(backend.name, err, len(docs))
