"""The strategy of a built-in resource: the class its catalog row names, made for the row.

Each kind's rules live in its class in ``coreapi.kinds``; this module builds one for a row
(``strategy_for``) and keeps the names other modules subclass: ``NamespaceStrategy`` (namespaces.py
extends the kind's class) and ``BuiltinStrategy`` (the base of every kind's class).
"""

from __future__ import annotations

from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.schemas import SchemaCatalog

from . import catalog
from .catalog_build import BuiltinResource
from .kinds import base
from .kinds.core import NamespaceStrategy

BuiltinStrategy = base.BuiltinStrategy

__all__ = ["BuiltinStrategy", "NamespaceStrategy", "strategy_class", "strategy_for"]


def strategy_class(info: ResourceInfo) -> type[base.BuiltinStrategy]:
    """The strategy class of ``info``: a catalog row's own, else the row serving the same
    group/version/kind (a ``ResourceInfo`` made elsewhere for a built-in kind), else the plain
    ``BuiltinStrategy`` (TokenReview and the self-subject reviews have no rules of their own)."""
    if isinstance(info, BuiltinResource):
        return info.strategy
    row = catalog.find_resource_by_kind(info.group, info.version, info.kind)
    return row.strategy if isinstance(row, BuiltinResource) else base.BuiltinStrategy


def strategy_for(info: ResourceInfo, schemas: SchemaCatalog) -> base.BuiltinStrategy:
    return strategy_class(info)(info, schemas)
