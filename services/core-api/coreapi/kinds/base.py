"""The strategy every built-in kind's class derives from: defaulting, schema validation, object-meta
rules and semantic validation in kube-apiserver's order, with the kind's own parts as hooks.

A kind's class overrides only what is special about it (see ``coreapi.kinds``); this class runs
them: defaults on create and every update (then the zero-valued status counters Go writes), schema
validation of the served version's 1.33 definition and, when that passes, the kind's semantic
validation; metadata errors first, as ``ValidateObjectMeta`` runs first in kube.
"""

from __future__ import annotations

from typing import Any, ClassVar

from genericapi.apimachinery import fields, validation
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.registry.strategy import NameValidator, Strategy

from coreapi.defaults.fields import ensure_obj


class BuiltinStrategy(Strategy):
    """A built-in kind without rules of its own; the base of those with some."""

    #: Status counters Go writes even when zero (non-``omitempty`` int32 fields of the status).
    zero_status: ClassVar[tuple[str, ...]] = ()
    #: What a field selector may name on this kind and the values its objects answer (None:
    #: ``metadata.name`` and ``metadata.namespace`` only).
    field_support: ClassVar[fields.FieldSupport | None] = None

    def __init__(self, info: ResourceInfo, schemas: SchemaCatalog | None = None,
                 name_validator: NameValidator | None = None) -> None:
        super().__init__(info, schemas, name_validator)
        if self.field_support is not None:
            # The handlers select by (group, resource): provide this kind's fields there, as the
            # CRD controller does for a custom resource's selectableFields.
            fields.register_field_support(info.group, info.plural, self.field_support)

    # -- the kind's own rules (overridden per kind) ---------------------------------------------
    def set_defaults(self, obj: dict[str, Any]) -> None:
        """The kind's defaulting functions (kube's generated ``SetObjectDefaults_<Kind>``) for the
        served version in ``self.info``; idempotent, never failing (see ``coreapi.defaults``)."""

    def validate_kind(self, obj: dict[str, Any]) -> list[FieldError]:
        """The kind's semantic validation of a new object (kube's ``Validate<Kind>``)."""
        return []

    def validate_kind_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        """The kind's semantic validation of an update; by default the new object's own errors."""
        return self.validate_kind(new)

    # -- the generic hooks, running them --------------------------------------------------------
    def apply_defaults(self, obj: dict[str, Any]) -> None:
        """The kind's defaults, then the status counters Go writes as 0 (what ``default`` runs)."""
        if not isinstance(obj, dict):
            return
        self.set_defaults(obj)
        if self.zero_status:
            status = ensure_obj(obj, "status")
            if status is not None:
                for key in self.zero_status:
                    if status.get(key) is None:
                        status[key] = 0

    def default(self, obj: dict[str, Any]) -> None:
        self.apply_defaults(obj)
        for key in self._struct_sections():
            if obj.get(key) is None:
                # A non-pointer struct in Go: encoded as {} however empty (kube answers
                # "spec": {} for a Node created without one), in Go's field order.
                obj[key] = {}
                if key == "spec" and "status" in obj:
                    obj["status"] = obj.pop("status")

    def _struct_sections(self) -> tuple[str, ...]:
        """The kind's top-level ``spec``/``status`` fields that are Go structs (not pointers: in
        every built-in kind they are), known from the schema."""
        cached = getattr(self, "_sections", None)
        if cached is None:
            cached = ()
            schemas = self.schemas
            root = schemas.root_schema(self.info.group, self.info.version, self.info.kind) if schemas else None
            if schemas is not None and root is not None:
                props = root.get("properties") or {}
                cached = tuple(key for key in ("spec", "status")
                               if key in props and "properties" in schemas.resolve(props[key]))
            self._sections = cached
        return cached

    def validate(self, obj: dict[str, Any]) -> list[FieldError]:
        errs = self._validate_schema(obj)
        if not errs:
            errs = self.validate_kind(obj)
        return self.validate_meta(obj) + errs

    def validate_schema_clean(self, obj: dict[str, Any]) -> list[FieldError]:
        """``validate`` without the schema walk, whose answer is known to be "no error" (see
        ``Strategy.validate_schema_clean``): the same errors, in the same order. A kind that
        overrides ``validate`` or ``_validate_schema`` validates as it says."""
        cls = type(self)
        if cls.validate is not BuiltinStrategy.validate or cls._validate_schema is not BuiltinStrategy._validate_schema:
            return self.validate(obj)
        errs = self.validate_kind(obj)  # in validate's order
        return self.validate_meta(obj) + errs

    def validate_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        errs = self._validate_schema(new)
        if not errs:
            errs = self.validate_kind_update(new, old)
        return self.validate_meta(new) + errs

    def validate_update_schema_clean(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        """``validate_update`` without the schema walk, whose answer is known to be "no error"."""
        cls = type(self)
        if cls.validate_update is not BuiltinStrategy.validate_update \
                or cls._validate_schema is not BuiltinStrategy._validate_schema:
            return self.validate_update(new, old)
        errs = self.validate_kind_update(new, old)  # in validate_update's order
        return self.validate_meta(new) + errs

    def _validate_schema(self, obj: dict[str, Any]) -> list[FieldError]:
        if self.schemas is None:
            return []
        info = self.info
        return validation.validate_object(obj, self.schemas, info.group, info.version, info.kind).errors
