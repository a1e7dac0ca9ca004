"""coreapi.validation: the ConfigMap/Secret key check's fast path (``names.is_config_key``, issue 15)
says "valid" exactly when ``config_key_errors`` finds nothing, and ConfigMap validation gives the
same errors in the same order (bad keys, duplicates with binaryData, the 1 MiB total counted in
UTF-8 bytes) as the long way."""

from __future__ import annotations

import pytest
from coreapi.validation import configdata, names

KEYS = ["a", "A-b_c.d", ".", "..", "..a", ".a", "a..", "-", "_", "a b", "a/b", "é", "", "x" * 253, "x" * 254,
        ".." + "x" * 252, "a\n", "0", "a:b"]


@pytest.mark.parametrize("key", KEYS)
def test_fast_path_agrees_with_the_errors(key: str) -> None:
    assert names.is_config_key(key) == (names.config_key_errors(key) == [])


def _long_way(obj: dict) -> list:  # type: ignore[type-arg]
    """validate_config_map as it was: every key through config_key_errors, sizes via str().encode()."""
    data, binary = configdata._dict(obj.get("data")), configdata._dict(obj.get("binaryData"))
    errs = []
    total = 0
    for key, value in data.items():
        errs.extend(configdata._key_errors([key], "data"))
        if key in binary:
            errs.append(configdata.errors.invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        total += len(str(value).encode())
    for key, value in binary.items():
        errs.extend(configdata._key_errors([key], "binaryData"))
        total += len(configdata._decoded(value))
    if total > configdata.MAX_SECRET_SIZE:
        errs.append(configdata.errors.too_long("", configdata.MAX_SECRET_SIZE))
    return errs


@pytest.mark.parametrize("obj", [
    {"data": {k: "v" for k in KEYS}},
    {"data": {"a": "v", "..b": "w"}, "binaryData": {"a": "eA==", "b c": "eA=="}},
    {"data": {"big": "x" * (1024 * 1024)}},
    {"data": {"big": "é" * (512 * 1024 + 1)}},  # under a MiB in characters, over it in UTF-8 bytes
    {"data": {"n": 5, "f": 1.5}},
    {"data": None, "binaryData": "not a map"},
    {},
])
def test_config_map_errors_unchanged(obj: dict) -> None:  # type: ignore[type-arg]
    assert configdata.validate_config_map(obj) == _long_way(obj)
