"""Semantic validation of built-in kinds, beyond the JSON schema: kube-apiserver's field paths
and messages for names, containers, ports, selectors, quantities and immutable fields.

Each kind's strategy class (``coreapi.kinds``) calls its checks from here (``validate_kind``,
``validate_kind_update``); kinds without rules get none (their metadata and schema are still
checked by the strategy). ``validate`` / ``validate_update`` reach a kind's rules from a
``ResourceInfo`` alone (through its catalog row's class), for callers without a strategy at hand.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.resources import ResourceInfo


def validate(info: ResourceInfo, obj: dict[str, Any]) -> list[FieldError]:
    """Errors of a new object of ``info``'s kind."""
    from coreapi.strategies import strategy_class  # the catalog's rows name the kinds' classes

    return strategy_class(info)(info).validate_kind(obj)


def validate_update(info: ResourceInfo, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """Errors of an update: the new object's own errors plus forbidden changes (immutable fields)."""
    from coreapi.strategies import strategy_class

    return strategy_class(info)(info).validate_kind_update(new, old)
