"""``x-kubernetes-list-type`` set/map uniqueness, as apiextensions' ``ValidateListSetsAndMaps``.

A ``set`` list may not hold the same element twice; a ``map`` list may not hold two elements with
the same values for its ``x-kubernetes-list-map-keys``. Each repetition after the first is
reported once as ``Duplicate value`` at its index (``spec.ports[1]: Duplicate value:
map[string]interface {}{"name":"http"}``).
"""

from __future__ import annotations

from typing import Any

import orjson
from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.gofmt import field_value

_UNSPECIFIED = object()


def _identity(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return ("compound", orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
    if isinstance(value, float) and value.is_integer():
        return ("float", value)  # Go keeps int64(1) and float64(1) apart
    return (type(value).__name__, value)


def _non_unique(values: list[Any]) -> list[int]:
    seen: dict[Any, int] = {}
    out: list[int] = []
    for i, value in enumerate(values):
        key = ("unspecified",) if value is _UNSPECIFIED else _identity(value)
        count = seen.get(key, 0)
        if count == 1:
            out.append(i)
        seen[key] = count + 1
    return out


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _map_key_path(path: str, key: str) -> str:
    return f"{path}[{key}]"


def validate_lists(value: Any, node: dict[str, Any] | None, path: str = "") -> list[FieldError]:
    if node is None:
        return []
    errs: list[FieldError] = []
    if isinstance(value, dict):
        additional = node.get("additionalProperties")
        if isinstance(additional, dict):
            for key, sub in value.items():
                errs.extend(validate_lists(sub, additional, _map_key_path(path, key)))
        props = node.get("properties")
        if isinstance(props, dict):
            for key, sub in value.items():
                if isinstance(props.get(key), dict):
                    errs.extend(validate_lists(sub, props[key], _child(path, key)))
    elif isinstance(value, list):
        list_type = node.get("x-kubernetes-list-type")
        if list_type == "set":
            errs.extend(errors.duplicate(f"{path}[{i}]", field_value(value[i])) for i in _non_unique(value))
        elif list_type == "map":
            errs.extend(_validate_map_list(value, node.get("x-kubernetes-list-map-keys") or [], path))
        items = node.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                errs.extend(validate_lists(item, items, f"{path}[{i}]"))
    return errs


def _validate_map_list(value: list[Any], keys: list[str], path: str) -> list[FieldError]:
    for i, item in enumerate(value):
        if item is not None and not isinstance(item, dict):
            return [errors.invalid(f"{path}[{i}]", field_value(item),
                                   "must be an object for an array of list-type map")]
    if len(value) <= 1:
        return []
    if len(keys) == 1:
        key = keys[0]
        single = [item[key] if isinstance(item, dict) and key in item else _UNSPECIFIED for item in value]
        return [errors.duplicate(f"{path}[{i}]", field_value({} if single[i] is _UNSPECIFIED else {key: single[i]}))
                for i in _non_unique(single)]
    composite = [{k: item[k] for k in keys if k in item} if isinstance(item, dict) else {} for item in value]
    return [errors.duplicate(f"{path}[{i}]", field_value(composite[i])) for i in _non_unique(composite)]
