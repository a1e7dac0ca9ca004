"""Semantic validation of built-in kinds, beyond the JSON schema: kube-apiserver's field paths
and messages for names, containers, ports, selectors, quantities and immutable fields.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.resources import ResourceInfo


def validate(info: ResourceInfo, obj: dict[str, Any]) -> list[FieldError]:
    """Errors of a new object of ``info``'s kind."""
    return []


def validate_update(info: ResourceInfo, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """Errors of an update: the new object's own errors plus forbidden changes (immutable fields)."""
    return []
