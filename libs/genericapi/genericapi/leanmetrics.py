"""The lean metric kinds (``LeanCounter``, ``LeanGauge``, ``LeanHistogram``): labelled series exposed
exactly as prometheus_client's Counter, Gauge and Histogram are (the same ``/metrics`` text), whose
children are plain slotted numbers updated by one addition, without prometheus_client's per-call
label validation and lock.

They sit outside the server/handlers/registry/storage layers so that every layer may use them: the
request metrics (server), the watch event metrics (handlers) and the etcd call metrics (storage)
are all updated on every request or event (issue 15: prometheus_client's lock and validation were
a visible share of core-api's CPU per request).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import Generic, TypeVar

from prometheus_client.core import Metric
from prometheus_client.registry import REGISTRY, Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

__all__ = ["LeanCounter", "LeanGauge", "LeanGaugeValue", "LeanHistogram", "LeanValue"]


class LeanValue:
    """One labelled series of a ``LeanCounter``: a number whose ``inc`` is one addition."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class LeanGaugeValue(LeanValue):
    """One labelled series of a ``LeanGauge``: ``dec`` and ``set`` besides ``inc``."""

    __slots__ = ()

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = float(value)


V = TypeVar("V", bound=LeanValue)


class _LeanValues(Collector, Generic[V]):
    """A family of labelled single-number series, exposed as prometheus_client exposes its own kind
    (``kind``; each sample named ``name + suffix``), whose children are plain slotted numbers: the
    gateway and the backends update these from their event loop thread only, and a scrape reads
    floats, which CPython reads whole, so no lock and no per-call validation."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...], child: type[V], kind: str,
                 suffix: str, registry: CollectorRegistry) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self.children: dict[tuple[str, ...], V] = {}
        self._child, self._kind, self._suffix = child, kind, suffix
        registry.register(self)

    def labels(self, *labelvalues: str) -> V:
        child = self.children.get(labelvalues)
        if child is None:
            child = self.children[labelvalues] = self._child()
        return child

    def collect(self) -> Iterator[Metric]:
        family = Metric(self.name, self.documentation, self._kind)
        sample = self.name + self._suffix
        for labelvalues, child in list(self.children.items()):
            family.add_sample(sample, dict(zip(self.labelnames, labelvalues, strict=True)), child.value)
        yield family


class LeanCounter(_LeanValues[LeanValue]):
    """A labelled counter exposed exactly as prometheus_client's ``Counter`` is (``<name>_total``,
    ``# TYPE <name> counter``), for series updated on every request: a child's ``inc`` is one
    addition, where prometheus_client's validates and takes a lock."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...],
                 registry: CollectorRegistry = REGISTRY) -> None:
        super().__init__(name.removesuffix("_total"), documentation, labelnames, LeanValue, "counter", "_total",
                         registry)


class LeanGauge(_LeanValues[LeanGaugeValue]):
    """A labelled gauge exposed exactly as prometheus_client's ``Gauge`` is, whose child's ``inc``,
    ``dec`` and ``set`` are one assignment each (see ``_LeanValues``)."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...],
                 registry: CollectorRegistry = REGISTRY) -> None:
        super().__init__(name, documentation, labelnames, LeanGaugeValue, "gauge", "", registry)


class LeanHistogram(Collector):
    """A labelled histogram exposed exactly as prometheus_client's ``Histogram`` is (cumulative
    ``_bucket`` series with ``le``, ``_count``, ``_sum``), whose child's ``observe`` is a bisection and
    two additions, without prometheus_client's per-call validation and locks (see ``_LeanValues``)."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...], buckets: tuple[float, ...],
                 registry: CollectorRegistry = REGISTRY) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self.bounds = (*sorted(float(b) for b in buckets if b != float("inf")), float("inf"))
        self._le = tuple(floatToGoString(b) for b in self.bounds)
        self.children: dict[tuple[str, ...], LeanHistogram.Child] = {}
        registry.register(self)

    class Child:
        __slots__ = ("bounds", "counts", "sum")

        def __init__(self, bounds: tuple[float, ...]) -> None:
            self.bounds = bounds
            self.counts = [0] * len(bounds)
            self.sum = 0.0

        def observe(self, amount: float) -> None:
            self.sum += amount
            self.counts[bisect_left(self.bounds, amount)] += 1  # the first bucket whose bound is >= amount

    def labels(self, *labelvalues: str) -> LeanHistogram.Child:
        child = self.children.get(labelvalues)
        if child is None:
            child = self.children[labelvalues] = LeanHistogram.Child(self.bounds)
        return child

    def collect(self) -> Iterator[Metric]:
        family = Metric(self.name, self.documentation, "histogram")
        for labelvalues, child in list(self.children.items()):
            labels = dict(zip(self.labelnames, labelvalues, strict=True))
            total = 0
            for le, count in zip(self._le, list(child.counts), strict=True):
                total += count
                family.add_sample(self.name + "_bucket", {**labels, "le": le}, float(total))
            family.add_sample(self.name + "_count", labels, float(total))
            family.add_sample(self.name + "_sum", labels, child.sum)
        yield family
