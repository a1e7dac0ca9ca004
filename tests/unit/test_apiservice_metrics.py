"""aggregator_unavailable_apiservice (gauge from the APIService cache) and
aggregator_unavailable_apiservice_total (counted on a write that makes an APIService unavailable,
by reason, only where this replica's availability controller writes), with kube's names and help."""

from __future__ import annotations

from typing import Any

from aggregator import apiservicemetrics
from aggregator.metricsmerge import merge
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families


def apiservice(name: str, status: str | None, reason: str = "") -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name}, "spec": {}}
    if status is not None:
        cond = {"type": "Available", "status": status}
        if reason:
            cond["reason"] = reason
        obj["status"] = {"conditions": [cond]}
    return obj


class Cache:
    """The two things install() reads of the gateway's APIService informer: items and handlers."""

    def __init__(self, objs: list[dict[str, Any]]) -> None:
        self.objs = objs
        self.handlers: list[Any] = []

    def items(self) -> list[dict[str, Any]]:
        return list(self.objs)

    def add_handler(self, handler: Any) -> None:
        self.handlers.append(handler)

    def modify(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.objs[self.objs.index(old)] = new
        for handler in self.handlers:
            handler("MODIFIED", new, old)


REGISTRY = CollectorRegistry()


def total(name: str, reason: str) -> float:
    for family in text_string_to_metric_families(generate_latest(REGISTRY).decode()):
        for sample in family.samples:
            if sample.name == "aggregator_unavailable_apiservice_total" and sample.labels == {"name": name,
                                                                                           "reason": reason}:
                return sample.value
    return 0.0


def test_gauge_and_counter_as_kube_reports_them() -> None:
    local = apiservice("v1.", "True", "Local")
    metrics_api = apiservice("v1beta1.metrics.k8s.io", "True", "Passed")
    fresh = apiservice("v1.example.com", None)
    cache = Cache([metrics_api, local, fresh])
    registry = REGISTRY
    leader = [True]
    apiservicemetrics.install(cache, lambda: leader[0], registry)
    text = generate_latest(registry).decode()
    assert ("# HELP aggregator_unavailable_apiservice [ALPHA] Gauge of APIServices which are marked as unavailable "
            "broken down by APIService name.\n# TYPE aggregator_unavailable_apiservice gauge\n"
            'aggregator_unavailable_apiservice{name="v1."} 0.0\n'
            'aggregator_unavailable_apiservice{name="v1.example.com"} 1.0\n'
            'aggregator_unavailable_apiservice{name="v1beta1.metrics.k8s.io"} 0.0\n') in text

    before = total("v1beta1.metrics.k8s.io", "MissingEndpoints")
    down = apiservice("v1beta1.metrics.k8s.io", "False", "MissingEndpoints")
    cache.modify(metrics_api, down)
    assert total("v1beta1.metrics.k8s.io", "MissingEndpoints") == before + 1
    assert 'aggregator_unavailable_apiservice{name="v1beta1.metrics.k8s.io"} 1.0' in generate_latest(registry).decode()
    # Still unavailable for another reason: no new transition, nothing counted (kube counts changes).
    other = apiservice("v1beta1.metrics.k8s.io", "False", "FailedDiscoveryCheck")
    cache.modify(down, other)
    assert total("v1beta1.metrics.k8s.io", "FailedDiscoveryCheck") == 0
    # Back, then down again on a replica that does not write the status: not counted there.
    up = apiservice("v1beta1.metrics.k8s.io", "True", "Passed")
    cache.modify(other, up)
    leader[0] = False
    cache.modify(up, apiservice("v1beta1.metrics.k8s.io", "Unknown"))
    assert total("v1beta1.metrics.k8s.io", "UnknownReason") == 0
    leader[0] = True
    again = apiservice("v1beta1.metrics.k8s.io", "Unknown")
    cache.modify(cache.objs[0], up)
    cache.modify(up, again)
    assert total("v1beta1.metrics.k8s.io", "UnknownReason") == 1  # a condition with no reason
    text = generate_latest(registry).decode()
    assert ("# HELP aggregator_unavailable_apiservice_total [ALPHA] Counter of APIServices which are marked as "
            "unavailable broken down by APIService name and reason.\n"
            "# TYPE aggregator_unavailable_apiservice_total counter\n") in text
    # The gateway's merge keeps the gauge and the counter apart (their families share a base name).
    merged = merge(text, [text]).decode()
    assert 'aggregator_unavailable_apiservice{name="v1."} 0.0' in merged
    assert ('aggregator_unavailable_apiservice_total{name="v1beta1.metrics.k8s.io",reason="MissingEndpoints"} 2.0'
            in merged)
    assert "# TYPE aggregator_unavailable_apiservice gauge" in merged
    assert "# TYPE aggregator_unavailable_apiservice_total counter" in merged
    # A deleted APIService leaves the gauge (kube's ForgetAPIService).
    cache.objs.remove(again)
    assert 'aggregator_unavailable_apiservice{name="v1beta1.metrics.k8s.io"}' not in generate_latest(registry).decode()
