"""deepjson: JSON nested as deep as kube-apiserver accepts (10,000 levels) parses and serializes,
with orjson's semantics and format, one level more is Go's scanner error, and walking such values
in the main thread or a thread started afterwards raises RecursionError, never overflows the stack."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
import threading
from typing import Any

import orjson
import pytest
from genericapi.apimachinery import deepjson


def nested(depth: int, leaf: str = "1") -> bytes:
    return ('{"a":' * depth + leaf + "}" * depth).encode()


def test_the_fast_path_is_orjson_unchanged() -> None:
    doc = {"b": [1, 2.5, "x\u00e9"], "a": {"c": None, "d": True}}
    assert deepjson.dumps(doc) == orjson.dumps(doc)
    for option in (orjson.OPT_INDENT_2, orjson.OPT_SORT_KEYS, orjson.OPT_APPEND_NEWLINE):
        assert deepjson.dumps(doc, option) == orjson.dumps(doc, option=option)
    assert deepjson.loads(orjson.dumps(doc)) == doc


@pytest.mark.parametrize("depth", [255, 1_024, 1_025, deepjson.MAX_DEPTH])
def test_deep_documents_round_trip_in_orjson_format(depth: int) -> None:
    value = deepjson.loads(nested(depth))
    assert deepjson.dumps(value) == nested(depth)
    assert deepjson.loads(nested(depth), max_depth=deepjson.MAX_DEPTH) == value


def test_past_orjsons_254_levels_the_fallback_writes_orjsons_format() -> None:
    shallow = {"a": {"b": [1, "x"]}, "c": 2}
    doc: dict[str, Any] = shallow
    for _ in range(300):  # orjson serializes 254 levels; past that, the same text from the fallback
        doc = {"z": doc, "k": [1.5, None, True]}
    for option in (0, orjson.OPT_INDENT_2, orjson.OPT_SORT_KEYS, orjson.OPT_APPEND_NEWLINE):
        assert deepjson.loads(deepjson.dumps(doc, option)) == doc
        inner = doc
        for _ in range(250):
            inner = inner["z"]
        assert deepjson.dumps(inner, option) == orjson.dumps(inner, option=option), option


def test_one_level_past_the_limit_is_gos_scanner_error() -> None:
    with pytest.raises(orjson.JSONDecodeError, match=r"^invalid character '\{' exceeded max depth"):
        deepjson.loads(nested(deepjson.MAX_DEPTH + 1), max_depth=deepjson.MAX_DEPTH)
    with pytest.raises(orjson.JSONDecodeError, match=r"^invalid character '\[' exceeded max depth"):
        deepjson.loads(b"[" * 10_001 + b"]" * 10_001, max_depth=deepjson.MAX_DEPTH)
    # Brackets inside strings do not count; without max_depth (kubechain's own data) any depth parses.
    assert deepjson.depth_error(b'["' + b"[" * 20_000 + b'"]') is None
    assert deepjson.loads(nested(deepjson.MAX_DEPTH + 5)) is not None


@pytest.mark.parametrize("body", [b"[NaN]", b"[Infinity]", b"[1e400]", b'["\xff"]', b"[1,]", b'{"a"}'])
def test_the_fallback_refuses_what_orjson_refuses(body: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(body)
    deep = b"[" * 2_000 + body + b"]" * 2_000
    with pytest.raises(orjson.JSONDecodeError):
        deepjson.loads(deep)


def test_the_fallback_reads_numbers_as_orjson() -> None:
    deep = b"[" * 2_000 + b"[123456789012345678901234567890, -5, 18446744073709551615, 0.25]" + b"]" * 2_000
    value = deepjson.loads(deep)
    for _ in range(2_000):
        value = value[0]
    assert value == orjson.loads(b"[123456789012345678901234567890, -5, 18446744073709551615, 0.25]")
    assert isinstance(value[0], float) and isinstance(value[2], int)


def nested_list(depth: int) -> Any:
    doc: Any = []
    for _ in range(depth):
        doc = [doc]
    return doc


def test_the_fallback_refuses_what_orjson_cannot_encode() -> None:
    doc: Any = "x\ud800"
    for _ in range(300):
        doc = [doc]
    with pytest.raises(orjson.JSONEncodeError):
        deepjson.dumps(doc)
    doc = float("nan")  # orjson writes null for it: the fallback too
    for _ in range(300):
        doc = [doc]
    assert deepjson.dumps(doc) == b"[" * 300 + b"null" + b"]" * 300
    with pytest.raises(orjson.JSONEncodeError):  # a key orjson refuses, deep
        deepjson.dumps({"deep": nested_list(300), 1: 2})
    with pytest.raises(orjson.JSONEncodeError):  # other orjson refusals are not retried
        deepjson.dumps({1: 2})


def walk(value: Any) -> int:
    """A recursive walker as the registry's (pruning, patches): Python -> C -> Python per level."""
    if isinstance(value, dict):
        return 1 + max((walk(v) for v in value.values()), default=0)
    return 0


def test_a_max_depth_value_is_walked_in_the_main_thread_and_in_new_threads() -> None:
    value = deepjson.loads(nested(deepjson.MAX_DEPTH))
    assert walk(value) == deepjson.MAX_DEPTH
    assert copy.deepcopy(value) == value
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append((walk(value), deepjson.dumps(value))))
    worker.start()
    worker.join()
    assert results == [(deepjson.MAX_DEPTH, nested(deepjson.MAX_DEPTH))]


@pytest.mark.parametrize("where", ["main", "thread"])
def test_runaway_recursion_is_a_recursion_error_not_a_crash(where: str) -> None:
    # The worst pattern measured (Python -> C -> Python, ~1.6 KiB of C stack per round trip) up to the
    # raised recursion limit, in a fresh interpreter (a segfault would kill the test run).
    script = textwrap.dedent(f"""
        import threading
        from genericapi.apimachinery import deepjson

        def g(n):
            return sorted([n], key=lambda m: g(m))

        def run():
            try:
                g(1)
            except RecursionError:
                print("RecursionError")

        if {where!r} == "main":
            run()
        else:
            t = threading.Thread(target=run)
            t.start()
            t.join()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "RecursionError", (proc.returncode, proc.stderr[-500:])


@pytest.mark.parametrize("option", [0, orjson.OPT_INDENT_2, orjson.OPT_SORT_KEYS, orjson.OPT_APPEND_NEWLINE,
                                    orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE])
def test_the_fallback_encoder_writes_orjsons_bytes(option: int) -> None:
    doc = {"kind": "X", "b": [1, -2, 0.5, 1e20, "\u00e9\u4e2d\"\\\n", None, True, False, [], {}],
           "a": {"z": {"y": [{"x": 1}]}}, "empty": ""}
    assert deepjson._walk_dumps(doc, option) == orjson.dumps(doc, option=option)


@pytest.mark.parametrize("option", [0, orjson.OPT_SORT_KEYS, orjson.OPT_APPEND_NEWLINE,
                                    orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE])
def test_the_compact_fallback_writes_orjsons_bytes_at_any_depth(option: int) -> None:
    """``_fragment_dumps`` (compact output past 254 levels) cuts the value into orjson-sized chunks:
    its bytes are orjson's whatever the cut points, and the indenting walker's where both apply."""
    shallow = {"kind": "X", "b": [1, -2, 0.5, 1e20, "\u00e9\u4e2d\"\\\n<&>", None, True, False, [], {}],
               "a": {"z": {"y": [{"x": 1}]}}, "empty": ""}
    assert deepjson._fragment_dumps(shallow, option) == orjson.dumps(shallow, option=option)
    shared = {"s": [1, {"t": 2}]}
    doc: Any = shallow
    for level in range(1_234):  # cuts every 200 levels, and siblings of every height below them
        doc = ({"z": doc, "k": [1.5, None, shared], "w": nested_list(level % 230), "a": {}} if level % 3
               else [doc, shared])
    out = deepjson.dumps(doc, option)
    assert out == deepjson._walk_dumps(doc, option)
    assert deepjson.loads(out) == doc
    inner = doc
    for _ in range(1_000):
        inner = inner["z"] if isinstance(inner, dict) else inner[0]
    assert deepjson._fragment_dumps(inner, option) == orjson.dumps(inner, option=option)


def test_the_compact_fallback_refuses_what_orjson_refuses() -> None:
    for bad in ("x\ud800", 2**64, {1: 2}):
        doc: Any = {"v": bad}
        for _ in range(700):
            doc = {"a": doc, "b": [doc] if isinstance(bad, str) else []}
        with pytest.raises(orjson.JSONEncodeError):
            deepjson.dumps(doc)

