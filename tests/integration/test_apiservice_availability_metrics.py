"""aggregator_unavailable_apiservice through the gateway's /metrics, as kube-aggregator reports it:
0 for every available APIService (the local ones), 1 for a service-backed APIService whose Service
does not exist, and no series once that APIService is deleted. (The counter's transitions are
unit-tested in tests/unit/test_apiservice_metrics.py.)"""

from __future__ import annotations

import json
import time
import uuid

from prometheus_client.parser import text_string_to_metric_families
from support.procs import ChainHandle


def gauge(chain: ChainHandle) -> dict[str, float]:
    status, _h, body = chain.request("GET", "/metrics")
    assert status == 200
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(body.decode()):
        if family.name == "aggregator_unavailable_apiservice" and family.type == "gauge":  # not its _total
            assert family.documentation == ("[ALPHA] Gauge of APIServices which are marked as unavailable broken "
                                            "down by APIService name.")
            out.update({s.labels["name"]: s.value for s in family.samples})
    return out


def wait_for(check, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def test_unavailable_apiservice_gauge(chain: ChainHandle) -> None:
    first = gauge(chain)
    assert first["v1."] == 0 and first["v1.apps"] == 0  # local APIServices are always available
    group = f"a17-{uuid.uuid4().hex[:6]}.example.com"
    name = f"v1alpha1.{group}"
    apiservice = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": name},
                  "spec": {"group": group, "version": "v1alpha1", "groupPriorityMinimum": 100,
                           "versionPriority": 10, "insecureSkipTLSVerify": True,
                           "service": {"namespace": "default", "name": "no-such-service", "port": 443}}}
    status, _h, body = chain.request("POST", "/apis/apiregistration.k8s.io/v1/apiservices", apiservice)
    assert status == 201, body
    try:
        wait_for(lambda: gauge(chain).get(name) == 1, f"{name} unavailable in the gauge")
        status, _h, body = chain.request("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{name}")
        [cond] = json.loads(body)["status"]["conditions"]
        assert (cond["status"], cond["reason"]) == ("False", "ServiceNotFound")
    finally:
        chain.request("DELETE", f"/apis/apiregistration.k8s.io/v1/apiservices/{name}")
    wait_for(lambda: name not in gauge(chain), f"{name} gone from the gauge")
