"""The gateway's ``/metrics``: one kube-apiserver's metrics, gathered from the processes of the chain.

kube-apiserver is one process with one registry; the chain is a gateway and members, each with
its own. A scraper pointed at the gateway (as it would be at kube-apiserver, with the credentials of
a ``system:monitoring`` user: the handler chain authenticates and authorizes ``/metrics``) gets the
gateway's own samples plus every member replica's, fetched over the backend links. Samples keep
their labels (kube's ``component="apiserver"`` among them); series that several processes report
with the same labels are added up (counters, histograms, the in-flight and long-running gauges), so
``apiserver_request_total`` of a resource is the one number kube would show. Two exceptions:
``apiserver_storage_objects`` is the same store seen by each replica (the largest count is kept, not
the sum) and each member's ``process_*``/``python_*`` series describe that process only (the
gateway's own are kept; a member's are on its own ``/metrics``, reachable on its link).

This module also records what kube instruments by hand at the gateway's level: its aggregated
discovery (``/api``, ``/apis``) and its health endpoints, with the path as ``subresource``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from genericapi.server import metrics
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

#: Gauges that describe shared state: each process sees the same value, so the largest is kept.
SHARED_GAUGES = frozenset({"apiserver_storage_objects"})
#: Series of one process: only the gateway's own are served here.
PER_PROCESS = ("process_", "python_")

#: Paths kube instruments by hand: discovery (component "apiserver") and health (component "").
_RECORDED = {"/api": metrics.COMPONENT, "/apis": metrics.COMPONENT, "/healthz": "", "/livez": "",
             "/readyz": ""}

Fetch = Callable[[str, str], Awaitable[tuple[int, bytes]]]


class GatewayMetrics:
    """Serves the merged ``/metrics`` and records the gateway's own discovery and health answers;
    everything else goes to ``app`` untouched."""

    def __init__(self, app: ASGIApp, members: Callable[[], Iterable[str]], fetch: Fetch,
                 timeout: float = 3.0) -> None:
        self.app = app
        self.members = members
        self.fetch = fetch
        self.timeout = timeout
        self._labels = {path: metrics.non_resource_labels(path, component) for path, component in _RECORDED.items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path == "/metrics" and scope["method"] in ("GET", "HEAD"):
            body = await self.render()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", CONTENT_TYPE), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})
            return
        labels = self._labels.get(path)
        if labels is None:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        code = 0

        async def recording_send(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            metrics.record_request(labels, code, time.perf_counter() - started)

    async def render(self) -> bytes:
        """The gateway's registry and every member replica's, merged."""
        own = generate_latest(REGISTRY).decode()
        bases = list(self.members())
        answers = await asyncio.gather(*(self._member(base) for base in bases))
        return await asyncio.to_thread(merge, own, [a for a in answers if a is not None])

    async def _member(self, base: str) -> str | None:
        try:
            status, body = await self.fetch(base, "/metrics")
        except (OSError, TimeoutError, ValueError, Exception) as err:  # a member down: serve the rest
            log.debug("metrics of %s: %s", base, err)
            return None
        if status != 200:
            log.debug("metrics of %s: HTTP %d", base, status)
            return None
        return body.decode("utf-8", "replace")


class _Merged(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def merge(own: str, members: list[str]) -> bytes:
    """One exposition from several: same-labelled series added up (the largest kept for shared
    gauges), members' per-process series left out."""
    # Keyed by name and type: the parser names a counter family without its "_total", so a counter
    # and a gauge can share a name (aggregator_unavailable_apiservice and its _total, as kube has).
    families: dict[tuple[str, str], Metric] = {}
    values: dict[tuple[str, str], dict[tuple[str, tuple[tuple[str, str], ...]], list[Any]]] = {}
    for index, text in enumerate([own, *members]):
        for family in text_string_to_metric_families(text):
            if index and family.name.startswith(PER_PROCESS):
                continue
            fkey = (family.name, family.type)
            merged = families.get(fkey)
            if merged is None:
                merged = families[fkey] = Metric(family.name, family.documentation, family.type, family.unit)
                values[fkey] = {}
            series = values[fkey]
            keep_max = family.type == "gauge" and family.name in SHARED_GAUGES
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                seen = series.get(key)
                if seen is None:
                    series[key] = [sample.name, sample.labels, sample.value]
                elif keep_max:
                    seen[2] = max(seen[2], sample.value)
                else:
                    seen[2] += sample.value
    for fkey, merged in families.items():
        merged.samples = [Sample(n, labels, value) for n, labels, value in values[fkey].values()]
    registry_like = _Merged(list(families.values()))
    return generate_latest(registry_like)  # type: ignore[arg-type]
