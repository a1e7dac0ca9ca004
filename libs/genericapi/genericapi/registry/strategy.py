"""Per-kind rules on top of the generic store: defaulting, validation, what counts as status.

A strategy is small on purpose: the generic store owns storage, metadata and conflicts; the
strategy only says what is special about its kind. A service subclasses ``Strategy`` once per
kind it serves (core-api: ``coreapi.kinds``, one class per built-in kind named by its catalog row)
and overrides the hooks and class attributes below; nothing here is looked up by kind.
"""

from __future__ import annotations

import copy
from typing import Any

from genericapi.apimachinery import validation
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.apimachinery.tables_common import Printer

from .options import DeleteOptions

NameValidator = validation.NameValidator


class Strategy:
    """Behaviour of one kind. The defaults suit most built-in kinds."""

    #: Whether spec changes bump ``metadata.generation``.
    tracks_generation: bool = False
    #: Kinds whose objects return themselves from DELETE (others answer a success Status).
    returns_deleted_object: bool = False
    #: Table printer of this kind (None: the default Name / Created At table).
    table_printer: Printer | None = None
    #: kube's AllowUnconditionalUpdate: a PUT naming no resourceVersion (or "0") replaces whatever is
    #: stored. Kinds whose PUT must name the version it replaces say False (custom resources, CRDs).
    allow_unconditional_update: bool = True

    def __init__(self, info: ResourceInfo, schemas: SchemaCatalog | None = None,
                 name_validator: NameValidator | None = None) -> None:
        self.info = info
        self.schemas = schemas
        self.name_validator: NameValidator = name_validator or self.default_name_validator()
        self.has_status = "status" in info.subresources

    def default_name_validator(self) -> NameValidator:
        """The rule this kind's names follow (the ``nameFn`` kube passes to ``ValidateObjectMeta``):
        a DNS-1123 subdomain unless the kind's strategy says otherwise."""
        return validation.name_is_dns_subdomain

    # -- hooks: create ------------------------------------------------------------------
    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        """Clear what a client may not set on create (status, when it is a subresource)."""
        if self.has_status:
            obj["status"] = {}

    def default(self, obj: dict[str, Any]) -> None:
        """Fill defaults, as the kind's defaulting functions do (next issue)."""

    def validate(self, obj: dict[str, Any]) -> list[FieldError]:
        return self.validate_meta(obj)

    def validate_schema_clean(self, obj: dict[str, Any]) -> list[FieldError]:
        """``validate(obj)`` for a create whose object is known to pass the schema walk: the
        request body's walk (``fieldvalidation.check_fields``) found nothing, and nothing but
        server-set metadata changed since (``Store.create`` checks). A strategy whose ``validate``
        walks the schema skips that walk here; others validate as ever."""
        return self.validate(obj)

    def validate_meta(self, obj: dict[str, Any]) -> list[FieldError]:
        meta = obj.get("metadata") or {}
        return validation.validate_object_meta(meta, self.info.namespaced, self.name_validator)

    # -- hooks: update ------------------------------------------------------------------
    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        """On the main resource, status changes are ignored when status is a subresource."""
        if self.has_status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)

    def prepare_for_status_update(self, new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
        """On ``/status``, only status changes; the rest is kept from the stored object."""
        out = copy.deepcopy(old)
        if "status" in new:
            out["status"] = new["status"]
        else:
            out.pop("status", None)
        meta = out["metadata"]
        meta["resourceVersion"] = (new.get("metadata") or {}).get("resourceVersion", meta.get("resourceVersion"))
        return out

    def validate_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return self.validate(new)

    def validate_update_schema_clean(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        """``validate_update`` for an object known to pass the schema walk (as
        ``validate_schema_clean``, for an update or patch)."""
        return self.validate_update(new, old)

    def prune_unknown_fields(self, obj: dict[str, Any]) -> list[str] | None:
        """For kinds that know their own schema (custom resources): drop fields it does not
        declare and return their paths. None means "use the built-in schema catalog"."""
        return None

    def ownership_schema(self) -> Any:
        """The JSON schema whose merge semantics type this kind's fields for managedFields and
        server-side apply (None: all deduced but metadata). Built-ins: their 1.33 definition."""
        if self.schemas is None:
            return None
        info = self.info
        return self.schemas.root_schema(info.group, info.version, info.kind)

    # -- hooks: delete ------------------------------------------------------------------
    def check_graceful_delete(self, obj: dict[str, Any], opts: DeleteOptions) -> int | None:
        """kube's ``RESTGracefulDeleteStrategy.CheckGracefulDelete``: the grace period (seconds)
        before ``obj`` goes, or None when the kind is deleted at once (most kinds). A period of 0
        still marks the object (deletionTimestamp) before it is removed, as kube does."""
        return None

    def spec_changed(self, new: dict[str, Any], old: dict[str, Any]) -> bool:
        """Whether anything but metadata and status changed (what bumps generation)."""
        keys = (set(new) | set(old)) - {"metadata", "status", "apiVersion", "kind"}
        return any(new.get(k) != old.get(k) for k in keys)
