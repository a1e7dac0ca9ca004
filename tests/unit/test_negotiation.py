"""Accept-header negotiation: plain objects, YAML, Table, PartialObjectMetadata and 406.

Mirrors ``k8s.io/apiserver/pkg/endpoints/handlers/negotiation``: clauses are tried in order, a
clause whose ``as``/``g``/``v`` conversion the endpoint does not allow is skipped, and when no
clause is acceptable the answer is 406 listing the serializers' media types.
"""

from __future__ import annotations

import pytest
from genericapi.apimachinery.errors import APIError
from genericapi.handlers.negotiation import MediaType, Output, negotiate, parse_media_types

KUBECTL_GET = ("application/json;as=Table;v=v1;g=meta.k8s.io,"
               "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
PARTIAL = ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
           "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json")
KUBE_406 = ("only the following media types are accepted: application/json, application/yaml, "
            "application/vnd.kubernetes.protobuf")


def test_parse_media_types_lowercases_type_and_keys_and_strips_quotes() -> None:
    parsed = parse_media_types('Application/JSON; AS="Table" ; g=meta.k8s.io;v=v1 , ,application/yaml')
    assert parsed == [MediaType("application/json", {"as": "Table", "g": "meta.k8s.io", "v": "v1"}),
                      MediaType("application/yaml", {})]
    assert parsed[0].as_ == "Table" and parsed[0].group == "meta.k8s.io" and parsed[0].version == "v1"


def test_parse_media_types_ignores_params_without_value() -> None:
    assert parse_media_types("application/json;pretty;v=v1") == [MediaType("application/json", {"v": "v1"})]


@pytest.mark.parametrize(("accept", "expected"), [
    ("", Output("object")),
    ("application/json", Output("object")),
    ("*/*", Output("object")),
    ("application/*", Output("object")),
    ("application/json, */*", Output("object")),
    ("application/yaml", Output("object", yaml=True)),
    ("application/yaml,application/json", Output("object", yaml=True)),
    ("application/json,application/yaml", Output("object")),
    ("application/json;stream=watch", Output("object")),
    ("application/json;pretty=1", Output("object")),
    (KUBECTL_GET, Output("table")),
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", Output("table")),
    ('application/json;as="Table";v=v1;g=meta.k8s.io', Output("table")),
    (PARTIAL, Output("partial")),
    ("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", Output("partial")),
    ("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1", Output("partial")),
    # an unsupported conversion is skipped in favour of the next clause
    ("application/json;as=Table;v=v2;g=meta.k8s.io,application/json", Output("object")),
    ("application/json;as=Foo;g=example.com;v=v1,application/yaml", Output("object", yaml=True)),
    # protobuf is not served: the next acceptable clause wins
    ("application/vnd.kubernetes.protobuf,application/json", Output("object")),
    ("text/html,application/json", Output("object")),
])
def test_negotiate(accept: str, expected: Output) -> None:
    assert negotiate(accept) == expected


@pytest.mark.parametrize("accept", [
    "application/json;as=Table",  # no group/version: not an allowed conversion
    "application/json;as=Table;g=meta.k8s.io",
    "application/json;as=Table;v=v1;g=example.com",
    "application/json;as=table;v=v1;g=meta.k8s.io",  # values are case-sensitive
    "application/json;as=Status;v=v1;g=meta.k8s.io",
    "application/json;as=Table;v=v2;g=meta.k8s.io,application/json;as=Foo;v=v1;g=meta.k8s.io",
    "text/html",
    "text/plain",
    "application/xml",
    "application/vnd.kubernetes.protobuf",
    "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io",
])
def test_not_acceptable(accept: str) -> None:
    with pytest.raises(APIError) as info:
        negotiate(accept)
    err = info.value
    assert err.code == 406
    assert err.reason == "NotAcceptable"
    # exactly kube-apiserver's message for a non-watch request
    assert err.message == KUBE_406
    status = err.status()
    assert status["code"] == 406 and status["status"] == "Failure"


def test_quality_values_order_the_choice() -> None:
    table = "application/json;as=Table;v=v1;g=meta.k8s.io"
    assert negotiate(f"application/json;q=0.5, {table};q=0.9").mode == "table"
    assert negotiate(f"{table};q=0.1, application/json").mode == "object"
    assert negotiate(f"{table};q=0, application/json;q=0.2").mode == "object"
    assert negotiate("application/yaml;q=0.8, application/json;q=0.8").yaml  # ties keep client order
