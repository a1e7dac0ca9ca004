"""Structural defaulting of custom resources (``default`` in the schema), as apiextensions does.

Before defaulting, nulls in fields that are neither nullable nor defaulted are dropped
(``PruneNonNullableNullsWithoutDefaults``); then every specified property that is missing, or is
null while not nullable, gets a deep copy of its default, recursing into properties,
additionalProperties and array items. This runs on create/update and on every read from storage.
"""

from __future__ import annotations

import copy
from typing import Any


def _field_schema(node: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    if node is None:
        return None
    props = node.get("properties") or {}
    if key in props:
        sub = props[key]
        return sub if isinstance(sub, dict) else None
    additional = node.get("additionalProperties")
    return additional if isinstance(additional, dict) else None


def prune_non_nullable_nulls(value: Any, node: dict[str, Any] | None) -> None:
    if isinstance(value, dict):
        for key in list(value):
            sub = _field_schema(node, key)
            if value[key] is None and sub is not None and not sub.get("nullable") and "default" not in sub:
                del value[key]
            else:
                prune_non_nullable_nulls(value[key], sub)
    elif isinstance(value, list):
        items = node.get("items") if node is not None else None
        for item in value:
            prune_non_nullable_nulls(item, items if isinstance(items, dict) else None)


def apply_defaults(value: Any, node: dict[str, Any] | None) -> None:
    if node is None:
        return
    if isinstance(value, dict):
        props = node.get("properties") or {}
        for key, sub in props.items():
            if not isinstance(sub, dict) or "default" not in sub or sub["default"] is None:
                continue
            if key not in value or (value[key] is None and not sub.get("nullable")):
                value[key] = copy.deepcopy(sub["default"])
        additional = node.get("additionalProperties")
        for key, sub_value in value.items():
            if key in props:
                apply_defaults(sub_value, props[key])
            elif isinstance(additional, dict):
                apply_defaults(sub_value, additional)
    elif isinstance(value, list):
        items = node.get("items")
        if isinstance(items, dict):
            for item in value:
                apply_defaults(item, items)


def default(obj: Any, schema: dict[str, Any]) -> None:
    prune_non_nullable_nulls(obj, schema)
    apply_defaults(obj, schema)
