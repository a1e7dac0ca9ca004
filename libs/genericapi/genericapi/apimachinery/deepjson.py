"""JSON as deep as kube-apiserver takes it: 10,000 levels (Go's ``maxNestingDepth``).

orjson is the fast path everywhere, but it refuses to parse past 1,024 levels and to serialize
past 254. kube's decoder accepts 10,000 levels, so a custom resource that preserves unknown
fields may hold (and be returned, watched, patched with) objects that deep. ``loads`` and
``dumps`` try orjson first and, only when nesting is what stopped it, fall back: ``loads`` to the
standard library's parser with orjson's semantics (no NaN or infinities, integers past 64 bits
read as floats, invalid UTF-8 refused), ``dumps`` to iterative walks that leave every subtree
orjson can take to orjson (so the bytes are orjson's, and the cost linear in depth).

Walking such values recursively (the codec, pruning, patches, managedFields) needs a recursion
limit of a few frames per level, and a recursion limit is only safe when the C stack behind it is
large enough for Python -> C -> Python recursion to hit ``RecursionError`` before it overflows
(measured with CPython 3.11: ~1.6 KiB per round trip, so 50,000 frames need ~40 MiB). Importing
this module (every service imports it through the decoder, before it starts a thread) therefore
sets, once per process: the recursion limit ``RECURSION_LIMIT``, the main thread's stack rlimit
(where the event loop and every request runs) and the stack size of threads started afterwards.
Bodies deeper than 10,000 levels are refused before any of this, with Go's scanner error.
"""

from __future__ import annotations

import json
import math
import resource
import sys
import threading
from collections.abc import Iterator
from typing import Any

import orjson

#: Go's encoding/json ``maxNestingDepth`` (sigs.k8s.io/json and so kube-apiserver share it).
MAX_DEPTH = 10_000
#: Python frames allowed: five per level of a ``MAX_DEPTH`` value (a walker and what it calls back through).
RECURSION_LIMIT = 5 * MAX_DEPTH
#: The main thread's stack may grow to this (Linux keeps at least 128 MiB free below it at exec).
STACK_BYTES = 120 * 1024 * 1024
#: Stack of each thread started after ``allow_deep_recursion`` (virtual: only touched pages cost memory).
THREAD_STACK_BYTES = 128 * 1024 * 1024

_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1


def allow_deep_recursion() -> None:
    """Let this process walk values nested ``MAX_DEPTH`` deep: a recursion limit that allows it
    and C stacks that back it (without them deep C recursion would overflow the default 8 MiB stack,
    a segfault, instead of raising RecursionError). Idempotent; never lowers a larger setting."""
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    wanted = STACK_BYTES if hard == resource.RLIM_INFINITY else min(STACK_BYTES, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_STACK, (wanted, hard))
    if threading.stack_size() < THREAD_STACK_BYTES:
        threading.stack_size(THREAD_STACK_BYTES)
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)


def openings(data: bytes) -> Iterator[tuple[int, int]]:
    """(index, nesting depth) of every ``[`` and ``{`` outside strings: an iterative scan of the
    bytes, safe for any input."""
    depth = 0
    in_string = escaped = False
    for index, byte in enumerate(data):
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            yield index, depth
        elif byte in (0x5D, 0x7D):
            depth -= 1


def depth_error(data: bytes, limit: int = MAX_DEPTH) -> str | None:
    """Go's scanner error for a document nested deeper than ``limit`` (the bracket that goes one
    level too deep), else None."""
    for index, depth in openings(data):
        if depth > limit:
            return f"invalid character '{chr(data[index])}' exceeded max depth"
    return None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"unexpected character, expected a JSON value: {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError("number is infinity when parsed as double")
    return value


def _int_as_orjson(text: str) -> int | float:
    value = int(text)
    return value if _INT64_MIN <= value <= _UINT64_MAX else _finite_float(text)


def _stdlib_loads(raw: bytes) -> Any:
    """The standard library's parser with orjson's semantics (its errors as orjson.JSONDecodeError)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise orjson.JSONDecodeError(f"str is not valid UTF-8: {err.reason}", "", err.start) from None
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                          parse_int=_int_as_orjson)
    except json.JSONDecodeError as err:
        raise orjson.JSONDecodeError(err.msg, err.doc, err.pos) from None
    except ValueError as err:
        raise orjson.JSONDecodeError(str(err), text, 0) from None


def loads(data: bytes | str, max_depth: int | None = None) -> Any:
    """orjson.loads, or the standard library's parser for documents deeper than orjson goes.

    ``max_depth`` (``MAX_DEPTH`` for request bodies, as kube's decoder) refuses deeper documents with
    Go's scanner message as orjson.JSONDecodeError. Without it (what kubechain itself stored or
    sent, e.g. a 10,000-level object plus the managedFields entry that records it) any depth parses.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as err:
        if "depth" not in str(err):
            raise
    raw = data.encode() if isinstance(data, str) else data
    too_deep = depth_error(raw, max_depth) if max_depth is not None else None
    if too_deep is not None:
        raise orjson.JSONDecodeError(too_deep, raw.decode("utf-8", "replace"), 0)
    return _stdlib_loads(raw)


def _too_deep(err: Exception) -> bool:
    return "Recursion limit" in str(err)


def dumps(obj: Any, option: int = 0) -> bytes:
    """orjson.dumps, or (only when orjson stopped at its 254 levels) ``_fragment_dumps`` (compact)
    or ``_walk_dumps`` (indented, whose output is quadratic in depth anyway): the same
    bytes for the options kubechain uses (compact or ``OPT_INDENT_2``, ``OPT_SORT_KEYS``,
    ``OPT_APPEND_NEWLINE``). Values orjson refuses for other reasons are refused the same way."""
    try:
        return orjson.dumps(obj, option=option)
    except orjson.JSONEncodeError as err:
        if not _too_deep(err):
            raise
    if option & orjson.OPT_INDENT_2:
        return _walk_dumps(obj, option)
    return _fragment_dumps(obj, option)


#: Subtrees at most this tall are handed to orjson whole (it serializes 254 levels).
_ORJSON_HEIGHT = 200


def _heights(root: Any) -> dict[int, int]:
    """Height of every container taller than ``_ORJSON_HEIGHT`` (by id), iteratively."""
    heights: dict[int, int] = {}
    tall: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if not done:
            stack.append((node, True))
            stack.extend((child, False) for child in children if isinstance(child, (dict, list)))
            continue
        height = 1 + max((heights.get(id(c), 0) for c in children if isinstance(c, (dict, list))), default=0)
        heights[id(node)] = height
        if height > _ORJSON_HEIGHT:
            tall[id(node)] = height
    return tall


def _fragment_dumps(obj: Any, option: int) -> bytes:
    """orjson's compact bytes for a value of any depth: every subtree that reaches ``_ORJSON_HEIGHT``
    levels (counting from the last such cut below it) is written by orjson and stands in its parent
    as an ``orjson.Fragment`` (bytes orjson copies verbatim and does not count as depth); a container
    above a cut is copied once, holding its children's stand-ins. One walk, each container visited
    once by id (a value holding the same container in several places is linear, not exponential),
    so the Python work is linear in the document's size; the bytes are orjson's (its own errors too:
    a refused key or value raises from the chunk that holds it).

    The walk recurses, one frame per level: about twice as fast as an explicit stack of work items,
    and the recursion limit ``allow_deep_recursion`` sets leaves room for five times ``MAX_DEPTH``
    (past that, orjson's own refusal of a value nested too deep)."""
    sub_option = option & ~orjson.OPT_APPEND_NEWLINE  # every option but the final newline holds inside
    try:
        _, standin = _stand_in(obj, {}, sub_option)
    except RecursionError:
        raise orjson.JSONEncodeError("Recursion limit reached") from None
    return orjson.dumps(standin, option=option)


def _stand_in(node: Any, seen: dict[int, tuple[int, Any]], option: int) -> tuple[int, Any]:
    """(height below the last cut, what is written in ``node``'s place) for a non-empty container:
    ``node`` itself, a copy holding its children's stand-ins, or (at ``_ORJSON_HEIGHT``) a Fragment."""
    key = id(node)
    found = seen.get(key)
    if found is not None:
        return found
    height = 1
    swapped: dict[Any, Any] | None = None
    for index, child in node.items() if isinstance(node, dict) else enumerate(node):
        if child and isinstance(child, (dict, list)):
            below, standin = _stand_in(child, seen, option)
            if below >= height:
                height = below + 1
            if standin is not child:
                if swapped is None:
                    swapped = {}
                swapped[index] = standin
    written = node
    if swapped is not None:  # a copy made in C (a comprehension is a function call per level)
        if isinstance(node, dict):
            written = dict(node)
            written.update(swapped)
        else:
            written = list(node)
            for index, standin in swapped.items():
                written[index] = standin
    result = (0, orjson.Fragment(orjson.dumps(written, option=option))) if height >= _ORJSON_HEIGHT \
        else (height, written)
    seen[key] = result
    return result


def _walk_dumps(obj: Any, option: int) -> bytes:
    """orjson's bytes for a value of any depth: an iterative walk down the containers taller than
    orjson goes, every shallower subtree (and every scalar, and each key) written by orjson itself.
    Linear in the document's size (the standard library's indenting encoder is quadratic in depth)."""
    indent = bool(option & orjson.OPT_INDENT_2)
    sort_keys = bool(option & orjson.OPT_SORT_KEYS)
    sub_option = option & (orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    tall = _heights(obj)
    out: list[bytes] = []
    # Work items: bytes to write, or (value, level) to encode.
    stack: list[bytes | tuple[Any, int]] = [(obj, 0)]
    while stack:
        item = stack.pop()
        if isinstance(item, bytes):
            out.append(item)
            continue
        node, level = item
        if id(node) not in tall:
            chunk = orjson.dumps(node, option=sub_option)
            out.append(chunk.replace(b"\n", b"\n" + b"  " * level) if indent and level else chunk)
            continue
        if isinstance(node, dict):
            for key in node:
                if not isinstance(key, str):
                    raise orjson.JSONEncodeError("Dict key must be str")
            entries: list[tuple[bytes, Any]] = [
                (orjson.dumps(k) + (b": " if indent else b":"), v)
                for k, v in (sorted(node.items()) if sort_keys else node.items())]
            opening, closing = b"{", b"}"
        else:
            entries = [(b"", v) for v in node]
            opening, closing = b"[", b"]"
        pad = b"\n" + b"  " * (level + 1) if indent else b""
        work: list[bytes | tuple[Any, int]] = [opening]
        for index, (prefix, value) in enumerate(entries):
            work.append((b"," if index else b"") + pad + prefix)
            work.append((value, level + 1))
        work.append((b"\n" + b"  " * level if indent else b"") + closing)
        stack.extend(reversed(work))
    if option & orjson.OPT_APPEND_NEWLINE:
        out.append(b"\n")
    return b"".join(out)


allow_deep_recursion()
