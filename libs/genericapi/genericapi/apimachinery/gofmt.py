"""How Go's ``fmt`` prints values, for messages that must read exactly like kube-apiserver's.

kube-apiserver's field errors and merge/conversion errors embed values printed with ``%v``,
``%#v``, ``%q`` and ``%T`` (``map[string]interface {}{"a":1}``, ``[x y]``, ``1e+06``). Clients and
tests compare those strings, and Python's ``str``/``repr`` read differently, so every service
renders through this one module. Pure functions over decoded JSON values; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import orjson


class GoRendered(str):
    """A value already written the way Go prints it (e.g. ``[]string{"x"}``): shown as is."""


def go_quote(value: str) -> str:
    """Go's ``%q`` for the printable strings that reach messages (control bytes as ``\\xNN``)."""
    out = ['"']
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_quote_byte(byte: int) -> str:
    """Go's ``%q`` of one input byte as a rune literal (``'x'``), as encoding/json's scanner quotes it."""
    if byte == ord("'"):
        return "'\\''"
    if byte == ord('"'):
        return "'\"'"
    char = chr(byte)
    if char.isprintable() and byte < 0x80:
        return f"'{char}'"
    escapes = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f", "\x00": "\\x00"}
    if char in escapes:
        return f"'{escapes[char]}'"
    return f"'\\x{byte:02x}'" if byte < 0x80 else f"'{char}'"


def json_quote(value: str) -> str:
    """A string quoted with JSON escapes: what apimachinery's ``%#v``/``%q`` field errors show in practice."""
    return orjson.dumps(value).decode()


def go_float(value: float) -> str:
    """``%v`` of a float64 (``%g`` with the shortest digits): exponent form when it is < -4 or >= 6."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(str(d) for d in digits)
    point = len(text) + exponent  # position of the decimal point within the digits
    exp10 = point - 1
    prefix = "-" if sign else ""
    if exp10 < -4 or exp10 >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{text}"
    if point >= len(text):
        return prefix + text + "0" * (point - len(text))
    return f"{prefix}{text[:point]}.{text[point:]}"


def go_v(value: Any, *, float_text: Callable[[float], str] = go_float) -> str:
    """``%v`` of a decoded JSON value (``[a b]``, ``map[k:v]`` with sorted keys).

    ``float_text`` lets a caller keep its own float wording (strategic merge patch prints
    integral floats as integers).
    """
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return float_text(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + " ".join(go_v(v, float_text=float_text) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_v(value[k], float_text=float_text)}" for k in sorted(value)) + "]"
    return str(value)


def go_sharp_v(value: Any) -> str:
    """``%#v`` of a decoded JSON value held in an ``interface{}``."""
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return json_quote(value)
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_sharp_v(v) for v in value) + "}"
    if isinstance(value, dict):
        body = ", ".join(f"{json_quote(k)}:{go_sharp_v(value[k])}" for k in sorted(value))
        return "map[string]interface {}{" + body + "}"
    return str(value)


def go_type_name(value: Any) -> str:
    """``%T`` (``reflect.TypeOf(v).String()``) of a decoded JSON value; ``<nil>`` for null."""
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return "<nil>"


def field_value(value: Any) -> Any:
    """A value for ``FieldError.value`` that prints as apimachinery's ``ErrorBody`` does."""
    if isinstance(value, float):
        return GoRendered(go_float(value))
    if isinstance(value, (dict, list)):
        return GoRendered(go_sharp_v(value))
    return value


def string_slice(values: Sequence[Any] | None, quote: Callable[[str], str] = go_quote) -> GoRendered:
    """``%#v`` of a ``[]string`` (``[]string(nil)`` for nil)."""
    if values is None:
        return GoRendered("[]string(nil)")
    return GoRendered("[]string{" + ", ".join(quote(str(v)) for v in values) + "}")


def string_map(value: Mapping[str, Any] | None) -> GoRendered:
    """``%#v`` of a ``map[string]string`` with sorted keys (``map[string]string(nil)`` for nil)."""
    if value is None:
        return GoRendered("map[string]string(nil)")
    items = ", ".join(f"{go_quote(str(k))}:{go_quote(str(value[k]))}" for k in sorted(value))
    return GoRendered("map[string]string{" + items + "}")
