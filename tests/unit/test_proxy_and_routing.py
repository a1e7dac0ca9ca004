"""What the gateway forwards and where: request headers to upstreams, and the routing table.

The identity headers (``X-Remote-User`` / ``-Group`` / ``-Extra-*``) are trusted by the
backends, so a client's own copies must never pass the gateway, whatever their case; only the
gateway's authenticated identity (the ``extra`` headers) is added.
"""

from __future__ import annotations

from typing import Any

import pytest
from aggregator.routing import RoutingTable
from genericapi.server.proxy import HOP_BY_HOP, _forward_headers


def _scope(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http", "headers": list(headers)}


def test_hop_by_hop_headers_are_dropped() -> None:
    scope = _scope(
        (b"host", b"gateway:6443"),
        (b"connection", b"keep-alive"),
        (b"keep-alive", b"timeout=5"),
        (b"transfer-encoding", b"chunked"),
        (b"te", b"trailers"),
        (b"trailer", b"X-Checksum"),
        (b"upgrade", b"h2c"),
        (b"proxy-authorization", b"Basic Zm9vOmJhcg=="),
        (b"proxy-authenticate", b"Basic"),
        (b"content-length", b"12"),
        (b"accept", b"application/json"),
        (b"content-type", b"application/merge-patch+json"),
        (b"user-agent", b"kubectl/v1.33.0"),
    )
    assert _forward_headers(scope, []) == [
        ("accept", "application/json"),
        ("content-type", "application/merge-patch+json"),
        ("user-agent", "kubectl/v1.33.0"),
    ]


def test_header_names_are_matched_case_insensitively() -> None:
    scope = _scope((b"Connection", b"close"), (b"Transfer-Encoding", b"chunked"), (b"Accept", b"*/*"))
    assert _forward_headers(scope, []) == [("accept", "*/*")]


@pytest.mark.parametrize("name", [
    b"x-remote-user", b"X-Remote-User", b"X-REMOTE-GROUP", b"x-remote-extra-scopes",
    b"X-Remote-Extra-Authentication.kubernetes.io%2fpod-name", b"x-remote-uid",
])
def test_client_identity_headers_never_pass(name: bytes) -> None:
    forwarded = _forward_headers(_scope((name, b"system:admin"), (b"accept", b"*/*")),
                                 [("X-Remote-User", "alice")])
    assert forwarded == [("accept", "*/*"), ("X-Remote-User", "alice")]
    assert not any(v == "system:admin" for _, v in forwarded)


def test_similar_names_are_not_dropped() -> None:
    scope = _scope((b"x-remote", b"1"), (b"x-remoteuser", b"2"), (b"x-forwarded-for", b"10.0.0.1"),
                   (b"x-request-id", b"abc"))
    assert [k for k, _ in _forward_headers(scope, [])] == ["x-remote", "x-remoteuser", "x-forwarded-for",
                                                            "x-request-id"]


def test_repeated_headers_keep_their_order_and_latin1_values() -> None:
    scope = _scope((b"accept", b"a"), (b"cookie", b"x=1"), (b"accept", b"b"), (b"x-note", "café".encode("latin-1")))
    assert _forward_headers(scope, [("X-Remote-Group", "g1"), ("X-Remote-Group", "g2")]) == [
        ("accept", "a"), ("cookie", "x=1"), ("accept", "b"), ("x-note", "café"),
        ("X-Remote-Group", "g1"), ("X-Remote-Group", "g2"),
    ]


def test_no_headers() -> None:
    assert _forward_headers(_scope(), []) == []


def test_hop_by_hop_set_is_lower_case() -> None:
    assert all(name == name.lower() for name in HOP_BY_HOP)


# -- routing table --------------------------------------------------------------------------------

CORE = ("http://core-a", "http://core-b")
EXTENSIONS = ("http://ext-a",)


@pytest.fixture
def table() -> RoutingTable:
    return RoutingTable((CORE, EXTENSIONS), {
        ("", "v1"): 0,
        ("apps", "v1"): 0,
        ("apiextensions.k8s.io", "v1"): 1,
        ("example.com", "v1alpha1"): 1,
    })


@pytest.mark.parametrize(("path", "expected"), [
    ("/api/v1/namespaces/default/pods", CORE),
    ("/api/v1", CORE),
    ("/api/v1/", CORE),
    ("/apis/apps/v1/namespaces/ns/deployments/web/scale", CORE),
    ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", EXTENSIONS),
    ("/apis/example.com/v1alpha1/namespaces/x/widgets", EXTENSIONS),
    ("/apis/example.com/v1alpha1", EXTENSIONS),
    ("/apis/example.com/v1alpha1/watch/widgets", EXTENSIONS),
    # unknown group-versions, and anything that is not a group-version path, go to the first member
    ("/apis/example.com/v2/widgets", CORE),
    ("/apis/unknown.io/v1/things", CORE),
    ("/api/v2/pods", CORE),
    ("/apis/example.com", CORE),
    ("/apis", CORE),
    ("/api", CORE),
    ("/", CORE),
    ("", CORE),
    ("/healthz", CORE),
    ("/openapi/v3/apis/example.com/v1alpha1", CORE),
    ("/version", CORE),
])
def test_upstreams(table: RoutingTable, path: str, expected: tuple[str, ...]) -> None:
    assert table.upstreams(path) == list(expected)


def test_upstreams_returns_a_fresh_list(table: RoutingTable) -> None:
    first = table.upstreams("/api/v1/pods")
    first.append("http://evil")
    assert table.upstreams("/api/v1/pods") == list(CORE)


def test_no_members_means_no_upstreams() -> None:
    assert RoutingTable(()).upstreams("/api/v1/pods") == []


def test_empty_table_sends_everything_to_the_first_member() -> None:
    table = RoutingTable((CORE, EXTENSIONS))
    assert table.upstreams("/apis/apiextensions.k8s.io/v1/customresourcedefinitions") == list(CORE)
