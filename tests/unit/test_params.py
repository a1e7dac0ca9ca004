"""Query parameters and DeleteOptions as kube-apiserver's handlers decode and validate them.

Delete options follow ``handlers/delete.go``: a request body, when present, is the whole
DeleteOptions and the query is not read; without a body the query is decoded. Validation is
``ValidateDeleteOptions`` and fails with 422 on ``DeleteOptions.meta.k8s.io``.
"""

from __future__ import annotations

from typing import Any

import pytest
from coreapi import catalog
from coreapi.strategies import strategy_class
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.handlers.params import (
    delete_options,
    dry_run,
    field_validation,
    flag,
    int_param,
    list_options,
)

PODS = ResourceInfo("", "v1", "Pod", "pods", "pod", True)
CONFIGMAPS = ResourceInfo("", "v1", "ConfigMap", "configmaps", "configmap", True)
NODES = ResourceInfo("", "v1", "Node", "nodes", "node", False)


@pytest.fixture(autouse=True, scope="module")
def builtin_field_selectors() -> None:
    """core-api registers its kinds' field selectors as it builds their strategies: do the same."""
    for info in catalog.BUILTIN_RESOURCES:
        strategy_class(info)(info)


def _obj(name: str, namespace: str = "default", labels: dict[str, str] | None = None,
         **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = labels
    return {"metadata": meta, **extra}


def _bad(fn: Any, *args: Any) -> APIError:
    with pytest.raises(APIError) as info:
        fn(*args)
    return info.value


# -- small helpers ---------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    # kube's Convert_Slice_string_To_bool: only absent, "0" and "false" (any case) are false.
    (None, False), ("true", True), ("True", True), ("1", True), ("", True), ("false", False),
    ("FALSE", False), ("0", False), ("yes", True), ("no", True), ("\x00", True),
])
def test_flag(value: str | None, expected: bool) -> None:
    params = {} if value is None else {"watch": value}
    assert flag(params, "watch") is expected


def test_int_param() -> None:
    assert int_param({}, "limit") is None
    assert int_param({"limit": ""}, "limit") is None
    assert int_param({"limit": "5"}, "limit") == 5
    assert int_param({"limit": "-3"}, "limit") == -3
    err = _bad(int_param, {"limit": "five"}, "limit")
    assert (err.code, err.reason) == (400, "BadRequest")
    assert "five" in err.message


# -- list options ----------------------------------------------------------------------------


def test_list_options_defaults() -> None:
    opts = list_options(PODS, {})
    assert opts.predicate is None and opts.filtered is False
    assert (opts.resource_version, opts.resource_version_match, opts.limit, opts.continue_token) == ("", "", 0, "")
    assert opts.allow_bookmarks is False and opts.send_initial_events is None and opts.timeout_seconds is None


def test_list_options_plain_values() -> None:
    opts = list_options(PODS, {"resourceVersion": "42", "resourceVersionMatch": "NotOlderThan", "limit": "10",
                               "continue": "tok", "allowWatchBookmarks": "true", "sendInitialEvents": "false",
                               "timeoutSeconds": "30"})
    assert opts.resource_version == "42" and opts.resource_version_match == "NotOlderThan"
    assert opts.limit == 10 and opts.continue_token == "tok"
    assert opts.allow_bookmarks is True
    assert opts.send_initial_events is False  # present but false is not "unset"
    assert opts.timeout_seconds == 30


@pytest.mark.parametrize(("limit", "expected"), [("0", 0), ("-5", 0), ("", 0), ("500", 500)])
def test_list_options_limit(limit: str, expected: int) -> None:
    assert list_options(PODS, {"limit": limit}).limit == expected


@pytest.mark.parametrize("name", ["limit", "timeoutSeconds"])
def test_list_options_bad_integers(name: str) -> None:
    err = _bad(list_options, PODS, {name: "ten"})
    assert err.code == 400 and err.reason == "BadRequest"


def test_label_selector_predicate() -> None:
    opts = list_options(PODS, {"labelSelector": "app=web,tier!=db"})
    assert opts.filtered is True and opts.predicate is not None
    assert opts.predicate(_obj("a", labels={"app": "web"}))
    assert opts.predicate(_obj("b", labels={"app": "web", "tier": "front"}))
    assert not opts.predicate(_obj("c", labels={"app": "web", "tier": "db"}))
    assert not opts.predicate(_obj("d"))  # no labels at all
    assert not opts.predicate({"metadata": None})


def test_label_selector_set_based() -> None:
    opts = list_options(PODS, {"labelSelector": "env in (prod,staging),!canary"})
    assert opts.predicate is not None
    assert opts.predicate(_obj("a", labels={"env": "prod"}))
    assert not opts.predicate(_obj("b", labels={"env": "prod", "canary": "1"}))
    assert not opts.predicate(_obj("c", labels={"env": "dev"}))


@pytest.mark.parametrize(("selector", "message"), [
    ("a=b=c", "found '=', expected: ',' or 'end of string'"),
    ("=foo", "found '=', expected: !, identifier, or 'end of string'"),
    ("x in (a,b", "unable to parse requirement: found '', expected: ',' or ')'"),
    ("a==b,", "found '', expected: identifier after ','"),
    ("a notin b", "unable to parse requirement: found 'b' expected: '('"),
])
def test_bad_label_selector_is_400_with_kube_message(selector: str, message: str) -> None:
    err = _bad(list_options, PODS, {"labelSelector": selector})
    assert (err.code, err.reason, err.message) == (400, "BadRequest", message)


def test_field_selector_on_pods() -> None:
    opts = list_options(PODS, {"fieldSelector": "spec.nodeName=n1,status.phase!=Failed"})
    assert opts.filtered is True and opts.predicate is not None
    assert opts.predicate(_obj("a", spec={"nodeName": "n1"}, status={"phase": "Running"}))
    assert not opts.predicate(_obj("b", spec={"nodeName": "n1"}, status={"phase": "Failed"}))
    assert not opts.predicate(_obj("c", spec={"nodeName": "n2"}))


def test_field_selector_metadata_name_and_namespace() -> None:
    opts = list_options(CONFIGMAPS, {"fieldSelector": "metadata.name=cfg,metadata.namespace=ns1"})
    assert opts.predicate is not None
    assert opts.predicate(_obj("cfg", "ns1"))
    assert not opts.predicate(_obj("cfg", "ns2"))
    assert not opts.predicate(_obj("other", "ns1"))


def test_label_and_field_selectors_combine() -> None:
    opts = list_options(CONFIGMAPS, {"labelSelector": "app=web", "fieldSelector": "metadata.name=a"})
    assert opts.predicate is not None
    assert opts.predicate(_obj("a", labels={"app": "web"}))
    assert not opts.predicate(_obj("a", labels={"app": "db"}))
    assert not opts.predicate(_obj("b", labels={"app": "web"}))


def test_name_restricts_like_a_field_selector() -> None:
    opts = list_options(CONFIGMAPS, {}, name="only")
    assert opts.filtered is True and opts.predicate is not None
    assert opts.predicate(_obj("only")) and not opts.predicate(_obj("other"))
    both = list_options(CONFIGMAPS, {"fieldSelector": "metadata.namespace=x"}, name="only")
    assert both.predicate is not None
    assert both.predicate(_obj("only", "x")) and not both.predicate(_obj("only", "y"))


def test_empty_selectors_do_not_filter() -> None:
    opts = list_options(PODS, {"labelSelector": "", "fieldSelector": ""})
    assert opts.predicate is None and opts.filtered is False


@pytest.mark.parametrize(("info", "selector", "message"), [
    (PODS, "spec.bogus=x", "field label not supported: spec.bogus"),
    (CONFIGMAPS, "data.key=x",
     '"data.key" is not a known field selector: only "metadata.name", "metadata.namespace"'),
])
def test_unsupported_field_label_is_400(info: ResourceInfo, selector: str, message: str) -> None:
    err = _bad(list_options, info, {"fieldSelector": selector})
    assert (err.code, err.reason, err.message) == (400, "BadRequest", message)


@pytest.mark.parametrize(("selector", "message"), [
    ("a", "invalid selector: 'a'; can't understand 'a'"),
    ("metadata.name=a=b", "invalid field selector: unescaped character in value: 61"),
])
def test_unparsable_field_selector_is_400(selector: str, message: str) -> None:
    err = _bad(list_options, PODS, {"fieldSelector": selector})
    assert (err.code, err.message) == (400, message)


# -- dryRun / fieldValidation ------------------------------------------------------------------


def test_dry_run() -> None:
    assert dry_run({}) is False
    assert dry_run({"dryRun": "All"}) is True
    for bad in ("all", "true", ""):
        err = _bad(dry_run, {"dryRun": bad})
        assert err.code in (400, 422)
        assert f'"{bad}"' in err.message and 'supported values: "All"' in err.message


@pytest.mark.parametrize(("value", "expected"), [
    (None, "Warn"), ("", "Warn"), ("Ignore", "Ignore"), ("Warn", "Warn"), ("Strict", "Strict"),
])
def test_field_validation(value: str | None, expected: str) -> None:
    params = {} if value is None else {"fieldValidation": value}
    assert field_validation(params) == expected


def test_field_validation_unknown_value() -> None:
    err = _bad(field_validation, {"fieldValidation": "Loud"})
    assert err.code in (400, 422)
    assert 'fieldValidation: Unsupported value: "Loud"' in err.message
    assert '"Ignore"' in err.message and '"Strict"' in err.message and '"Warn"' in err.message


def test_field_validation_matches_kube() -> None:
    with pytest.raises(APIError) as info:
        field_validation({"fieldValidation": "strict"})
    assert info.value.code == 422
    assert info.value.message == ('CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: '
                                  '"strict": supported values: "", "Ignore", "Strict", "Warn"')


# -- delete options ----------------------------------------------------------------------------


def test_delete_options_defaults() -> None:
    opts = delete_options({}, None)
    assert opts.propagation_policy is None and opts.grace_period_seconds is None
    assert opts.orphan_dependents is None and opts.dry_run is False
    assert opts.precondition_uid is None and opts.precondition_rv is None


def test_delete_options_from_body() -> None:
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground",
            "gracePeriodSeconds": 0, "dryRun": ["All"],
            "preconditions": {"uid": "u-1", "resourceVersion": "7"}}
    opts = delete_options({}, body)
    assert opts.propagation_policy == "Foreground"
    assert opts.grace_period_seconds == 0  # zero is meaningful: delete now
    assert opts.dry_run is True
    assert (opts.precondition_uid, opts.precondition_rv) == ("u-1", "7")


def test_delete_options_from_query() -> None:
    opts = delete_options({"propagationPolicy": "Orphan", "gracePeriodSeconds": "30", "dryRun": "All"}, None)
    assert opts.propagation_policy == "Orphan" and opts.grace_period_seconds == 30 and opts.dry_run is True
    assert delete_options({"orphanDependents": "false"}, None).orphan_dependents is False


def test_body_wins_and_query_is_ignored_when_a_body_is_sent() -> None:
    # handlers/delete.go decodes the query only when the body is empty
    opts = delete_options({"propagationPolicy": "Orphan", "gracePeriodSeconds": "30", "dryRun": "All"},
                          {"propagationPolicy": "Background"})
    assert opts.propagation_policy == "Background"
    assert opts.grace_period_seconds is None
    assert opts.dry_run is False
    # an empty body object is still a body
    assert delete_options({"propagationPolicy": "Orphan"}, {}).propagation_policy is None
    # so a bad query value cannot fail a request that carries a body
    assert delete_options({"propagationPolicy": "Sideways"}, {}).propagation_policy is None


def test_negative_grace_period_means_one_second() -> None:
    assert delete_options({}, {"gracePeriodSeconds": -10}).grace_period_seconds == 1
    assert delete_options({"gracePeriodSeconds": "-1"}, None).grace_period_seconds == 1


def test_bad_grace_period_in_query_is_400() -> None:
    err = _bad(delete_options, {"gracePeriodSeconds": "soon"}, None)
    assert (err.code, err.reason) == (400, "BadRequest")


def test_unsupported_propagation_policy_is_422() -> None:
    err = _bad(delete_options, {}, {"propagationPolicy": "Sideways"})
    assert (err.code, err.reason) == (422, "Invalid")
    assert err.message == ('DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
                           '"Sideways": supported values: "Foreground", "Background", "Orphan", "nil"')
    status = err.status()
    assert status["details"] == {
        "group": "meta.k8s.io", "kind": "DeleteOptions",
        "causes": [{"reason": "FieldValueNotSupported",
                    "message": 'Unsupported value: "Sideways": supported values: "Foreground", "Background", '
                               '"Orphan", "nil"',
                    "field": "propagationPolicy"}],
    }


def test_orphan_and_propagation_both_set_is_422() -> None:
    for params, body in (({"propagationPolicy": "Orphan", "orphanDependents": "true"}, None),
                         ({}, {"propagationPolicy": "Orphan", "orphanDependents": False})):
        err = _bad(delete_options, params, body)
        assert err.code == 422
        assert err.message == ('DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: '
                               '"Orphan": orphanDependents and deletionPropagation cannot be both set')


def test_both_delete_option_errors_in_kube_order() -> None:
    err = _bad(delete_options, {}, {"propagationPolicy": "Sideways", "orphanDependents": True})
    causes = err.status()["details"]["causes"]
    assert [c["reason"] for c in causes] == ["FieldValueInvalid", "FieldValueNotSupported"]
    assert err.message.startswith('DeleteOptions.meta.k8s.io "" is invalid: [propagationPolicy: Invalid value: ')


@pytest.mark.parametrize(("params", "body"), [
    ({"dryRun": "Yes"}, None),
    ({}, {"dryRun": ["All", "Some"]}),
    ({}, {"dryRun": "All"}),  # a string where a list belongs
])
def test_bad_dry_run_in_delete_options_is_422(params: dict[str, str], body: dict[str, Any] | None) -> None:
    err = _bad(delete_options, params, body)
    assert (err.code, err.reason) == (422, "Invalid")
    causes = err.status()["details"]["causes"]
    assert [(c["reason"], c["field"]) for c in causes] == [("FieldValueNotSupported", "dryRun")]
    assert causes[0]["message"].endswith('supported values: "All"')
