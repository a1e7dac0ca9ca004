"""The strategy of a custom resource at one served version, built from its CRD at run time.

What kube's customresource strategy and CR decoder do, in the order they do it: unknown fields
are pruned (and reported under fieldValidation Warn/Strict), defaults applied, then metadata,
the structural schema, ``x-kubernetes-validations`` (CEL, with transition rules on update) and
the scale subresource's replica paths validated. With the status subresource, the main resource
ignores status changes, ``/status`` ignores everything else, and generation moves on spec
changes only; without it every non-metadata change bumps generation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.gofmt import go_type_name
from genericapi.apimachinery.nested import get_path
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.tables_common import Printer
from genericapi.registry.strategy import Strategy

_MAX_INT32 = 2**31 - 1


class SchemaOps(Protocol):
    """What the structural-schema module offers (``extensionsapi.schema.CRSchema``)."""

    def default(self, obj: dict[str, Any]) -> Any: ...
    def prune(self, obj: dict[str, Any]) -> Any: ...
    def validate(self, obj: dict[str, Any]) -> Any: ...
    def validate_update(self, new: dict[str, Any], old: dict[str, Any]) -> Any: ...


class RuleOps(Protocol):
    """What the CEL module offers (``genericapi.apimachinery.cel.CELValidator``)."""

    def validate(self, new: dict[str, Any], old: dict[str, Any] | None) -> Any: ...


class CRStrategy(Strategy):
    tracks_generation = True
    #: kube's customResourceStrategy.AllowUnconditionalUpdate: a PUT must name the version it replaces.
    allow_unconditional_update = False

    def __init__(self, info: ResourceInfo, *, schema: SchemaOps | None, rules: RuleOps | None,
                 printer: Printer, terminating: Callable[[], bool]) -> None:
        super().__init__(info, None)
        self.schema = schema
        self.rules = rules
        self.table_printer = printer
        self._terminating = terminating

    def ownership_schema(self) -> Any:
        """The structural schema gives a custom resource's merge semantics (managedFields)."""
        return getattr(self.schema, "schema", None)

    # -- decoding: pruning and defaults ---------------------------------------------------
    def prune_unknown_fields(self, obj: dict[str, Any]) -> list[str] | None:
        if self.schema is None:
            return []
        pruned = self.schema.prune(obj)
        return [str(p) for p in pruned or []]

    def default(self, obj: dict[str, Any]) -> None:
        if self.schema is not None:
            self.schema.default(obj)

    # -- create -----------------------------------------------------------------------------
    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        if self._terminating():
            raise apierrors.method_not_supported(self.info.group, self.info.plural, "create")
        if self.has_status:
            obj.pop("status", None)

    def validate(self, obj: dict[str, Any]) -> list[FieldError]:
        errs = self.validate_meta(obj)
        if self.schema is not None:
            errs.extend(self.schema.validate(obj) or [])
        if self.rules is not None:
            errs.extend(self.rules.validate(obj, None) or [])
        errs.extend(self._scale_errors(obj))
        return errs

    # -- update -----------------------------------------------------------------------------
    def validate_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        errs = self.validate_meta(new)
        if self.schema is not None:
            errs.extend(self.schema.validate_update(new, old) or [])
        if self.rules is not None:
            errs.extend(self.rules.validate(new, old) or [])
        errs.extend(self._scale_errors(new))
        return errs

    def spec_changed(self, new: dict[str, Any], old: dict[str, Any]) -> bool:
        ignored = {"metadata", "status"} if self.has_status else {"metadata"}
        keys = (set(new) | set(old)) - ignored
        return any(new.get(k) != old.get(k) for k in keys)

    # -- scale --------------------------------------------------------------------------------
    def _scale_errors(self, obj: dict[str, Any]) -> list[FieldError]:
        paths = self.info.scale_paths
        if paths is None:
            return []
        errs: list[FieldError] = []
        for path in paths[:2]:
            if not path:
                continue
            value = get_path(obj, path)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                # As unstructured.NestedInt64 reports it (the value it returns alongside is 0).
                errs.append(apierrors.invalid(path, 0, f"{path} accessor error: {_go_value(value)} is of the type "
                                                       f"{go_type_name(value)}, expected int64"))
            elif value < 0:
                errs.append(apierrors.invalid(path, value, "should be a non-negative integer"))
            elif value > _MAX_INT32:
                errs.append(apierrors.invalid(path, value, f"should be less than or equal to {_MAX_INT32}"))
        return errs


def _go_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)
