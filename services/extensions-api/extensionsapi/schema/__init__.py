"""Applying one CRD version's structural schema to custom resources: prune, default, validate.

The serving side of extensions-api builds one :class:`CRSchema` per served version (from a schema
that :mod:`extensionsapi.crdvalidation` already accepted) and calls, in kube-apiserver's order:
``prune`` then ``default`` when decoding a request body (and ``default`` again on every read from
storage), then ``validate`` on create or ``validate_update`` on update. CEL rules
(``x-kubernetes-validations``) are evaluated separately by :mod:`genericapi.apimachinery.cel`.
"""

from __future__ import annotations

import copy
from typing import Any

from genericapi.apimachinery.errors import FieldError

from .defaulting import default as _default
from .embedded import validate_embedded
from .listtypes import validate_lists
from .prune import prune as _prune
from .values import to_field_errors, validate_value

__all__ = ["CRSchema"]


class CRSchema:
    """One version's openAPIV3Schema (already accepted as structural), ready to apply to custom resources."""

    def __init__(self, schema: dict[str, Any], *, preserve_unknown_at_root: bool = False) -> None:
        self.schema = copy.deepcopy(schema)
        self.preserve_unknown_at_root = preserve_unknown_at_root

    def default(self, obj: dict[str, Any]) -> None:
        """Drop non-nullable nulls without defaults, then apply defaults (nested, in arrays), in place."""
        _default(obj, self.schema)

    def prune(self, obj: dict[str, Any]) -> list[str]:
        """Remove unknown fields in place; returns their paths (``spec.foo``) for fieldValidation."""
        return _prune(obj, self.schema, preserve_unknown_at_root=self.preserve_unknown_at_root)

    def validate_schema_only(self, obj: Any, prefix: str | None = None) -> list[FieldError]:
        """Only the kube-openapi checks (types, formats, limits, enum, required, junctors)."""
        return to_field_errors(validate_value(self.schema, obj), prefix)

    def validate(self, obj: dict[str, Any]) -> list[FieldError]:
        """Create-time validation: schema, embedded resources, then list-type set/map uniqueness."""
        errs = self.validate_schema_only(obj)
        errs.extend(validate_embedded(obj, self.schema))
        errs.extend(validate_lists(obj, self.schema))
        return errs

    def validate_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        """Update-time validation; list uniqueness is only enforced if the old object satisfied it."""
        errs = self.validate_schema_only(new)
        errs.extend(validate_embedded(new, self.schema))
        if not validate_lists(old, self.schema):
            errs.extend(validate_lists(new, self.schema))
        return errs
