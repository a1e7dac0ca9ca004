"""Safe reads and writes on plain-dict objects for the defaulters.

Defaulting runs before validation, so any field may hold the wrong JSON type. These helpers
only descend into values of the expected type and only fill a field when Go would see it as
unset (a nil pointer, an empty string, a zero number); a value of the wrong type is left for
validation to report.
"""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]


def obj_at(parent: Any, key: str) -> JSON | None:
    """``parent[key]`` when both are objects, else None."""
    if not isinstance(parent, dict):
        return None
    value = parent.get(key)
    return value if isinstance(value, dict) else None


def ensure_obj(parent: JSON, key: str) -> JSON | None:
    """``parent[key]``, created as ``{}`` when absent or null; None when it holds another type."""
    value = parent.get(key)
    if value is None:
        value = parent[key] = {}
    return value if isinstance(value, dict) else None


def items_at(parent: Any, key: str) -> list[JSON]:
    """The object entries of the array ``parent[key]`` (other entries and types are skipped)."""
    if not isinstance(parent, dict):
        return []
    value = parent.get(key)
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


def is_unset_str(value: Any) -> bool:
    """Go's ``x == ""`` on a string field: absent, null or empty."""
    return value is None or value == ""


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def default_str(parent: JSON, key: str, value: str) -> None:
    """A string field left empty takes ``value``."""
    if is_unset_str(parent.get(key)):
        parent[key] = value


def default_ptr(parent: JSON, key: str, value: Any) -> None:
    """A pointer field left nil (absent or null) takes ``value``."""
    if parent.get(key) is None:
        parent[key] = value


def default_int(parent: JSON, key: str, value: int) -> None:
    """A non-pointer number left zero (absent, null or 0) takes ``value``."""
    current = parent.get(key)
    if current is None or (is_int(current) and current == 0) or (isinstance(current, float) and current == 0):
        parent[key] = value


def is_empty(value: Any) -> bool:
    """Whether Go's ``len(x) == 0`` holds for a list/map/string field (absent and null count)."""
    if value is None:
        return True
    if isinstance(value, (list, dict, str)):
        return len(value) == 0
    return False
