"""kube's TracingConfiguration file: versions, defaults, strict decoding and validation texts; span names."""

from __future__ import annotations

import re

import pytest
from genericapi.apimachinery.requestinfo import parse_request_info
from genericapi.server import tracing, tracingconfig
from genericapi.server.tracingconfig import TracingConfigError, parse


def doc(body: str, version: str = "v1beta1") -> bytes:
    return f"apiVersion: apiserver.config.k8s.io/{version}\nkind: TracingConfiguration\n{body}".encode()


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
def test_kubes_defaults(version: str) -> None:
    config = parse(doc("", version))
    assert config.collector == "localhost:4317"  # the OTLP gRPC default, as kube's exporter
    assert config.sampling_ratio == 0.0  # unset: only what a sampled parent asks for


def test_endpoint_and_rate() -> None:
    config = parse(doc("endpoint: collector.example:4317\nsamplingRatePerMillion: 250000\n"))
    assert (config.collector, config.sampling_ratio) == ("collector.example:4317", 0.25)
    assert parse(doc("endpoint: unix:///run/otel.sock\n")).collector == "unix:///run/otel.sock"
    assert parse(b'{"apiVersion": "apiserver.config.k8s.io/v1alpha1", "kind": "TracingConfiguration"}') \
        .collector == "localhost:4317"


@pytest.mark.parametrize(("data", "message"), [
    (doc("samplingRatePerMillion: -1\n"), "failed to validate tracing configuration: samplingRatePerMillion: Invalid "
                                          "value: -1: sampling rate must be positive"),
    (doc("samplingRatePerMillion: 1000001\n"), "samplingRatePerMillion: Invalid value: 1000001: sampling rate per "
                                               "million must be less than or equal to one million"),
    (doc("endpoint: http://collector:4318\n"), 'endpoint: Invalid value: "http://collector:4318": unsupported '
                                               "scheme: http.  Options are none, dns, unix, or unix-abstract."),
    (doc("samplingRatePerMillion: lots\n"), "json: cannot unmarshal string into Go struct field "
                                            "TracingConfiguration.samplingRatePerMillion of type int32"),
    (doc("endpoint: 4317\n"), "json: cannot unmarshal number into Go struct field TracingConfiguration.endpoint of "
                              "type string"),
    (doc("sampling: 5\n"), 'strict decoding error: unknown field "sampling"'),
    (doc("", "v1"), 'no kind "TracingConfiguration" is registered for version "apiserver.config.k8s.io/v1"'),
    (b"endpoint: x\n", "Object 'Kind' is missing"),
    (b"- a list\n", "Object 'Kind' is missing"),
])
def test_files_kube_refuses(data: bytes, message: str) -> None:
    with pytest.raises(TracingConfigError) as err:
        parse(data)
    assert message in str(err.value)


def test_missing_file() -> None:
    with pytest.raises(TracingConfigError, match=re.escape("tracing-config-file /nonexistent/t.yaml does not exist")):
        tracingconfig.load("/nonexistent/t.yaml")


@pytest.mark.parametrize(("method", "path", "name"), [
    ("GET", "/api/v1/namespaces/d/pods/p", "GET /api/v1/namespaces/{:namespace}/pods/{:name}"),
    ("GET", "/api/v1/pods", "GET /api/v1/pods"),
    ("PUT", "/apis/apps/v1/namespaces/d/deployments/x/scale",
     "PUT /apis/apps/v1/namespaces/{:namespace}/deployments/{:name}/scale"),
    ("POST", "/apis/example.com/v1/namespaces/d/widgets", "POST /apis/example.com/v1/namespaces/{:namespace}/widgets"),
    ("GET", "/healthz", "GET"),
    ("GET", "/apis", "GET"),
])
def test_span_names_as_kubes_with_tracing(method: str, path: str, name: str) -> None:
    scope = {"method": method, "path": path}
    assert tracing.span_name(scope, parse_request_info(method, path, "")) == name
