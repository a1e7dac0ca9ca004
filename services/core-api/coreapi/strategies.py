"""The strategy of a built-in resource: the class its catalog row names, made for the row.

Each kind's rules live in its class in ``coreapi.kinds``; this module builds one for a row
(``strategy_for``) and keeps the names other modules subclass: ``NamespaceStrategy`` (namespaces.py
extends the kind's class) and ``BuiltinStrategy`` (csr.py's CSRStrategy derives from it: see there).
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.registry.strategy import NameValidator

from . import catalog
from .catalog_build import BuiltinResource
from .kinds import base
from .kinds.core import NamespaceStrategy

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


class BuiltinStrategy(base.BuiltinStrategy):
    """The base of a strategy written outside ``coreapi.kinds`` over the generic one (csr.py's
    CSRStrategy): the kind's own rules (defaults, validation, name rule, generation, printer, field
    selectors) are those of its catalog row's class. Deriving from that class directly
    (``kinds.groups.CertificateSigningRequestStrategy``) gives the same without this indirection."""

    def __init__(self, info: ResourceInfo, schemas: SchemaCatalog | None = None,
                 name_validator: NameValidator | None = None) -> None:
        self._kind = strategy_class(info)(info, schemas)
        super().__init__(info, schemas, name_validator)
        self.tracks_generation = self._kind.tracks_generation
        self.returns_deleted_object = self._kind.returns_deleted_object
        self.table_printer = self._kind.table_printer

    def default_name_validator(self) -> NameValidator:
        return self._kind.name_validator

    def apply_defaults(self, obj: dict[str, Any]) -> None:
        self._kind.apply_defaults(obj)

    def set_defaults(self, obj: dict[str, Any]) -> None:
        self._kind.set_defaults(obj)

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        return self._kind.validate_kind(obj)

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return self._kind.validate_kind_update(new, old)
