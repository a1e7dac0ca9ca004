"""Pure parts of the connect subresources and the kubernetes endpoints: kube's rules one by one."""

from __future__ import annotations

import errno

import pytest
from coreapi.connect import validate_container
from coreapi.connect_options import pod_log_options
from coreapi.kubeletconn import (
    dial_error,
    is_global_unicast,
    preferred_address,
    split_scheme_name_port,
)
from coreapi.kubernetes_endpoints import endpoint_slice, endpoint_subsets
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.masterleases import lease_key, lease_value, parse_lease


def _pod(*names: str, init: tuple[str, ...] = ()) -> dict[str, object]:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": n} for n in names],
                                                "initContainers": [{"name": n} for n in init]}}


def test_validate_container() -> None:
    assert validate_container("", _pod("a")) == "a"
    assert validate_container("i", _pod("a", init=("i",))) == "i"  # init containers have logs too
    with pytest.raises(APIError) as err:
        validate_container("", _pod("a", "b", init=("i",)))
    assert (err.value.code, err.value.message) == (
        400, "a container name must be specified for pod p, choose one of: [i a b]")
    with pytest.raises(APIError) as err:
        validate_container("", _pod())
    assert err.value.message == "a container name must be specified for pod p"
    with pytest.raises(APIError) as err:
        validate_container("z", _pod("a"))
    assert err.value.message == "container z is not valid for pod p"


@pytest.mark.parametrize(("ident", "want"), [
    ("web", ("", "web", "")), ("web:80", ("", "web", "80")), ("https:web:443", ("https", "web", "443")),
    ("web:http", ("", "web", "http")), ("ftp:web:21", None), (":80", None), ("a:b:c:d", None),
])
def test_split_scheme_name_port(ident: str, want: tuple[str, str, str] | None) -> None:
    assert split_scheme_name_port(ident) == want


@pytest.mark.parametrize(("ip", "ok"), [
    ("10.0.0.5", True), ("192.168.1.1", True), ("8.8.8.8", True), ("2001:db8::1", True),
    ("127.0.0.1", False), ("::1", False), ("0.0.0.0", False), ("169.254.1.1", False),
    ("224.0.0.1", False), ("255.255.255.255", False), ("", False), ("nope", False),
])
def test_global_unicast(ip: str, ok: bool) -> None:
    assert is_global_unicast(ip) is ok


def test_preferred_address_order_and_error() -> None:
    node = {"metadata": {"labels": {}}, "status": {"addresses": [
        {"type": "ExternalIP", "address": "1.2.3.4"}, {"type": "InternalIP", "address": "10.0.0.1"}]}}
    assert preferred_address(node) == "10.0.0.1"
    node["status"]["addresses"].append({"type": "Hostname", "address": "n1"})  # type: ignore[index]
    assert preferred_address(node) == "n1"
    assert preferred_address({"metadata": {"labels": {"kubernetes.io/hostname": "h"}}, "status": {}}) == "h"
    with pytest.raises(APIError) as err:
        preferred_address({"status": {"addresses": [{"type": "Weird", "address": "x"}]}})
    assert (err.value.code, err.value.reason, err.value.message) == (
        500, "", "no preferred addresses found; known addresses: [{Weird x}]")


def test_dial_error_wording() -> None:
    assert dial_error("1.2.3.4:10250", ConnectionRefusedError(errno.ECONNREFUSED, "x")) == \
        "dial tcp 1.2.3.4:10250: connect: connection refused"
    assert dial_error("1.2.3.4:10250", OSError(errno.EHOSTUNREACH, "x")) == \
        "dial tcp 1.2.3.4:10250: connect: no route to host"
    assert dial_error("1.2.3.4:10250", TimeoutError()) == "dial tcp 1.2.3.4:10250: i/o timeout"


def test_pod_log_options() -> None:
    opts = pod_log_options("p", [("container", "c"), ("follow", "x"), ("previous", "0"), ("tailLines", "5"),
                                 ("sinceSeconds", "")])
    assert (opts.container, opts.follow, opts.previous, opts.tail_lines, opts.since_seconds) == ("c", True, False, 5,
                                                                                                  None)
    assert opts.kubelet_query() == "follow=true&tailLines=5"
    with pytest.raises(APIError) as err:
        pod_log_options("p", [("sinceSeconds", "0"), ("tailLines", "-2")])
    assert err.value.code == 422
    assert [c["field"] for c in err.value.details["causes"]] == ["tailLines", "sinceSeconds"]  # type: ignore[index]
    with pytest.raises(APIError) as err:
        pod_log_options("p", [("sinceTime", "yesterday")])
    assert err.value.code == 400


def test_endpoint_subsets_and_slice() -> None:
    subsets = endpoint_subsets([("10.0.0.2", 6443), ("10.0.0.1", 6443), ("10.0.0.3", 7000)], primary_port=7000)
    assert subsets == [
        {"addresses": [{"ip": "10.0.0.3"}], "ports": [{"name": "https", "port": 7000, "protocol": "TCP"}]},
        {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
         "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]},
    ]
    eps = endpoint_slice(subsets[1:])
    assert eps["metadata"]["labels"] == {"kubernetes.io/service-name": "kubernetes"}
    assert eps["endpoints"] == [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}},
                                {"addresses": ["10.0.0.2"], "conditions": {"ready": True}}]
    assert endpoint_slice(endpoint_subsets([("fd00::1", 443)]))["addressType"] == "IPv6"


def test_master_lease_round_trip() -> None:
    assert lease_key("/registry/", "10.0.0.1", 6443) == b"/registry/masterleases/10.0.0.1:6443"
    assert parse_lease(lease_value("10.0.0.1", 6443)) == ("10.0.0.1", 6443)
    assert parse_lease(b"{}") is None
    assert parse_lease(b"not json") is None
