"""The handlers' lean reads of a request (issue 15: a create's preamble cost as much as its schema
walk): ``body.header`` answers what Starlette's ``request.headers.get`` answers (the first value of
a repeated header, None when absent), ``params.lookup`` what ``request.query_params.get`` answers
(the last value of a repeated name), and ``dry_run`` and ``writer_for`` still refuse bad values."""

from __future__ import annotations

import pytest
from genericapi.apimachinery.errors import APIError
from genericapi.handlers import params as qp
from genericapi.handlers.body import header, media_type
from genericapi.handlers.ownership import writer_for
from genericapi.server.router import APIRequest
from starlette.datastructures import QueryParams
from starlette.requests import Request

HEADERS = [(b"host", b"example"), (b"content-type", b"Application/JSON; charset=utf-8"),
           (b"x-remote-group", b"a"), (b"x-remote-group", b"b"), (b"user-agent", b"kubectl/v1.33.1 (linux)"),
           (b"accept", b"application/json;as=Table;v=v1;g=meta.k8s.io"), (b"x-latin", "caf\xe9".encode("latin-1"))]


def _request(query: bytes = b"", headers: list[tuple[bytes, bytes]] = HEADERS) -> Request:
    return APIRequest({"type": "http", "method": "POST", "path": "/api/v1/namespaces/a/configmaps",
                       "query_string": query, "headers": headers})


@pytest.mark.parametrize("name", ["host", "content-type", "x-remote-group", "user-agent", "accept", "x-latin",
                                  "content-length", "missing"])
def test_header_is_what_starlette_answers(name: str) -> None:
    request = _request()
    assert header(request, name.encode()) == Request(request.scope).headers.get(name)
    assert header(request, name.encode()) == request.headers.get(name)  # asked again: the kept map


def test_media_type_without_content_type() -> None:
    assert media_type(_request()) == "application/json"
    assert media_type(_request(headers=[(b"host", b"x")])) == ""


@pytest.mark.parametrize("query", [b"", b"pretty=true", b"pretty=1&pretty=false", b"fieldManager=&x=1",
                                   b"includeObject=Object&resourceVersion=12", b"dryRun=All&dryRun=All"])
def test_lookup_is_what_query_params_answer(query: bytes) -> None:
    params = _request(query).query_params
    looked = qp.lookup(params)
    for name in ("pretty", "fieldManager", "includeObject", "resourceVersion", "dryRun", "absent"):
        assert looked.get(name) == params.get(name)
        assert looked.get(name, "") == params.get(name, "")
        assert (name in looked) == (name in params)
    assert qp.flag(looked, "pretty") == qp.flag(params, "pretty")
    plain = {"pretty": "true"}
    assert qp.lookup(plain) is plain
    assert qp.lookup(QueryParams(query)).get("pretty") == QueryParams(query).get("pretty")


def test_dry_run_still_checks_every_value() -> None:
    assert qp.dry_run(QueryParams(b""), "CreateOptions") is False
    assert qp.dry_run(QueryParams(b"dryRun=All"), "CreateOptions") is True
    with pytest.raises(APIError) as err:
        qp.dry_run(QueryParams(b"dryRun=All&dryRun=Some"), "CreateOptions")
    assert err.value.code == 422
    with pytest.raises(APIError):
        qp.dry_run(QueryParams(b"dryRun="), "CreateOptions")


def test_writer_from_field_manager_or_user_agent() -> None:
    assert writer_for(_request(), "CreateOptions").manager == "kubectl"
    assert writer_for(_request(b"fieldManager=mine"), "CreateOptions").manager == "mine"
    assert writer_for(_request(b"fieldManager="), "CreateOptions").manager == "kubectl"
    assert writer_for(_request(headers=[]), "CreateOptions").manager == ""
    with pytest.raises(APIError) as err:
        writer_for(_request(b"fieldManager=" + b"x" * 129), "CreateOptions")
    assert err.value.code == 422
    with pytest.raises(APIError):
        writer_for(_request(b"fieldManager=a%07b"), "CreateOptions")
