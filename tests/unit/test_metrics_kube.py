"""kube's metric labels, watermarks and the gateway's merge of several processes' expositions."""

from __future__ import annotations

import pytest
from aggregator.metricsmerge import merge
from genericapi.server import metrics
from genericapi.storage.instrumentation import EtcdInstruments
from prometheus_client.parser import text_string_to_metric_families


@pytest.mark.parametrize(("query", "label"), [
    (b"", ""),
    (b"fieldManager=x", ""),
    (b"dryRun=All", "All"),
    (b"dryRun=All&dryRun=All", "All"),
    (b"dryRun=all", "invalid"),
    (b"dryRun=", "invalid"),
    (b"dryRun=All&dryRun=Bogus", "invalid"),
])
def test_dry_run_label_as_kubes_clean_dry_run(query: bytes, label: str) -> None:
    assert metrics.dry_run_label(query) == label


@pytest.mark.parametrize(("name", "namespace", "method", "scope"), [
    ("x", "ns", "GET", "resource"),
    ("", "ns", "POST", "resource"),  # kube's installer: every POST route is resource-scoped
    ("", "ns", "GET", "namespace"),
    ("", "", "GET", "cluster"),  # a namespaced list across all namespaces too
    ("", "ns", "DELETE", "namespace"),
])
def test_request_scope_as_kubes_installer(name: str, namespace: str, method: str, scope: str) -> None:
    assert metrics.request_scope(name, namespace, method) == scope


@pytest.mark.parametrize(("method", "scope", "watch", "sub", "ctype", "verb"), [
    ("GET", "resource", False, "", "", "GET"),
    ("HEAD", "namespace", False, "", "", "LIST"),
    ("GET", "namespace", True, "", "", "WATCH"),
    ("PATCH", "resource", False, "", "application/apply-patch+yaml", "APPLY"),
    ("PATCH", "resource", False, "", "application/strategic-merge-patch+json", "PATCH"),
    ("POST", "resource", False, "exec", "", "CONNECT"),
    ("GET", "resource", False, "log", "", "CONNECT"),
    ("DELETE", "namespace", False, "", "", "DELETE"),
    ("PUT", "resource", False, "status", "", "PUT"),
])
def test_resource_verb_as_kubes_clean_verb(method: str, scope: str, watch: bool, sub: str, ctype: str,
                                           verb: str) -> None:
    assert metrics.resource_verb(method, scope, watch, sub, ctype) == verb


@pytest.mark.parametrize(("username", "label"), [
    ("admin", "admin"), ("kubelet", "kubelet"), ("system:serviceaccount:kube-system:default",
                                                  "system:serviceaccount:kube-system:default"),
    ("jane@example.com", "email_id"), ("system:serviceaccount:ns:robot", "other"), ("system:anonymous", "other"),
])
def test_usernames_compressed_as_kube(username: str, label: str) -> None:
    assert metrics.compress_username(username) == label


def test_inflight_watermark_publishes_the_most_in_flight_during_the_period() -> None:
    mark = metrics.InflightWatermark(period=3600)
    mark.publish(0.0)
    for _ in range(3):
        mark.started(0)
    mark.started(1)
    for _ in range(3):
        mark.finished(0)
    mark.finished(1)
    mark.publish()
    assert metrics.INFLIGHT.labels("readOnly")._value.get() == 3
    assert metrics.INFLIGHT.labels("mutating")._value.get() == 1
    mark.publish()  # nothing in flight during the next period
    assert metrics.INFLIGHT.labels("readOnly")._value.get() == 0


def test_etcd_type_label_from_the_key_prefix_a_store_named() -> None:
    instruments = EtcdInstruments()
    instruments.name_resource(b"/registry/pods/", "pods")
    instruments.name_resource(b"/registry/example.com/widgets", "widgets.example.com")
    assert instruments.resource_of(b"/registry/pods/ns/p") == "pods"
    assert instruments.resource_of(b"/registry/pods/") == "pods"
    assert instruments.resource_of(b"/registry/example.com/widgets/ns/w") == "widgets.example.com"
    assert instruments.resource_of(b"/registry/example.com/gadgets/ns/w") == ""
    assert instruments.resource_of(b"\0") == ""


GATEWAY = """# HELP apiserver_request_total [STABLE] Counter
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",verb="GET"} 1.0
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 5.0
"""
MEMBER = """# HELP apiserver_request_total [STABLE] Counter
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",verb="GET"} 2.0
apiserver_request_total{code="404",component="apiserver",verb="GET"} 1.0
# HELP apiserver_request_duration_seconds x
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="GET",le="0.005"} 1.0
apiserver_request_duration_seconds_bucket{verb="GET",le="+Inf"} 2.0
apiserver_request_duration_seconds_count{verb="GET"} 2.0
apiserver_request_duration_seconds_sum{verb="GET"} 0.25
# HELP apiserver_storage_objects x
# TYPE apiserver_storage_objects gauge
apiserver_storage_objects{resource="pods"} 7.0
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 9.0
"""


def test_merge_adds_series_keeps_shared_gauges_and_the_gateways_process_series() -> None:
    text = merge(GATEWAY, [MEMBER, MEMBER.replace("7.0", "6.0")]).decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples[("apiserver_request_total", (("code", "200"), ("component", "apiserver"), ("verb", "GET")))] == 5
    assert samples[("apiserver_request_total", (("code", "404"), ("component", "apiserver"), ("verb", "GET")))] == 2
    assert samples[("apiserver_request_duration_seconds_bucket", (("le", "+Inf"), ("verb", "GET")))] == 4
    assert samples[("apiserver_request_duration_seconds_sum", (("verb", "GET"),))] == 0.5
    assert samples[("apiserver_storage_objects", (("resource", "pods"),))] == 7  # the same store, not 13
    assert samples[("process_cpu_seconds_total", ())] == 5  # the gateway's own only
    assert text.count("# TYPE apiserver_request_total counter") == 1


def test_merge_without_members_is_the_gateways_own() -> None:
    text = merge(GATEWAY, []).decode()
    assert 'apiserver_request_total{code="200",component="apiserver",verb="GET"} 1.0' in text
