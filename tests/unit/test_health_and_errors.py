"""Health endpoints' text and the ``metav1.Status`` errors, as kube-apiserver writes them.

Health output follows ``k8s.io/apiserver/pkg/server/healthz``: ``[+]name ok`` lines, then
``<endpoint> check passed`` (verbose) or ``ok``; a failing check is ``[-]name failed: reason
withheld`` with status 500 whether or not ``verbose`` was asked for. Errors follow
``k8s.io/apimachinery/pkg/api/errors`` and ``util/validation/field``.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import APIError, FieldError
from genericapi.server.health import HealthChecks
from starlette.requests import Request


def _request(path: str, query: str = "") -> Request:
    return Request({"type": "http", "method": "GET", "path": path, "query_string": query.encode(),
                    "headers": []})


async def _ok() -> bool:
    return True


async def _bad() -> bool:
    return False


async def _boom() -> bool:
    raise RuntimeError("database on fire")


def _text(resp: Any) -> str:
    return bytes(resp.body).decode()


def _checks(**named: Any) -> HealthChecks:
    checks = HealthChecks()
    for name, (fn, liveness) in named.items():
        checks.add(name, fn, liveness=liveness)
    return checks


# -- health ---------------------------------------------------------------------------------------


async def test_quiet_success_is_ok() -> None:
    resp = await _checks(etcd=(_ok, True)).readyz(_request("/readyz"))
    assert resp.status_code == 200
    assert resp.body == b"ok"
    assert resp.headers["content-type"].startswith("text/plain")


async def test_verbose_readyz_lists_every_check() -> None:
    checks = _checks(etcd=(_ok, True), informer_sync=(_ok, False))
    resp = await checks.readyz(_request("/readyz", "verbose"))
    assert resp.status_code == 200
    assert _text(resp) == ("[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]informer_sync ok\n[+]shutdown ok\n"
                                  "readyz check passed\n")


async def test_verbose_livez_and_healthz_skip_readiness_only_checks() -> None:
    checks = _checks(etcd=(_ok, True), informer_sync=(_bad, False))
    live = await checks.livez(_request("/livez", "verbose=1"))
    assert live.status_code == 200
    assert _text(live) == "[+]ping ok\n[+]log ok\n[+]etcd ok\nlivez check passed\n"
    health = await checks.healthz(_request("/healthz", "verbose"))
    assert _text(health) == "[+]ping ok\n[+]log ok\n[+]etcd ok\nhealthz check passed\n"


async def test_failing_check_is_500_and_always_verbose() -> None:
    checks = _checks(etcd=(_bad, True))
    resp = await checks.readyz(_request("/readyz"))
    assert resp.status_code == 500
    assert _text(resp) == ("[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n[+]shutdown ok\n"
                                  "readyz check failed\n")


async def test_raising_check_counts_as_failed_without_leaking_the_reason() -> None:
    resp = await _checks(etcd=(_boom, True)).livez(_request("/livez", "verbose"))
    assert resp.status_code == 500
    assert "[-]etcd failed: reason withheld\n" in _text(resp)
    assert "fire" not in _text(resp)
    assert _text(resp).endswith("livez check failed\n")


async def test_excluded_check_is_reported_and_not_run() -> None:
    checks = _checks(etcd=(_boom, True))
    resp = await checks.readyz(_request("/readyz", "verbose&exclude=etcd"))
    assert resp.status_code == 200
    assert "[+]etcd excluded: ok\n" in _text(resp)


async def test_shutting_down_fails_readiness_only() -> None:
    checks = _checks()
    checks.shutting_down = True
    ready = await checks.readyz(_request("/readyz"))
    assert ready.status_code == 500
    assert _text(ready) == "[+]ping ok\n[+]log ok\n[-]shutdown failed: reason withheld\nreadyz check failed\n"
    live = await checks.livez(_request("/livez"))
    assert (live.status_code, live.body) == (200, b"ok")


# -- Status ---------------------------------------------------------------------------------------


def test_status_key_order_and_trailing_newline() -> None:
    err = errors.not_found("apps", "deployments", "web")
    body = err.body()
    assert body.endswith(b"}\n") and not body.endswith(b"\n\n")
    status = orjson.loads(body)
    assert list(status) == ["kind", "apiVersion", "metadata", "status", "message", "reason", "details", "code"]
    assert status == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": 'deployments.apps "web" not found', "reason": "NotFound",
                      "details": {"name": "web", "group": "apps", "kind": "deployments"}, "code": 404}
    assert list(status["details"]) == ["name", "group", "kind"]


def test_status_without_details_has_no_details_key() -> None:
    status = errors.bad_request("nope").status()
    assert list(status) == ["kind", "apiVersion", "metadata", "status", "message", "reason", "code"]
    assert (status["code"], status["reason"]) == (400, "BadRequest")


def test_core_group_details_have_no_group() -> None:
    status = errors.not_found("", "pods", "p").status()
    assert status["message"] == 'pods "p" not found'
    assert status["details"] == {"name": "p", "kind": "pods"}


def test_api_error_is_an_exception_with_the_message() -> None:
    err = errors.conflict("", "configmaps", "c", "boom")
    assert isinstance(err, Exception)
    assert str(err) == 'Operation cannot be fulfilled on configmaps "c": boom'


def test_optimistic_lock_message() -> None:
    err = errors.optimistic_lock("apps", "deployments", "web")
    assert err.code == 409 and err.reason == "Conflict"
    assert err.message == ('Operation cannot be fulfilled on deployments.apps "web": the object has been '
                           "modified; please apply your changes to the latest version and try again")


def test_generate_name_conflict_details_order() -> None:
    details = errors.generate_name_conflict("", "pods", "web-abcde").status()["details"]
    assert list(details) == ["name", "kind", "retryAfterSeconds"]
    assert details["retryAfterSeconds"] == 1


def test_too_many_requests_sets_retry_after_header() -> None:
    err = errors.too_many_requests("slow down", 3)
    assert err.headers == {"Retry-After": "3"}
    assert err.status()["details"] == {"retryAfterSeconds": 3}


def test_internal_error_wording() -> None:
    status = errors.internal_error("disk full").status()
    assert status["message"] == "Internal error occurred: disk full"
    assert status["details"] == {"causes": [{"message": "disk full"}]}
    assert status["code"] == 500


# -- invalid_object ---------------------------------------------------------------------------------


def test_invalid_object_single_cause() -> None:
    err = errors.invalid_object("apps", "Deployment", "web",
                                [errors.required("spec.selector", "")])
    assert err.code == 422 and err.reason == "Invalid"
    assert err.message == 'Deployment.apps "web" is invalid: spec.selector: Required value'
    status = err.status()
    assert status["details"] == {"name": "web", "group": "apps", "kind": "Deployment",
                                 "causes": [{"reason": "FieldValueRequired", "message": "Required value",
                                             "field": "spec.selector"}]}
    assert list(status["details"]["causes"][0]) == ["reason", "message", "field"]


def test_invalid_object_several_causes_are_bracketed() -> None:
    errs = [
        errors.required("metadata.name", "name or generateName is required"),
        errors.invalid("spec.replicas", -1, "must be greater than or equal to 0"),
    ]
    err = errors.invalid_object("", "ConfigMap", "", errs)
    assert err.message == ('ConfigMap "" is invalid: [metadata.name: Required value: name or generateName is '
                           'required, spec.replicas: Invalid value: -1: must be greater than or equal to 0]')
    details = err.status()["details"]
    assert "name" not in details and "group" not in details
    assert [c["field"] for c in details["causes"]] == ["metadata.name", "spec.replicas"]


def test_invalid_object_repeated_messages_collapse_in_the_message_only() -> None:
    dup = errors.required("spec.containers", "")
    err = errors.invalid_object("", "Pod", "p", [dup, dup])
    # ErrorList.ToAggregate drops duplicates; one left means no brackets
    assert err.message == 'Pod "p" is invalid: spec.containers: Required value'
    assert len(err.status()["details"]["causes"]) == 2


def test_invalid_object_without_causes() -> None:
    err = errors.invalid_object("", "Pod", "p", [])
    assert err.message == 'Pod "p" is invalid'
    assert err.status()["details"] == {"name": "p", "kind": "Pod", "causes": []}


# -- FieldError.body --------------------------------------------------------------------------------


@pytest.mark.parametrize(("error", "body"), [
    (errors.required("f", ""), "Required value"),
    (errors.required("f", "must be set"), "Required value: must be set"),
    (errors.invalid("f", "x y", "bad"), 'Invalid value: "x y": bad'),
    (errors.invalid("f", 'q"uote', "bad"), 'Invalid value: "q\\"uote": bad'),
    (errors.invalid("f", 3, "bad"), "Invalid value: 3: bad"),
    (errors.invalid("f", True, "bad"), "Invalid value: true: bad"),
    (errors.invalid("f", None, "bad"), "Invalid value: null: bad"),
    (errors.invalid("f", "v", ""), 'Invalid value: "v"'),
    (errors.not_supported("f", "Sideways", ["A", "B"]), 'Unsupported value: "Sideways": supported values: "A", "B"'),
    (errors.not_supported("f", "x", []), 'Unsupported value: "x"'),
    (errors.forbidden("f", "may not be set"), "Forbidden: may not be set"),
    (errors.forbidden("f", ""), "Forbidden"),
    (errors.duplicate("f", "a"), 'Duplicate value: "a"'),
    (errors.too_long("f", 63), "Too long: must have at most 63 bytes"),
    (FieldError("FieldValueTooLong", "f", "must have at most 5 bytes", "abcdefgh", True),
     "Too long: must have at most 5 bytes"),
    (FieldError("FieldValueNotFound", "f", "", "ghost", True), 'Not found: "ghost"'),
    (FieldError("FieldValueTypeInvalid", "f", "must be a string", 5, True), "Invalid value: 5: must be a string"),
    (FieldError("InternalError", "f", "boom"), "Internal error: boom"),
    # field.TooMany prints the actual count when it is known, and omits it otherwise
    (FieldError("FieldValueTooMany", "f", "must have at most 3 items", 4, True),
     "Too many: 4: must have at most 3 items"),
    (FieldError("FieldValueTooMany", "f", "has too many items"), "Too many: has too many items"),
])
def test_field_error_body(error: FieldError, body: str) -> None:
    assert error.body() == body
    assert str(error) == f"{error.field}: {body}"


def test_status_is_an_api_error_attribute() -> None:
    err = APIError(418, "Teapot", "short and stout", {"kind": "pot"})
    assert err.status()["details"] == {"kind": "pot"}
    assert orjson.loads(err.body())["code"] == 418
