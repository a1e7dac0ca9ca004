"""What serving one CRD means: a resource description, strategy and codec per served version.

Built from the CRD's accepted names (``status.acceptedNames``, as kube serves them) and its
spec. Objects are written at the storage version and read at the served one: with conversion
``None`` only ``apiVersion`` changes, so each version's codec rewrites it both ways; with
``Webhook`` the versions get a ``CRConverter`` (one per CRD) that their stores call at their edges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from genericapi.apimachinery.cel import compile_schema
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.serviceresolver import ServiceResolver
from genericapi.registry.codec import JsonCodec

from . import cr_openapi, cr_tables
from .conversion import CRConverter
from .cr_strategy import CRStrategy
from .crds import storage_version, storage_version_hash
from .schema import CRSchema


@dataclass
class ServedVersion:
    info: ResourceInfo
    strategy: CRStrategy
    codec: JsonCodec | None
    selectable_fields: list[str] = field(default_factory=list)


@dataclass
class CRDServing:
    """Everything one CRD contributes to the served set."""

    name: str
    uid: str
    #: What the served set depends on (names, versions, schemas...): rebuilt when it changes.
    fingerprint: Any
    group: str
    plural: str
    key_prefix: str
    versions: list[ServedVersion]
    definitions: dict[str, Any]
    storage_version: str = ""
    #: Webhook conversion (None: strategy None, handled by the versions' codecs).
    converter: CRConverter | None = None


def fingerprint(crd: dict[str, Any]) -> Any:
    status = crd.get("status") or {}
    return (crd.get("metadata", {}).get("uid"), crd.get("spec"), status.get("acceptedNames"))


def _rewrite(api_version: str) -> Step:
    def convert(obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("apiVersion") == api_version:
            return obj
        return {**obj, "apiVersion": api_version}
    return convert


Step = Callable[[dict[str, Any]], dict[str, Any]]


def _defaulting(schema: CRSchema | None) -> Step | None:
    """Read-side defaulting (kube defaults objects read from storage) when the schema has defaults."""
    if schema is None or b'"default"' not in orjson.dumps(schema.schema):
        return None

    def apply(obj: dict[str, Any]) -> dict[str, Any]:
        schema.default(obj)
        return obj
    return apply


def _reading(steps: list[Step | None]) -> Step:
    chain = [s for s in steps if s is not None]

    def read(obj: dict[str, Any]) -> dict[str, Any]:
        for step in chain:
            obj = step(obj)
        return obj
    return read


class _UncompiledRules:
    """Rules of a stored CRD that no longer compile (written before a stricter check): objects are
    refused with the compile error rather than written unchecked, as kube's validator does."""

    def __init__(self, errs: list[FieldError]) -> None:
        self.errs = errs

    def validate(self, new: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        return [FieldError("InternalError", e.field, f"rule compile error: {e.detail}") for e in self.errs]


def _scale_paths(sub: dict[str, Any]) -> tuple[str, str, str] | None:
    scale = sub.get("scale")
    if not isinstance(scale, dict):
        return None
    return (str(scale.get("specReplicasPath") or ""), str(scale.get("statusReplicasPath") or ""),
            str(scale.get("labelSelectorPath") or ""))


def build(crd: dict[str, Any], terminating: Callable[[], bool],
          resolver: ServiceResolver | None = None) -> CRDServing:
    spec = crd.get("spec") or {}
    converter = None
    if ((spec.get("conversion") or {}).get("strategy")) == "Webhook":
        converter = CRConverter(crd, resolver)
    several = len(spec.get("versions") or []) > 1
    storage_schema = None
    for v in spec.get("versions") or []:
        if isinstance(v, dict) and v.get("name") == storage_version(crd):
            found = (v.get("schema") or {}).get("openAPIV3Schema")
            storage_schema = CRSchema(found) if isinstance(found, dict) else None
    group = str(spec.get("group", ""))
    names = (crd.get("status") or {}).get("acceptedNames") or {}
    kind, plural = str(names.get("kind", "")), str(names.get("plural", ""))
    namespaced = spec.get("scope") == "Namespaced"
    stored = storage_version(crd)
    versions: list[ServedVersion] = []
    served_schemas: list[tuple[str, str, dict[str, Any] | None]] = []
    for index, v in enumerate(spec.get("versions") or []):
        if not isinstance(v, dict) or not v.get("served"):
            continue
        version = str(v.get("name", ""))
        subs = v.get("subresources") or {}
        sub_names = tuple(s for s in ("scale", "status") if isinstance(subs.get(s), dict))
        info = ResourceInfo(
            group, version, kind, plural, str(names.get("singular") or kind.lower()), namespaced,
            short_names=tuple(names.get("shortNames") or ()), categories=tuple(names.get("categories") or ()),
            subresources=sub_names, scale_paths=_scale_paths(subs),
            extra={"storageVersionHash": storage_version_hash(group, stored, kind)},
        )
        raw_schema = (v.get("schema") or {}).get("openAPIV3Schema")
        schema_ops = CRSchema(raw_schema) if isinstance(raw_schema, dict) else None
        rules: Any = None
        if isinstance(raw_schema, dict):
            rules, rule_errs = compile_schema(raw_schema, f"spec.versions[{index}].schema.openAPIV3Schema")
            if rule_errs:
                rules = _UncompiledRules(rule_errs)
        strategy = CRStrategy(info, schema=schema_ops, rules=rules,
                              printer=cr_tables.printer_for(v.get("additionalPrinterColumns")),
                              terminating=terminating)
        codec = None
        if converter is None or not several:
            # Read as kube reads: storage-version defaults, apiVersion rewritten (objects written at
            # an earlier storage version too), then this version's defaults.
            read = [_defaulting(storage_schema), _rewrite(f"{group}/{version}") if several else None,
                    _defaulting(schema_ops) if version != stored else None]
            if any(read):
                codec = JsonCodec(_rewrite(f"{group}/{stored}") if several else None, _reading(read))
        fields = [str(f.get("jsonPath", "")) for f in v.get("selectableFields") or [] if isinstance(f, dict)]
        versions.append(ServedVersion(info, strategy, codec, fields))
        served_schemas.append((version, kind, raw_schema if isinstance(raw_schema, dict) else None))
    return CRDServing(
        name=str(crd["metadata"]["name"]), uid=str(crd["metadata"].get("uid", "")), fingerprint=fingerprint(crd),
        group=group, plural=plural, key_prefix=f"{group}/{plural}", versions=versions,
        definitions=cr_openapi.definitions_for(crd, served_schemas), storage_version=stored,
        converter=converter if several else None,
    )
