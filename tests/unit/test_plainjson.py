"""Request bodies decode alike with and without the slow duplicate-tracking parse: the shortcut
(orjson's parse when plainjson finds no repeated key and no integer past int64) gives the same
object, duplicate-field messages and errors as decoding.decode_body(detect_duplicates=True)."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from genericapi.apimachinery import decoding
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.plainjson import needs_slow_parse
from genericapi.handlers.body import decode_request_body

TRICKY = [
    b'{"kind":"ConfigMap","data":{"a":"x"}}', b'{"kind":"A","kind":"B"}', b'{"a":{"b":1,"b":2}}',
    b'{"a":"\\"b\\":1","c":2}', b'{"a":"x\\\\","b":1}', b'{"a":"x\\\\\\"","b":1}', b'{"a": "\\u0061", "\\u0061": 2}',
    b'{"a":9223372036854775807}', b'{"a":9223372036854775808}', b'{"a":-9223372036854775808}',
    b'{"a":-9223372036854775809}', b'{"a":18446744073709551615}', b'{"a":18446744073709551616}', b'{"a":1e400}',
    b'{"a":-0.0}', b'{"a":"\\ud83d\\ude00"}', b'{"a":"\\ud800"}',
    b'{"a" \n:\t[ {"b":1},{"b":2, "c":{"d":[1,{"e":3}]}} ] }',
    b'[1]', b'"x"', b'null', b'{"a":"x:y", "b":": "}', b'{"a":[{"x":1,"x":1}]}', b'{}',
    b'{"a":1.5e3,"b":true,"c":null}',
    '{"é":"ü","e\\u0301":1}'.encode(), b'{"a":"\xff"}', b'{"a":1,}', b'{"a" 1}', b'{"a":NaN}', b'{"a":"\\x"}',
    b'{"a":{}, "a":[]}', b'{"":1,"":2}', b'  {"a":1}  ', b'{"a" :1,"a":2}', b'{"a"\n\t:1,\r\n"a" : 2}',
    b'{"a":":x","b":1}', b'{"a":":x","a":1}', b'{"a":" :x","b":1}', b'{"a":1000000000000000000}',
   b'{"a":"12345678901234567890"}',
    b'{"a":[' * 300 + b'{"b":1,"b":2}' + b']}' * 300, b'{"a":[' * 300 + b'{"b":1}' + b']}' * 300,
    b'{"a":[' * 1100 + b'{"b":1,"b":2}' + b']}' * 1100,
]


def answer(fn: Any, raw: bytes) -> Any:
    try:
        return fn(raw)
    except APIError as err:
        return ("error", err.code, err.reason, err.message)


def slow(raw: bytes) -> Any:
    return decoding.decode_body(raw, "application/json", detect_duplicates=True, kind="ConfigMap")


def fast(raw: bytes) -> Any:
    return decode_request_body(raw, "application/json", True, "ConfigMap")


@pytest.mark.parametrize("raw", TRICKY)
def test_tricky_bodies_decode_alike(raw: bytes) -> None:
    assert repr(answer(fast, raw)) == repr(answer(slow, raw))


def test_shortcut_taken_only_without_repeats_or_big_ints() -> None:
    nested = b'{"a":{"b":[1,{"c":"d:\\"e\\":"}]}}'
    assert not needs_slow_parse(nested, orjson.loads(nested))
    assert needs_slow_parse(b'{"a":1,"a":2}', orjson.loads(b'{"a":1,"a":2}'))
    assert needs_slow_parse(b'{"a":9223372036854775808}', orjson.loads(b'{"a":9223372036854775808}'))


def _random_value(rng: random.Random, depth: int) -> Any:
    choice = rng.random()
    if depth > 3 or choice < 0.4:
        return rng.choice([1, -2, 2**63, 1.5, True, None, "s", 'q"uo:te\\', "\u00e9", ""])
    if choice < 0.6:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = rng.sample(["a", "b", "c", "d:", 'e"'], rng.randint(0, 3))
    return {k: _random_value(rng, depth + 1) for k in keys}


def _with_repeat(rng: random.Random, text: bytes) -> bytes:
    # Repeat the first key of some object: '{"k":' -> '{"k":0,"k":'
    at = text.find(b'{"')
    if at < 0 or rng.random() < 0.5:
        return text
    end = text.find(b'":', at)
    key = text[at + 1:end + 1]
    return text[:at + 1] + key + b":0," + text[at + 1:]


def test_random_bodies_decode_alike() -> None:
    rng = random.Random(15)
    for _ in range(2000):
        value = {"kind": "ConfigMap", "x": _random_value(rng, 0)}
        raw = _with_repeat(rng, orjson.dumps(value, option=orjson.OPT_INDENT_2 if rng.random() < 0.3 else 0))
        assert repr(answer(fast, raw)) == repr(answer(slow, raw)), raw
