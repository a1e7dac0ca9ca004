"""Reading and writing a field of a plain-dict object by a dotted JSON path (``.spec.replicas``).

The scale subresource names its fields this way (``specReplicasPath`` and friends); the handler
that serves Scale and the CRD strategy that validates those fields both walk the same paths
(apimachinery's ``unstructured.NestedFieldNoCopy`` / ``SetNestedField``).
"""

from __future__ import annotations

from typing import Any


def get_path(obj: dict[str, Any], path: str) -> Any:
    """The value at ``path`` (leading dot optional), or None where any step is missing or not an object."""
    cur: Any = obj
    for part in path.strip(".").split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set the value at ``path``, creating the objects on the way."""
    parts = path.strip(".").split(".")
    cur = obj
    for part in parts[:-1]:
        cur = cur.setdefault(part, {})
    cur[parts[-1]] = value
