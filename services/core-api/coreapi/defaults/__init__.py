"""Defaulting of built-in kinds, as kube-apiserver's generated defaulters do it.

``apply(info, obj)`` fills the defaults of the object's kind in place; kinds without defaults are
left alone.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.resources import ResourceInfo


def apply(info: ResourceInfo, obj: dict[str, Any]) -> None:
    """Fill the defaults of ``info``'s kind into ``obj`` (in place)."""
