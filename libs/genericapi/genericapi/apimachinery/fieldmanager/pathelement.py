"""One step of a field path, kept in its ``fieldsV1`` spelling (``f:``, ``k:``, ``v:``, ``i:``).

Keeping the serialised form as the element itself makes elements hashable and cheap to
write back; ordering and display parse it only when asked (serialisation order and conflict
messages), as kube's ``PathElement.Compare`` and ``String`` define them.
"""

from __future__ import annotations

import functools
from typing import Any

import orjson

_JSON_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                 ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def go_json(value: Any, *, sort_keys: bool = True) -> str:
    """Compact JSON as Go's encoder writes it (HTML characters escaped)."""
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0).decode()
    if "<" in text or ">" in text or "&" in text or "\u2028" in text or "\u2029" in text:
        for raw, escaped in _JSON_ESCAPES:
            text = text.replace(raw, escaped)
    return text


def field(name: str) -> str:
    return "f:" + name


def key(fields: dict[str, Any]) -> str:
    """``k:{...}`` for an associative list item: key fields sorted by name."""
    try:
        return _cached_key(tuple(fields.items()))
    except TypeError:  # an unhashable key value
        return "k:" + go_json(fields)


@functools.lru_cache(maxsize=16384)
def _cached_key(items: tuple[tuple[str, Any], ...]) -> str:
    return "k:" + go_json(dict(items))


def value(v: Any) -> str:
    try:
        return _cached_value(v, type(v).__name__)
    except TypeError:
        return "v:" + go_json(v)


@functools.lru_cache(maxsize=16384)
def _cached_value(v: Any, _type: str) -> str:
    return "v:" + go_json(v)


def index(i: int) -> str:
    return f"i:{i}"


class PathElementError(ValueError):
    """A ``fieldsV1`` key that is not a path element."""


@functools.lru_cache(maxsize=4096)
def normalize(pe: str) -> str:
    """The canonical spelling of a decoded element (client-sent JSON may differ in spacing)."""
    if len(pe) < 2 or pe[1] != ":":
        raise PathElementError(f"key must be 2 characters long: {pe}" if len(pe) < 2 else f"missing colon: {pe}")
    kind = pe[0]
    if kind == "f":
        return pe
    if kind == "i":
        try:
            return index(int(pe[2:]))
        except ValueError:
            raise PathElementError(f'strconv.Atoi: parsing "{pe[2:]}": invalid syntax') from None
    if kind in ("k", "v"):
        try:
            parsed = orjson.loads(pe[2:])
        except orjson.JSONDecodeError as err:
            raise PathElementError(f"{pe}: {err}") from None
        if kind == "k":
            if not isinstance(parsed, dict):
                raise PathElementError(f"{pe}: a key element must be a JSON object")
            return key(parsed)
        return value(parsed)
    raise PathElementError("unknown path element type")


def parse(pe: str) -> tuple[str, Any]:
    """(kind, payload): payload is the name, the key dict, the value or the index."""
    kind = pe[0]
    if kind == "f":
        return kind, pe[2:]
    if kind == "i":
        return kind, int(pe[2:])
    return kind, orjson.loads(pe[2:])


_KIND_ORDER = {"f": 0, "k": 1, "v": 2, "i": 3}


def _value_key(v: Any) -> tuple[Any, ...]:
    """``value.Compare``'s total order: numbers, strings, booleans, lists, maps, null."""
    if isinstance(v, bool):
        return (2, v)
    if isinstance(v, (int, float)):
        return (0, v)
    if isinstance(v, str):
        return (1, v.encode())
    if isinstance(v, list):
        return (3, tuple(_value_key(x) for x in v))
    if isinstance(v, dict):
        return (4, tuple((k.encode(), _value_key(v[k])) for k in sorted(v)))
    return (5,)


@functools.lru_cache(maxsize=8192)
def sort_key(pe: str) -> tuple[Any, ...]:
    """Order of ``PathElement.Compare``: fields, then keys, values, indexes."""
    kind, payload = parse(pe)
    if kind == "f":
        return (0, payload.encode())
    if kind == "k":
        return (1, tuple((name.encode(), _value_key(payload[name])) for name in sorted(payload)))
    if kind == "v":
        return (2, _value_key(payload))
    return (3, payload)


def _go_string(v: Any) -> str:
    """``value.ToString``: strings Go-quoted, others as Go prints them."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return orjson.dumps(v).decode()
    if isinstance(v, list):
        return "[" + ",".join(_go_string(x) for x in v) + "]"
    if isinstance(v, dict):
        return "".join(f"{k}={_go_string(x)}" for k, x in v.items())
    return str(v)


def display(pe: str) -> str:
    """``PathElement.String``: ``.name``, ``[name="a",port=80]``, ``[="x"]``, ``[0]``."""
    kind, payload = parse(pe)
    if kind == "f":
        return "." + payload
    if kind == "k":
        return "[" + ",".join(f"{name}={_go_string(payload[name])}" for name in sorted(payload)) + "]"
    if kind == "v":
        return f"[={_go_string(payload)}]"
    return f"[{payload}]"


def display_path(path: tuple[str, ...]) -> str:
    return "".join(display(pe) for pe in path)
