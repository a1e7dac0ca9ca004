"""The encoders on the request path take values deeper than orjson serializes (254 levels).

Each is fed a document nested 1,000 and 10,000 levels deep (kube's decoder limit) and must give
the bytes orjson gives for shallow documents; the merge patch must stay linear in depth.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from aggregator.audit import logbackend
from genericapi.apimachinery import decoding, deepjson, strategicpatch
from genericapi.handlers import responses
from genericapi.registry.codec import JsonCodec


def nested(levels: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def obj(levels: int, leaf: Any = "x") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "n", "resourceVersion": "7"},
            "spec": nested(levels, leaf)}


def expected(value: Any) -> bytes:
    """What orjson writes, from the standard library's C encoder (it recurses: deepjson raised the
    limit; its indenting encoder is pure Python and quadratic in depth, so only compact here)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def assert_indented_like_orjson(pretty: bytes, compact: bytes) -> None:
    """Go's/orjson's two-space layout: every line indented by its nesting (no brackets in strings here)."""
    assert pretty.endswith(b"\n") and b"".join(line.strip() for line in pretty.splitlines()).replace(
        b'": ', b'":') == compact
    level = 0
    for line in pretty.splitlines():
        body = line.lstrip(b" ")
        closes = body.startswith((b"}", b"]"))
        assert len(line) - len(body) == 2 * (level - closes), line
        level += body.count(b"{") + body.count(b"[") - body.count(b"}") - body.count(b"]")
    assert level == 0


@pytest.mark.parametrize("levels", [1_000, 10_000])
def test_responses_and_encode_json(levels: int) -> None:
    value = obj(levels)
    compact = expected(value)
    assert responses.dumps(value) == compact
    assert decoding.encode_json(value) == compact + b"\n"
    pretty = responses.dumps(value, pretty=True)
    assert_indented_like_orjson(pretty, compact)
    assert deepjson.dumps(value, orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE) == pretty


def test_shallow_documents_keep_orjson_bytes() -> None:
    value = {"kind": "ConfigMap", "data": {"é": "ü", "n": 1.5, "big": 2**63}}
    assert responses.dumps(value) == orjson.dumps(value)
    assert responses.dumps(value, pretty=True) == orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"


@pytest.mark.parametrize("levels", [1_000, 10_000])
def test_codec_round_trip(levels: int) -> None:
    codec = JsonCodec()
    stored = codec.encode(obj(levels))
    assert b"resourceVersion" not in stored
    decoded, raw = codec.decode(stored, 42)
    assert decoded["metadata"]["resourceVersion"] == "42"
    assert deepjson.loads(raw) == decoded and decoded["spec"] == nested(levels, "x")


def test_audit_log_lines(tmp_path: Path) -> None:
    backend = logbackend.LogBackend(str(tmp_path / "audit.log"))
    event = {"kind": "Event", "requestObject": obj(5_000)}
    backend.write([event])
    backend.close()
    lines = (tmp_path / "audit.log").read_bytes().splitlines()
    assert [deepjson.loads(line) for line in lines] == [event]


def test_encoding_is_linear_in_its_output() -> None:
    """Compact responses: 8,000 levels cost about 4x 2,000. Indented ones are quadratic in depth by
    nature (each line is indented by its level: 64 MB of spaces at 8,000), so their cost per output
    byte must stay flat (the standard library's indenting encoder took 130 s at 10,000). Ratios of
    this process's CPU time in one run, not time limits."""
    def run(levels: int, pretty: bool) -> tuple[float, int]:
        value = obj(levels)
        best, size = float("inf"), 0
        for _ in range(3):
            started = time.process_time()
            size = len(responses.dumps(value, pretty=pretty))
            best = min(best, time.process_time() - started)
        return best, size
    (small, _), (large, _) = run(2_000, False), run(8_000, False)
    assert large < 8 * small + 0.05, (small, large)
    (small, small_size), (large, large_size) = run(2_000, True), run(8_000, True)
    assert large / large_size < 3 * small / small_size + 1e-9, (small, small_size, large, large_size)


def test_merge_patch_is_linear_in_depth() -> None:
    """A merge patch replacing the deepest leaf: 8,000 levels cost about 4x 2,000 (quadratic: 16x)."""
    def run(levels: int) -> float:
        original, patch = obj(levels, "old"), {"spec": nested(levels, "new")}
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            out = strategicpatch.json_merge_patch(original, patch)
            best = min(best, time.process_time() - started)
        assert out["spec"] == nested(levels, "new") and original["spec"] == nested(levels, "old")
        return best
    small, large = run(2_000), run(8_000)
    assert large < 8 * small + 0.05, (small, large)
