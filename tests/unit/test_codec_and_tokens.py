"""The etcd value codec and the store's continue tokens and resourceVersion parsing.

Continue tokens have kube-apiserver's shape (``base64.RawURLEncoding`` of
``{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\\x00"}``) so tokens look the same to clients; a
token a client made up or altered is a 400, never a 500 and never a key outside the list.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.gofmt import go_quote
from genericapi.registry.codec import JsonCodec
from genericapi.registry.store import _decode_continue, _encode_continue, _parse_rv

PREFIX = "/registry/configmaps"


# -- codec ---------------------------------------------------------------------------------------


def test_encode_drops_resource_version_without_touching_the_input() -> None:
    obj: dict[str, Any] = {"kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "12", "uid": "u"},
                           "data": {"k": "v"}}
    stored = orjson.loads(JsonCodec().encode(obj))
    assert "resourceVersion" not in stored["metadata"]
    assert stored == {"kind": "ConfigMap", "metadata": {"name": "a", "uid": "u"}, "data": {"k": "v"}}
    assert obj["metadata"]["resourceVersion"] == "12"  # caller's object unchanged


def test_encode_keeps_key_order_and_objects_without_metadata() -> None:
    codec = JsonCodec()
    raw = codec.encode({"apiVersion": "v1", "kind": "X", "metadata": {"resourceVersion": "1", "name": "n"}})
    assert raw == b'{"apiVersion":"v1","kind":"X","metadata":{"name":"n"}}'
    assert codec.encode({"kind": "X"}) == b'{"kind":"X"}'
    assert codec.encode({"kind": "X", "metadata": None}) == b'{"kind":"X","metadata":null}'


def test_nested_resource_versions_are_not_touched() -> None:
    obj = {"metadata": {"name": "a"}, "spec": {"resourceVersion": "5"},
           "items": [{"metadata": {"resourceVersion": "3"}}]}
    assert orjson.loads(JsonCodec().encode(obj)) == obj


def test_decode_sets_resource_version_from_revision() -> None:
    obj, raw = JsonCodec().decode(b'{"kind":"X","metadata":{"name":"a"}}', 57)
    assert obj["metadata"]["resourceVersion"] == "57"
    assert orjson.loads(raw) == obj


def test_decode_overrides_a_stored_resource_version() -> None:
    obj, _ = JsonCodec().decode(b'{"metadata":{"name":"a","resourceVersion":"1"}}', 9)
    assert obj["metadata"]["resourceVersion"] == "9"


def test_decode_creates_metadata_and_revision_zero_leaves_it_alone() -> None:
    obj, _ = JsonCodec().decode(b'{"kind":"X"}', 3)
    assert obj["metadata"] == {"resourceVersion": "3"}
    obj, raw = JsonCodec().decode(b'{"kind":"X"}', 0)
    assert obj == {"kind": "X"} and raw == b'{"kind":"X"}'


def test_round_trip_never_stores_the_revision() -> None:
    codec = JsonCodec()
    obj, _ = codec.decode(b'{"metadata":{"name":"a"}}', 4)
    again = codec.encode(obj)
    assert b"resourceVersion" not in again


# -- continue tokens ------------------------------------------------------------------------------


def _token(payload: object) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(payload)).decode().rstrip("=")


def test_encode_continue_is_kube_shaped() -> None:
    token = _encode_continue(42, "ns1/cm-b")
    assert "=" not in token  # RawURLEncoding: no padding
    padded = token + "=" * (-len(token) % 4)
    assert orjson.loads(base64.urlsafe_b64decode(padded)) == {"v": "meta.k8s.io/v1", "rv": 42,
                                                               "start": "ns1/cm-b\x00"}


@pytest.mark.parametrize("key", ["ns1/cm-b", "a", "ns/ü-名前", "cluster-scoped-name"])
def test_continue_round_trip(key: str) -> None:
    rev, start = _decode_continue(_encode_continue(7, key), PREFIX)
    assert rev == 7
    assert start == key + "\x00"


def _assert_bad(token: str) -> None:
    with pytest.raises(APIError) as info:
        _decode_continue(token, PREFIX)
    assert info.value.code == 400
    assert info.value.reason == "BadRequest"
    assert "continue key is not valid" in info.value.message


@pytest.mark.parametrize("token", [
    "",
    "not base64!",
    "abcde",  # impossible base64 length
    base64.urlsafe_b64encode(b"not json").decode(),
    _token({"v": "meta.k8s.io/v2", "rv": 5, "start": "a"}),  # unknown version
    _token({"rv": 5, "start": "a"}),
    _token({"v": "meta.k8s.io/v1", "start": "a"}),  # missing rv
    _token({"v": "meta.k8s.io/v1", "rv": 5}),  # missing start
    _token({"v": "meta.k8s.io/v1", "rv": 0, "start": "a"}),  # kube: incorrect encoded start resourceVersion
    _token({"v": "meta.k8s.io/v1", "rv": -3, "start": "a"}),
    _token({"v": "meta.k8s.io/v1", "rv": "abc", "start": "a"}),
    _token({"v": "meta.k8s.io/v1", "rv": None, "start": "a"}),
    _token({"v": "meta.k8s.io/v1", "rv": 5, "start": "/registry/secrets/x"}),  # absolute key
    _token({"v": "meta.k8s.io/v1", "rv": 5, "start": "../secrets/x"}),  # path traversal
    _token({"v": "meta.k8s.io/v1", "rv": 5, "start": "ns/../../secrets"}),
    _token(["meta.k8s.io/v1", 5, "a"]),  # valid JSON, not an object
    _token("meta.k8s.io/v1"),
    _token(5),
    _token(None),
])
def test_tampered_continue_tokens_are_400(token: str) -> None:
    _assert_bad(token)


def test_flipping_a_character_of_a_real_token_is_400_or_harmless() -> None:
    token = _encode_continue(42, "ns1/cm-b")
    for i in range(len(token)):
        replacement = "A" if token[i] != "A" else "B"
        altered = token[:i] + replacement + token[i + 1:]
        try:
            rev, start = _decode_continue(altered, PREFIX)
        except APIError as err:
            assert err.code == 400
            continue
        # if it still decodes, it must still be a relative key below the prefix
        assert rev > 0 and not start.startswith("/") and ".." not in start.split("/")


# -- resourceVersion parsing ----------------------------------------------------------------------


@pytest.mark.parametrize(("rv", "expected"), [("0", 0), ("1", 1), ("123456789012", 123456789012), ("007", 7)])
def test_parse_rv(rv: str, expected: int) -> None:
    assert _parse_rv(rv) == expected


@pytest.mark.parametrize("rv", ["", "abc", "-1", "1.5", "+1", " 1", "1 ", "1_000", "0x10", "١٢", "²", "1e3",
                                "18446744073709551616"])
def test_parse_rv_rejects_what_go_parse_uint_rejects(rv: str) -> None:
    with pytest.raises(APIError) as info:
        _parse_rv(rv)
    assert info.value.code == 400 and info.value.reason == "BadRequest"
    why = "value out of range" if rv == "18446744073709551616" else "invalid syntax"
    assert info.value.message == (f"invalid resource version: resourceVersion: Invalid value: {go_quote(rv)}: "
                                  f"strconv.ParseUint: parsing {go_quote(rv)}: {why}")
