"""Whether a JSON body orjson parsed needs the slow, duplicate-tracking parse.

kube-apiserver reports repeated keys in a request body (``duplicate field "spec.replicas"``) under
``fieldValidation=Warn`` (the default) and ``Strict``, and reads integers past int64 as float64.
:mod:`decoding` finds both with the standard library's parser and an ``object_pairs_hook``, several
times slower than orjson, and ran it on every create and update. A body whose key tokens are as
many as its parsed objects' keys has no repeated key, and one without integers beyond int64
parses to the same value either way; only other bodies need the slow parse.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["needs_slow_parse"]

#: Every JSON string, with the colon that makes it a key (valid JSON has quotes only as string
#: delimiters, so a left-to-right scan that consumes whole strings stays in step with the text).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"([ \t\n\r]*:)?')
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: A key, whitespace, its colon (needs an unescaped body: see needs_slow_parse).
_SPACED_KEY = re.compile(rb'"[ \t\n\r]+:')
#: Digits as "0", all else as " ": nineteen "0"s in a row are an integer at or past 10**18 (int64
#: ends at 9223372036854775807), or a long fraction or digit string (counted: safe). A translate
#: and a substring search, as a regular expression takes ~15 ns a byte.
_DIGITS = bytes(0x30 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
_LONG_NUMBER = b"0" * 19


def needs_slow_parse(raw: bytes, value: Any) -> bool:
    """True unless ``value`` (orjson's parse of the JSON ``raw``) has exactly as many keys as
    ``raw`` has key tokens and no integer outside int64: a repeated key, or an integer Go reads
    as a float, needs :func:`decoding.decode_body`'s duplicate-tracking parse. Counting may only
    err upwards (a string that starts with a colon counts), which costs the slow parse, never
    a missed duplicate."""
    if b"\\" not in raw:
        # No escapes: every quote delimits a string, so '":' ends a key or starts a string that
        # begins with a colon; orjson writes the value back without escapes or spaces, so its
        # '":' are exactly the value's keys, and its long digit runs the integers past int64.
        try:
            dumped = orjson.dumps(value)
        except orjson.JSONEncodeError:  # deeper than orjson writes: counted below
            dumped = b""
        if dumped:
            if _LONG_NUMBER in dumped.translate(_DIGITS):
                return True
            tokens = raw.count(b'":')
            if b'" ' in raw or b'"\t' in raw or b'"\n' in raw or b'"\r' in raw:
                tokens += len(_SPACED_KEY.findall(raw))
            return tokens != dumped.count(b'":')
    keys = 0
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            keys += len(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif type(node) is int and not _INT64_MIN <= node <= _INT64_MAX:
            return True
    tokens = sum(1 for colon in _STRING.findall(raw) if colon)
    return tokens != keys
