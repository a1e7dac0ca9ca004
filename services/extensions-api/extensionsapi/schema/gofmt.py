"""Values rendered the way Go's ``fmt`` prints them in apiextensions' error messages.

kube-openapi builds messages with ``%v`` (``should be less than or equal to 10``, ``1e+06`` for a
float) and apimachinery's field errors print non-scalar values with ``%#v``
(``map[string]interface {}{"name":"a"}``). Clients compare these strings, so Python's own
``str``/``repr`` (``1000000.0``, ``{'name': 'a'}``) will not do.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

from genericapi.apimachinery.errors import GoRendered


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


def go_quote(text: str) -> str:
    """``%q`` / ``strconv.Quote`` for the strings that occur in practice."""
    return json.dumps(text, ensure_ascii=False)


def go_v(value: Any) -> str:
    """``%v`` of a decoded JSON value (``[a b]``, ``map[k:v]``)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + " ".join(go_v(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_v(value[k])}" for k in sorted(value)) + "]"
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
        return go_quote(value)
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_sharp_v(v) for v in value) + "}"
    if isinstance(value, dict):
        body = ", ".join(f"{go_quote(k)}:{go_sharp_v(value[k])}" for k in sorted(value))
        return "map[string]interface {}{" + body + "}"
    return str(value)


def field_value(value: Any) -> Any:
    """A value for ``FieldError.value`` that prints as apimachinery's ``ErrorBody`` does."""
    if isinstance(value, float):
        return GoRendered(go_float(value))
    if isinstance(value, (dict, list)):
        return GoRendered(go_sharp_v(value))
    return value


def go_string_slice(values: list[str] | None) -> GoRendered:
    """``%#v`` of a ``[]string``."""
    if values is None:
        return GoRendered("[]string(nil)")
    return GoRendered("[]string{" + ", ".join(go_quote(v) for v in values) + "}")
