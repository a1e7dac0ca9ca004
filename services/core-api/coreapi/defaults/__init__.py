"""Defaulting of built-in kinds, as kube-apiserver's generated defaulters do it.

Each kind's strategy class (``coreapi.kinds``) calls its defaulter from here in ``set_defaults``
and names the status counters Go writes as 0 (``zero_status``). Defaults apply to the served
version's shape on create and on every update, so each defaulter is idempotent and only fills
what Go would see as unset. They never fail: a field of the wrong type is skipped and left for
validation to report.

The modules follow kube's packages: :mod:`.pods` and :mod:`.volumes` (core/v1 PodSpec),
:mod:`.workloads` (apps/v1, batch/v1, ReplicationController, PodTemplate), :mod:`.services`,
:mod:`.core` (the other core/v1 kinds) and :mod:`.groups` (the remaining API groups).
``apply`` and ``defaulter_for`` reach a kind's defaults from a ``ResourceInfo`` alone (through
its catalog row's class), for callers without a strategy at hand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from genericapi.apimachinery.resources import ResourceInfo

Defaulter = Callable[[dict[str, Any]], None]


def defaulter_for(info: ResourceInfo) -> Defaulter | None:
    """The defaulter of a served resource's kind, or None when kube defines none."""
    from coreapi.kinds.base import BuiltinStrategy
    from coreapi.strategies import strategy_class  # the catalog's rows name the kinds' classes

    cls = strategy_class(info)
    if cls.set_defaults is BuiltinStrategy.set_defaults:
        return None
    return cls(info).set_defaults


def apply(info: ResourceInfo, obj: dict[str, Any]) -> None:
    """Fill the defaults of ``info``'s kind into ``obj`` (in place)."""
    from coreapi.strategies import strategy_class

    strategy_class(info)(info).apply_defaults(obj)
