"""The Kubernetes CEL libraries CRD authors use: lists, strings (cel-go ``ext.Strings``), regex.

The interpreter (``common-expression-language``) only knows standard CEL; kube-apiserver's
environment adds these functions (``k8s.io/apiserver/pkg/cel/library`` and cel-go's ``ext``).
The interpreter calls a registered Python function by name with the receiver as first argument,
and one name serves every overload (``'ab'.indexOf('b')`` and ``[1, 2].indexOf(2)`` both land in
``index_of``), so each function dispatches on the Python type of its receiver. An error is a
``CELFunctionError`` whose text is cel-go's. URLs, quantities and IPs are in ``library_ext``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import pairwise
from typing import Any

from genericapi.apimachinery.cel import library_ext


class CELFunctionError(ValueError):
    """A function failed the way cel-go's would (the text is the runtime error)."""


def _no_overload(name: str) -> CELFunctionError:
    return CELFunctionError(f"no such overload: {name}")


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _comparable(xs: list[Any], name: str) -> None:
    kinds = {type(x) for x in xs}
    if kinds <= {int, float} or len(kinds) <= 1:
        if any(isinstance(x, (dict, list, bool)) for x in xs) and len(kinds) > 1:
            raise _no_overload(name)
        return
    raise _no_overload(name)


# -- lists (k8s.io/apiserver/pkg/cel/library/lists.go) --------------------------------------------------------------
def is_sorted(xs: Any) -> bool:
    if not isinstance(xs, list):
        raise _no_overload("isSorted")
    _comparable(xs, "isSorted")
    return all(a <= b for a, b in pairwise(xs))


def list_sum(xs: Any) -> Any:
    if not isinstance(xs, list):
        raise _no_overload("sum")
    if not xs:
        return 0
    if not all(_is_num(x) for x in xs) or len({type(x) for x in xs}) > 1:
        raise _no_overload("sum")
    total = sum(xs)
    if isinstance(total, int) and not -(2**63) <= total < 2**63:
        raise CELFunctionError("integer overflow")
    return total


def _min_max(xs: Any, name: str, pick: Callable[[Any], Any]) -> Any:
    if not isinstance(xs, list):
        raise _no_overload(name)
    if not xs:
        raise CELFunctionError(f"{name}(list) argument must not be empty")
    _comparable(xs, name)
    return pick(xs)


def list_min(xs: Any) -> Any:
    return _min_max(xs, "min", min)


def list_max(xs: Any) -> Any:
    return _min_max(xs, "max", max)


def _check_index(s: str, i: int) -> None:
    if i < 0 or i > len(s):
        raise CELFunctionError(f"index out of range: {i}")


def index_of(recv: Any, sub: Any, offset: Any = None) -> int:
    if isinstance(recv, list):
        if offset is not None:
            raise _no_overload("indexOf")
        for i, x in enumerate(recv):
            if x == sub and type(x) is type(sub):
                return i
        return -1
    if not isinstance(recv, str) or not isinstance(sub, str):
        raise _no_overload("indexOf")
    start = 0 if offset is None else int(offset)
    _check_index(recv, start)
    return recv.find(sub, start)


def last_index_of(recv: Any, sub: Any, offset: Any = None) -> int:
    if isinstance(recv, list):
        if offset is not None:
            raise _no_overload("lastIndexOf")
        for i in range(len(recv) - 1, -1, -1):
            if recv[i] == sub and type(recv[i]) is type(sub):
                return i
        return -1
    if not isinstance(recv, str) or not isinstance(sub, str):
        raise _no_overload("lastIndexOf")
    if offset is None:
        return recv.rfind(sub)
    end = int(offset)
    _check_index(recv, end)
    return recv.rfind(sub, 0, end + len(sub))


# -- strings (cel-go ext.Strings, version 2 as kube-apiserver configures it) ----------------------------------------
def _str(v: Any, name: str) -> str:
    if not isinstance(v, str):
        raise _no_overload(name)
    return v


def char_at(s: Any, i: Any) -> str:
    s = _str(s, "charAt")
    _check_index(s, int(i))
    return s[int(i)] if int(i) < len(s) else ""


def lower_ascii(s: Any) -> str:
    return "".join(c.lower() if c.isascii() else c for c in _str(s, "lowerAscii"))


def upper_ascii(s: Any) -> str:
    return "".join(c.upper() if c.isascii() else c for c in _str(s, "upperAscii"))


def replace(s: Any, old: Any, new: Any, n: Any = -1) -> str:
    return _str(s, "replace").replace(_str(old, "replace"), _str(new, "replace"), int(n))


def split(s: Any, sep: Any, n: Any = -1) -> list[str]:
    s, sep, limit = _str(s, "split"), _str(sep, "split"), int(n)
    if limit == 0:
        return []
    if sep == "":
        chars = list(s)
        return chars if limit < 0 or limit >= len(chars) else [*chars[: limit - 1], "".join(chars[limit - 1:])]
    return s.split(sep) if limit < 0 else s.split(sep, limit - 1)


def substring(s: Any, start: Any, end: Any = None) -> str:
    s = _str(s, "substring")
    b = int(start)
    e = len(s) if end is None else int(end)
    _check_index(s, b)
    _check_index(s, e)
    if b > e:
        raise CELFunctionError(f"invalid substring range. start: {b}, end: {e}")
    return s[b:e]


_TRIM = (" \t\n\v\f\r\x85\xa0\u1680"
         "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def trim(s: Any) -> str:
    return _str(s, "trim").strip(_TRIM)


def join(xs: Any, sep: Any = "") -> str:
    if not isinstance(xs, list) or not all(isinstance(x, str) for x in xs):
        raise _no_overload("join")
    return _str(sep, "join").join(xs)


def reverse(s: Any) -> str:
    return _str(s, "reverse")[::-1]



_VERB = re.compile(r"%(\.\d+)?([sdfeExXobc%])")


def _format_one(verb: str, precision: str | None, arg: Any) -> str:
    if verb == "s":
        return _as_string(arg)
    if verb == "d":
        if not isinstance(arg, int) or isinstance(arg, bool):
            raise CELFunctionError("error during formatting: decimal clause can only be used on integers, was given "
                                   f"{_type_name(arg)}")
        return str(arg)
    if verb in "fEe":
        if not _is_num(arg):
            raise CELFunctionError(f"error during formatting: fixed-point clause can only be used on doubles, was "
                                   f"given {_type_name(arg)}")
        digits = int(precision[1:]) if precision else 6
        return f"{float(arg):.{digits}{verb}}"
    if verb in "xX":
        text = arg.encode().hex() if isinstance(arg, str) else format(int(arg), "x")
        return text.upper() if verb == "X" else text
    if verb == "o":
        return format(int(arg), "o")
    if verb == "b":
        return format(int(arg), "b") if not isinstance(arg, bool) else ("true" if arg else "false")
    return verb


def _type_name(v: Any) -> str:
    for kind, name in ((bool, "bool"), (int, "int"), (float, "double"), (str, "string"), (list, "list"),
                       (dict, "map"), (bytes, "bytes")):
        if isinstance(v, kind):
            return name
    return "null_type" if v is None else type(v).__name__


def _as_string(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, float):
        return repr(v) if v != int(v) or abs(v) >= 1e21 else str(int(v))
    if isinstance(v, list):
        return "[" + ", ".join(_as_string(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_as_string(k)}: {_as_string(x)}" for k, x in v.items()) + "}"
    return str(v)


def format_string(s: Any, args: Any) -> str:
    fmt = _str(s, "format")
    if not isinstance(args, list):
        raise _no_overload("format")
    out: list[str] = []
    pos = 0
    used = 0
    for m in _VERB.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        if m.group(2) == "%":
            out.append("%")
            continue
        if used >= len(args):
            raise CELFunctionError(f"error during formatting: index {used} out of range")
        out.append(_format_one(m.group(2), m.group(1), args[used]))
        used += 1
    out.append(fmt[pos:])
    return "".join(out)


# -- regex (k8s.io/apiserver/pkg/cel/library/regex.go) ------------------------------------------------------------
def _compile_regex(pattern: Any) -> re.Pattern[str]:
    try:
        return re.compile(_str(pattern, "find"))
    except re.error as e:
        raise CELFunctionError(f"error parsing regexp: {e}") from None


def find(s: Any, pattern: Any) -> str:
    m = _compile_regex(pattern).search(_str(s, "find"))
    return m.group(0) if m else ""


def find_all(s: Any, pattern: Any, n: Any = -1) -> list[str]:
    limit = int(n)
    found = [m.group(0) for m in _compile_regex(pattern).finditer(_str(s, "findAll"))]
    return found if limit < 0 else found[:limit]


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "isSorted": is_sorted,
    "sum": list_sum,
    "min": list_min,
    "max": list_max,
    "indexOf": index_of,
    "lastIndexOf": last_index_of,
    "charAt": char_at,
    "lowerAscii": lower_ascii,
    "upperAscii": upper_ascii,
    "replace": replace,
    "split": split,
    "substring": substring,
    "trim": trim,
    "join": join,
    "reverse": reverse,
    "format": format_string,
    "find": find,
    "findAll": find_all,
    **library_ext.FUNCTIONS,
}
"""Every function kube-apiserver's CRD environment adds, by the name the interpreter calls."""

# Names a rule may call: standard CEL, the macros and everything above (the checker's "undeclared reference" list).
STANDARD = frozenset({
    "size", "contains", "startsWith", "endsWith", "matches", "has", "all", "exists", "exists_one", "map", "filter",
    "int", "uint", "double", "string", "bytes", "bool", "type", "dyn", "duration", "timestamp", "null_type",
    "getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek", "getHours", "getMinutes",
    "getSeconds", "getMilliseconds", "list",
})
KNOWN_FUNCTIONS = STANDARD | frozenset(FUNCTIONS)
