"""How Go's encoding/json writes and reads the structs the version conversions go through.

kube-apiserver converts typed Go structs, so what a converted object looks like on the wire
is decided by ``json.Marshal``: ``omitempty`` scalars vanish when zero, non-pointer structs
(``metav1.Time``, ``resource.Quantity``, nested specs) are always written, nil pointers
with ``omitempty`` vanish and nil slices without it are written as ``null``. The
conversions here work on plain dicts, and these helpers reproduce those rules so a view
reads like kube-apiserver's.

Reading the HPA round-trip annotations goes through ``json.Unmarshal`` in kube: keys match
case-insensitively, unknown keys are ignored, ``null`` leaves a field unset, and a value of
the wrong type fails the whole annotation. :func:`decode_shape` does the same against a
small shape description.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson

JSONDict = dict[str, Any]


def as_dict(value: Any) -> JSONDict:
    """The value if it is an object, else an empty object (a bad shape reads as absent)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """The value if it is an array, else an empty array."""
    return value if isinstance(value, list) else []


def object_items(value: Any) -> list[JSONDict]:
    """The object entries of an array (a non-array, and entries of another type, read as absent)."""
    return [item for item in as_list(value) if isinstance(item, dict)]


def is_go_empty(value: Any) -> bool:
    """Whether ``omitempty`` drops the value: null, "", 0, false, [] or {}."""
    if value is None:
        return True
    if isinstance(value, bool):
        return not value
    if isinstance(value, (str, list, dict)):
        return len(value) == 0
    if isinstance(value, (int, float)):
        return value == 0
    return False


def put_omitempty(out: JSONDict, key: str, value: Any) -> None:
    """Set ``out[key]`` to a copy of the value unless ``omitempty`` would drop it."""
    if not is_go_empty(value):
        out[key] = copy.deepcopy(value)


def put_pointer(out: JSONDict, key: str, value: Any) -> None:
    """Set ``out[key]`` unless the value is null (an ``omitempty`` pointer field)."""
    if value is not None:
        out[key] = copy.deepcopy(value)


def or_zero(value: Any, zero: Any) -> Any:
    """A non-omitempty field: the value, or the Go zero value when it is null/absent."""
    return zero if value is None else copy.deepcopy(value)


def go_json_dumps(value: Any) -> str:
    """Compact JSON as ``json.Marshal`` writes it, including its HTML-safe escapes."""
    text = orjson.dumps(value).decode()
    # Those characters can only occur inside JSON strings, so replacing them is safe.
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


class MalformedJSON(ValueError):
    """The annotation text does not decode into the Go type it carries."""


# Leaf kinds of a shape; a struct is a dict of json name -> shape, a list is ``[shape]``.
STRING = "string"
INT32 = "int32"
INT64 = "int64"
QUANTITY = "quantity"
OBJECT = "object"  # kept as is (LabelSelector, Time given as a string is a STRING)

_INT_BOUNDS = {INT32: (-(2**31), 2**31 - 1), INT64: (-(2**63), 2**63 - 1)}

Shape = str | dict[str, Any] | list[Any]


def decode_shape(value: Any, shape: Shape) -> Any:
    """Check and canonicalise decoded JSON the way ``json.Unmarshal`` into a Go type would.

    Returns the value with struct keys renamed to their declared spelling, unknown keys and
    nulls dropped; raises :class:`MalformedJSON` where Go would return an error.
    """
    if value is None:
        return None
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            raise MalformedJSON(f"expected an object, got {type(value).__name__}")
        out: JSONDict = {}
        folded = {name.casefold(): name for name in shape}
        for key, item in value.items():
            name = key if key in shape else folded.get(key.casefold())
            if name is None or item is None:
                continue
            if name in out and key != name:
                continue  # an exact-case key already filled it
            out[name] = decode_shape(item, shape[name])
        return out
    if isinstance(shape, list):
        if not isinstance(value, list):
            raise MalformedJSON(f"expected an array, got {type(value).__name__}")
        # A null element of a struct slice decodes to the zero struct.
        zero: Any = {} if isinstance(shape[0], dict) else None
        return [zero if item is None else decode_shape(item, shape[0]) for item in value]
    return _decode_leaf(value, shape)


def _decode_leaf(value: Any, kind: str) -> Any:
    if kind == STRING:
        if not isinstance(value, str):
            raise MalformedJSON("expected a string")
        return value
    if kind in _INT_BOUNDS:
        low, high = _INT_BOUNDS[kind]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise MalformedJSON(f"expected an {kind}")
        return value
    if kind == QUANTITY:
        # resource.Quantity unmarshals from a string or a bare number.
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise MalformedJSON("expected a quantity")
        return value if isinstance(value, str) else str(value)
    if kind == OBJECT:
        if not isinstance(value, dict):
            raise MalformedJSON("expected an object")
        return value
    raise AssertionError(f"unknown shape kind {kind!r}")


def decode_json_text(text: Any, shape: Shape) -> Any:
    """Parse annotation text and :func:`decode_shape` it; :class:`MalformedJSON` on any failure."""
    if not isinstance(text, str):
        raise MalformedJSON("annotation value is not a string")
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise MalformedJSON(str(exc)) from exc
    return decode_shape(parsed, shape)
