"""``--runtime-config`` parsing and resolution (coreapi.runtimeconfig) against kube 1.33's rules."""

from __future__ import annotations

import pytest
from coreapi.runtimeconfig import RuntimeConfigError, enabled_versions, parse

AVAILABLE = [("", "v1"), ("apps", "v1"), ("batch", "v1"), ("authentication.k8s.io", "v1"),
             ("authentication.k8s.io", "v1beta1"), ("authentication.k8s.io", "v1alpha1")]
OTHERS = ("apiextensions.k8s.io",)
GA = {("apps", "v1"), ("batch", "v1"), ("authentication.k8s.io", "v1")}


def resolve(*values: str) -> set[tuple[str, str]]:
    return enabled_versions(parse(values), AVAILABLE, OTHERS)


def test_parse_is_kubes_configuration_map() -> None:
    assert parse(["a/v1=true,b/v1", "a/v1=false", " c/v2 = x ", ",,"]) == {"a/v1": "false", "b/v1": "", "c/v2": "x"}


def test_defaults_serve_ga_only() -> None:
    assert resolve() == GA


@pytest.mark.parametrize(("values", "want"), [
    (("authentication.k8s.io/v1beta1=true",), GA | {("authentication.k8s.io", "v1beta1")}),
    (("authentication.k8s.io/v1beta1",), GA | {("authentication.k8s.io", "v1beta1")}),  # bare key: true
    (("authentication.k8s.io/v1beta1=1",), GA | {("authentication.k8s.io", "v1beta1")}),  # Go ParseBool
    (("api/beta=true",), GA | {("authentication.k8s.io", "v1beta1")}),
    (("api/alpha=true",), GA | {("authentication.k8s.io", "v1alpha1")}),
    (("api/all=true",), {gv for gv in AVAILABLE if gv[0]}),
    (("api/all=true", "authentication.k8s.io/v1alpha1=false"),
     GA | {("authentication.k8s.io", "v1beta1")}),  # a group/version wins over api/*
    (("api/ga=false", "apps/v1=true"), {("apps", "v1")}),
    (("batch/v1=false",), GA - {("batch", "v1")}),
    (("apiextensions.k8s.io/v1=false",), GA),  # another link's group: accepted, not ours to switch
])
def test_resolution(values: tuple[str, ...], want: set[tuple[str, str]]) -> None:
    assert resolve(*values) == want


@pytest.mark.parametrize(("values", "message"), [
    (("foo.io/v1=true", "bar.io/v2=false"), "unknown api groups foo.io,bar.io"),
    (("apps/v1beta2=true",), "group version apps/v1beta2 that has not been registered"),
    (("api/all=false",), "invalid key with only api/all=false"),
    (("apiall=false",), "runtime-config invalid key apiall"),
    (("a/b/c/d=true",), "runtime-config invalid key a/b/c/d"),
    (("api/beta=yes",), "invalid value api/beta=yes"),
    (("batch/v1=maybe",), 'invalid value of batch/v1: maybe, err: strconv.ParseBool: parsing "maybe": invalid syntax'),
    (("batch/v1/jobs=false",), "invalid key batch/v1/jobs: kubechain enables whole group-versions only"),
])
def test_refused_as_kube_refuses(values: tuple[str, ...], message: str) -> None:
    with pytest.raises(RuntimeConfigError) as err:
        resolve(*values)
    assert str(err.value) == message
