"""Secret ``stringData`` is merged into ``data`` (base64) and never kept."""

from __future__ import annotations

from typing import Any

from coreapi.secrets import merge_string_data


def test_string_data_is_encoded_over_data() -> None:
    secret: dict[str, Any] = {"data": {"a": "b2xk", "keep": "eA=="}, "stringData": {"a": "new", "u": "ü"}}
    merge_string_data(secret)
    assert secret == {"data": {"a": "bmV3", "keep": "eA==", "u": "w7w="}}


def test_no_data_yet() -> None:
    secret: dict[str, Any] = {"stringData": {"password": "s3cret"}}
    merge_string_data(secret)
    assert secret == {"data": {"password": "czNjcmV0"}}


def test_wrong_types_are_left_for_validation() -> None:
    for bad in ({"stringData": "x"}, {"stringData": {"a": 1}}, {"data": [], "stringData": {"a": "b"}}):
        before = dict(bad)
        merge_string_data(bad)
        assert bad == before
