"""kube-aggregator's APIService availability metrics, read off the gateway's APIService informer.

kube's availability controllers keep ``aggregator_unavailable_apiservice{name}`` (a gauge per
APIService: 1 while its ``Available`` condition is not True, else 0; an APIService that is deleted
leaves the series) and ``aggregator_unavailable_apiservice_total{name,reason}`` (counted when a
status write turns an APIService unavailable, by the condition's reason, "UnknownReason" without
one). Here every gateway replica reports the gauge from its informer's copy of the APIServices, so
each replica's ``/metrics`` answers as each kube-apiserver's does; the counter is counted by the
replica whose availability controller runs (the leader: it made the write), so a transition is
counted once across replicas, as in kube where the one apiserver whose write landed counts it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from .apiservices.types import condition, is_available, name_of

UNAVAILABLE_GAUGE = "aggregator_unavailable_apiservice"
UNAVAILABLE_HELP = "[ALPHA] Gauge of APIServices which are marked as unavailable broken down by APIService name."
UNAVAILABLE_TOTAL = "aggregator_unavailable_apiservice_total"
UNAVAILABLE_TOTAL_HELP = ("[ALPHA] Counter of APIServices which are marked as unavailable broken down by APIService "
                          "name and reason.")

Obj = dict[str, Any]


class AvailabilityCollector:
    """Both metrics. One collector: prometheus_client names a counter family without its ``_total``, so
    a Counter of its own would clash with the gauge's name in the registry (Go's client has no such
    rule, and kube exposes both)."""

    def __init__(self, items: Callable[[], Iterable[Obj]]) -> None:
        self.items = items
        #: (name, reason) -> transitions to unavailable counted here.
        self.unavailable: dict[tuple[str, str], int] = {}

    def count_transition(self, old: Obj | None, new: Obj) -> None:
        """kube's SetUnavailableCounter: a write that turned ``new`` unavailable, by its reason."""
        if old is None or is_available(new) or not is_available(old):
            return
        key = (name_of(new), str((condition(new) or {}).get("reason") or "UnknownReason"))
        self.unavailable[key] = self.unavailable.get(key, 0) + 1

    def collect(self) -> Iterable[Metric]:
        gauge = GaugeMetricFamily(UNAVAILABLE_GAUGE, UNAVAILABLE_HELP, labels=["name"])
        for obj in sorted(self.items(), key=name_of):
            gauge.add_metric([name_of(obj)], 0.0 if is_available(obj) else 1.0)
        counter = CounterMetricFamily(UNAVAILABLE_TOTAL, UNAVAILABLE_TOTAL_HELP, labels=["name", "reason"])
        for (name, reason), count in sorted(self.unavailable.items()):
            counter.add_metric([name, reason], float(count))
        return [gauge, counter]

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(UNAVAILABLE_GAUGE, UNAVAILABLE_HELP, labels=["name"]),
                CounterMetricFamily(UNAVAILABLE_TOTAL, UNAVAILABLE_TOTAL_HELP, labels=["name", "reason"])]


def install(informer: Any, writes: Callable[[], bool],
            registry: CollectorRegistry = REGISTRY) -> AvailabilityCollector:
    """Report the gauge from ``informer`` and count transitions it sees while ``writes()`` (this
    replica's availability controller runs). Call once per process."""
    collector = AvailabilityCollector(informer.items)
    registry.register(collector)  # type: ignore[arg-type]

    def on_event(etype: str, obj: Obj, prev: Obj | None) -> None:
        if etype == "MODIFIED" and writes():
            collector.count_transition(prev, obj)

    informer.add_handler(on_event)
    return collector
