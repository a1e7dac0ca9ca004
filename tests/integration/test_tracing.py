"""Tracing across the chain with kube's ``--tracing-config-file``: one request is one trace.

A chain of its own is started with a TracingConfiguration pointing at a test OTLP collector
(tests/support/otlp_collector.py: the real OTLP gRPC TraceService). A request carrying a sampled W3C
``traceparent`` from system:masters continues that trace through the gateway, the member that
serves it (core-api, or extensions-api for a custom resource; both when core-api delegates) and
every etcd call below; a caller outside system:masters/system:monitoring starts a new trace linked
to its own, as kube's WithTracing does; an unsampled parent is not traced.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.otlp_collector import OTLPCollector, ReceivedSpan
from support.procs import ChainHandle, start_chain

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration

SERVER, CLIENT = 2, 3  # OTLP SpanKind values


@pytest.fixture(scope="module")
def collector() -> Iterator[OTLPCollector]:
    c = OTLPCollector()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def traced(collector: OTLPCollector, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChainHandle]:
    data = tmp_path_factory.mktemp("traced-chain")
    config = data / "tracing.yaml"
    config.write_text("apiVersion: apiserver.config.k8s.io/v1beta1\nkind: TracingConfiguration\n"
                      f"endpoint: {collector.endpoint}\nsamplingRatePerMillion: 1000000\n")
    chain = Chain(data / "chain", port=free_port(), tracing_config=str(config))
    yield start_chain(chain)
    chain.stop()


def traceparent(sampled: bool = True) -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-{'01' if sampled else '00'}"


def components(spans: list[ReceivedSpan]) -> set[str]:
    return {s.component for s in spans}


def server_span(spans: list[ReceivedSpan], component: str) -> ReceivedSpan:
    found = [s for s in spans if s.component == component and s.kind == SERVER]
    assert len(found) == 1, [(s.component, s.name) for s in spans]
    return found[0]


def test_builtin_get_is_one_trace_through_gateway_core_api_and_etcd(traced: ChainHandle,
                                                                     collector: OTLPCollector) -> None:
    name = f"traced-{uuid.uuid4().hex[:6]}"
    status, _ = traced.json("POST", "/api/v1/namespaces/default/configmaps",
                            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
    assert status == 201
    trace_id, parent_id, header = traceparent()
    status, _h, _b = traced.request("GET", f"/api/v1/namespaces/default/configmaps/{name}",
                                    headers={"traceparent": header, "User-Agent": "tracing-test"})
    assert status == 200
    spans = collector.wait_for_trace(trace_id, lambda s: {"aggregator", "core-api"} <= components(s)
                                     and any(x.kind == CLIENT for x in s))
    gateway = server_span(spans, "aggregator")
    core = server_span(spans, "core-api")
    assert gateway.parent_span_id == parent_id  # the caller's trace continued (system:masters)
    assert gateway.name == core.name == "GET /api/v1/namespaces/{:namespace}/configmaps/{:name}"
    assert gateway.attributes["http.method"] == "GET" and gateway.attributes["http.status_code"] == 200
    assert gateway.attributes["http.target"] == f"/api/v1/namespaces/default/configmaps/{name}"
    assert gateway.attributes["http.user_agent"] == "tracing-test"
    assert gateway.resource["service.name"] == "apiserver"
    assert core.parent_span_id == gateway.span_id
    etcd = [s for s in spans if s.kind == CLIENT]
    assert [s.name for s in etcd] == ["etcdserverpb.KV/Range"]
    assert etcd[0].parent_span_id == core.span_id and etcd[0].component == "core-api"
    assert etcd[0].attributes["key"] == f"/registry/configmaps/default/{name}"
    assert etcd[0].attributes["resource"] == "configmaps" and etcd[0].attributes["rpc.system"] == "grpc"
    # One trace: every span hangs below the caller's span, nothing else shares the trace id.
    ids = {s.span_id for s in spans} | {parent_id}
    assert all(s.parent_span_id in ids for s in spans)


def test_create_writes_through_etcd_txn(traced: ChainHandle, collector: OTLPCollector) -> None:
    trace_id, _parent, header = traceparent()
    name = f"traced-{uuid.uuid4().hex[:6]}"
    status, _h, _b = traced.request("POST", "/api/v1/namespaces/default/configmaps",
                                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}},
                                    headers={"traceparent": header})
    assert status == 201
    spans = collector.wait_for_trace(trace_id, lambda s: {"aggregator", "core-api"} <= components(s)
                                     and any(x.name == "etcdserverpb.KV/Txn" for x in s))
    core = server_span(spans, "core-api")
    assert core.name == "POST /api/v1/namespaces/{:namespace}/configmaps"
    txn = [s for s in spans if s.name == "etcdserverpb.KV/Txn"]
    assert txn and all(s.parent_span_id == core.span_id for s in txn)
    assert txn[0].attributes["key"] == f"/registry/configmaps/default/{name}"


def test_custom_resource_is_traced_through_extensions_api(traced: ChainHandle, collector: OTLPCollector) -> None:
    group = f"t{uuid.uuid4().hex[:6]}.example.com"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"widgets.{group}"},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    assert traced.json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0] == 201
    path = f"/apis/{group}/v1/namespaces/default/widgets"
    deadline = time.monotonic() + 30
    while traced.json("GET", path)[0] != 200:
        assert time.monotonic() < deadline, "the CRD was not served"
        time.sleep(0.3)
    trace_id, parent_id, header = traceparent()
    status, _h, _b = traced.request("POST", path, {"apiVersion": f"{group}/v1", "kind": "Widget",
                                                   "metadata": {"name": "w1"}}, headers={"traceparent": header})
    assert status == 201
    spans = collector.wait_for_trace(trace_id, lambda s: {"aggregator", "extensions-api"} <= components(s)
                                     and any(x.name == "etcdserverpb.KV/Txn" for x in s))
    gateway = server_span(spans, "aggregator")
    ext = server_span(spans, "extensions-api")
    assert gateway.parent_span_id == parent_id and ext.parent_span_id == gateway.span_id
    assert ext.name == f"POST /apis/{group}/v1/namespaces/{{:namespace}}/widgets"
    txn = next(s for s in spans if s.name == "etcdserverpb.KV/Txn")
    assert txn.parent_span_id == ext.span_id and txn.attributes["resource"] == f"widgets.{group}"


def test_delegation_from_core_api_to_extensions_api_is_one_trace(traced: ChainHandle,
                                                                 collector: OTLPCollector) -> None:
    """A group no member serves goes to core-api first, which delegates it: three hops, one trace."""
    trace_id, parent_id, header = traceparent()
    status, _h, _b = traced.request("GET", "/apis/nothing.example.com/v1/things", headers={"traceparent": header})
    assert status == 404
    spans = collector.wait_for_trace(trace_id, lambda s: {"aggregator", "core-api", "extensions-api"}
                                     <= components(s))
    gateway = server_span(spans, "aggregator")
    core = server_span(spans, "core-api")
    ext = server_span(spans, "extensions-api")
    assert (gateway.parent_span_id, core.parent_span_id, ext.parent_span_id) == (parent_id, gateway.span_id,
                                                                                  core.span_id)
    assert ext.attributes["http.status_code"] == 404


def test_untrusted_caller_starts_a_new_trace_linked_to_its_own(traced: ChainHandle,
                                                              collector: OTLPCollector) -> None:
    ns = f"trace-{uuid.uuid4().hex[:6]}"
    traced.kubectl("create", "namespace", ns)
    traced.kubectl("create", "serviceaccount", "robot", "-n", ns)
    token = traced.kubectl("create", "token", "robot", "-n", ns).stdout.strip()
    trace_id, parent_id, header = traceparent()
    status, _h, _b = traced.request("GET", f"/api/v1/namespaces/{ns}/configmaps", auth=False,
                                    headers={"Authorization": f"Bearer {token}", "traceparent": header})
    assert status == 403  # traced all the same: tracing runs before authorization, as in kube

    def linked(span: ReceivedSpan) -> bool:
        return (trace_id, parent_id) in span.links

    deadline = time.monotonic() + 40
    while not (found := [s for s in list(collector.spans) if linked(s)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(found) == 1
    root = found[0]
    assert root.trace_id != trace_id and root.parent_span_id == "" and root.component == "aggregator"
    assert root.attributes["http.status_code"] == 403
    assert collector.trace(trace_id) == []


def test_unsampled_parent_is_not_traced(traced: ChainHandle, collector: OTLPCollector) -> None:
    trace_id, _parent, header = traceparent(sampled=False)
    assert traced.request("GET", "/api/v1/namespaces/default/configmaps", headers={"traceparent": header})[0] == 200
    marker, _p, marker_header = traceparent()
    assert traced.request("GET", "/api/v1/namespaces", headers={"traceparent": marker_header})[0] == 200
    # Once a later sampled request's spans are in from both hops, the unsampled one's would be too.
    collector.wait_for_trace(marker, lambda s: {"aggregator", "core-api"} <= components(s))
    assert collector.trace(trace_id) == []


@pytest.mark.parametrize(("content", "message"), [
    ("apiVersion: apiserver.config.k8s.io/v1beta1\nkind: TracingConfiguration\nsamplingRatePerMillion: -5\n",
     "Error: failed to read tracing config: failed to validate tracing configuration: samplingRatePerMillion: "
     "Invalid value: -5: sampling rate must be positive"),
    ("apiVersion: apiserver.config.k8s.io/v1beta1\nkind: TracingConfiguration\nendpont: x:1\n",
     'strict decoding error: unknown field "endpont"'),
])
def test_a_file_kube_refuses_stops_the_service(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "tracing.yaml"
    path.write_text(content)
    for module in ("aggregator", "extensionsapi"):
        proc = subprocess.run([sys.executable, "-m", module, "--tracing-config-file", str(path),
                               "--etcd-servers", "http://127.0.0.1:1"], capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0 and message in proc.stderr, (module, proc.stderr[-2000:])
