"""Checking a built-in object against its schema the way kube-apiserver's decoder does.

For built-in kinds the real server decodes JSON into Go structs: a value of the wrong JSON type
fails the whole request with a 400 (``Deployment in version "v1" cannot be handled as a
Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of
type int32``; only the first such error is reported), and fields the struct does not know are
dropped or, with ``fieldValidation=Warn|Strict``, reported as ``unknown field "spec.foo"``. This
module reproduces that from the JSON schemas in one walk, and also reports schema-required
fields and enum violations as field errors. Name/metadata validators live in
:mod:`validation_meta` and are re-exported here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from genericapi.apimachinery import errors, gowire
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.quantity import parse_quantity
from genericapi.apimachinery.schemas import SchemaCatalog, node_types
from genericapi.apimachinery.validation_meta import (
    NameValidator,
    name_is_dns1035_label,
    name_is_dns_label,
    name_is_dns_subdomain,
    name_is_path_segment,
    validate_annotations,
    validate_dns1035_label,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_label_key,
    validate_label_value,
    validate_labels,
    validate_object_meta,
    validate_qualified_name,
)

__all__ = [
    "NameValidator",
    "ValidationResult",
    "decode_error_message",
    "name_is_dns1035_label",
    "name_is_dns_label",
    "name_is_dns_subdomain",
    "name_is_path_segment",
    "strict_decoding_error",
    "strict_field_messages",
    "validate_annotations",
    "validate_dns1035_label",
    "validate_dns1123_label",
    "validate_dns1123_subdomain",
    "validate_label_key",
    "validate_label_value",
    "validate_labels",
    "validate_object",
    "validate_object_meta",
    "validate_qualified_name",
]

_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
_MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
#: ``ValidationResult.canonical``'s value for a field to remove.
DROP = object()
#: Definitions whose Go types unmarshal themselves from any JSON.
_FREE_FORM = {
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
}
_QUANTITY_FORMAT_ERROR = ("quantities must match the regular expression "
                          "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


@dataclass
class ValidationResult:
    """What checking an object against its kind's schema found."""

    errors: list[FieldError] = field(default_factory=list)
    unknown_fields: list[str] = field(default_factory=list)
    #: First decode failure, Go-worded (without the "<Kind> in version ..." prefix), or None.
    decode_error: str | None = None
    #: Values Go's decode/encode round trip would write differently (``gowire``): (holder, key,
    #: canonical value), or ``DROP`` as the value for a field Go's ``omitempty`` leaves out.
    canonical: list[tuple[Any, Any, Any]] = field(default_factory=list)

    def apply_canonical(self) -> None:
        """Rewrite the checked object in place to what kube-apiserver would store and answer."""
        for holder, key, value in self.canonical:
            if value is DROP:
                holder.pop(key, None)
            else:
                holder[key] = value


def decode_error_message(kind: str, version: str, detail: str) -> str:
    """What kube-apiserver's 400 says when a body does not decode into a built-in kind."""
    return f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}'


def _json_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "string"


class _Walker:
    def __init__(self, catalog: SchemaCatalog) -> None:
        self.catalog = catalog
        self.result = ValidationResult()
        self.fatal = False  # a custom unmarshaller failed: Go stops decoding there
        self._plans = _plans_of(catalog)

    def plan(self, node: dict[str, Any]) -> _Plan:
        """What walking a value under ``node`` does, worked out once per schema node (memoized:
        every field of every validated object resolves its node's ``$ref`` and types)."""
        cached = self._plans.get(id(node))
        if cached is not None and cached[0] is node:
            return cached[1]
        plan = _make_plan(self.catalog, node)
        self._plans[id(node)] = (node, plan)
        return plan

    # Go type naming -------------------------------------------------------------------------

    def go_type(self, node: dict[str, Any]) -> str:
        name, resolved = self.catalog.resolve_named(node)
        if name is not None and "properties" in resolved:
            package, _, short = name.rpartition(".")
            return f"{package.rpartition('.')[2]}.{short}"
        types = node_types(resolved)
        if "array" in types:
            items = self.catalog.items_schema(resolved)
            return "[]" + (self.go_type(items) if items else "interface {}")
        if "object" in types:
            extra = self.catalog.additional_properties_schema(resolved)
            return "map[string]" + (self.go_type(extra) if extra else "interface {}")
        if "integer" in types:
            return str(resolved.get("format") or "int64")
        if "number" in types:
            return "float64"
        if "boolean" in types:
            return "bool"
        if resolved.get("format") == "byte":
            return "[]uint8"
        return "string"

    def type_error(self, value_desc: str, struct: str | None, go_path: list[str],
                   node: dict[str, Any]) -> None:
        if self.result.decode_error is not None:
            return
        where = f"Go struct field {struct}.{'.'.join(go_path)}" if struct else "Go value"
        go_type = self.go_type(node)
        self.result.decode_error = f"json: cannot unmarshal {value_desc} into {where} of type {go_type}"

    def custom_error(self, message: str) -> None:
        if not self.fatal:
            self.result.decode_error = message
            self.fatal = True

    # walking ----------------------------------------------------------------------------------

    def walk(self, value: Any, node: dict[str, Any], path: str, struct: str | None,
             go_path: list[str], holder: Any = None, slot: Any = None) -> None:
        if self.fatal or value is None:
            return
        name, resolved, tag, types = self.plan(node)
        if tag == _SKIP:
            return
        if tag == _TAG_QUANTITY:
            self.check_quantity(value)
            return
        if tag == _TAG_INT_OR_STRING:
            self.check_int_or_string(value)
            return
        if tag == _TAG_TIME:
            self.check_time(value, name == _MICRO_TIME, holder, slot)
            return
        if tag == _TAG_OBJECT:
            if not isinstance(value, dict):
                self.type_error(_json_kind(value), struct, go_path, node)
                return
            self.walk_object(value, resolved, path, name, struct, go_path)
            if name == _OBJECT_META:
                for key in gowire.OBJECT_META_OMITEMPTY:
                    child = value.get(key, 0)
                    if child is None or (isinstance(child, (dict, list)) and not child):
                        self.result.canonical.append((value, key, DROP))
        elif tag == _TAG_ARRAY:
            if not isinstance(value, list):
                self.type_error(_json_kind(value), struct, go_path, node)
                return
            items = self.catalog.items_schema(resolved)
            if items is not None:
                for index, item in enumerate(value):
                    self.walk(item, items, f"{path}[{index}]", struct, go_path, value, index)
        else:
            self.check_scalar(value, resolved, types, path, struct, go_path, node, holder, slot)

    def walk_object(self, value: dict[str, Any], resolved: dict[str, Any], path: str,
                    name: str | None, struct: str | None, go_path: list[str]) -> None:
        props = resolved.get("properties")
        if props is None:
            extra = self.catalog.additional_properties_schema(resolved)
            if extra is not None:
                for key, child in value.items():
                    self.walk(child, extra, f"{path}.{key}" if path else key, struct, go_path, value, key)
            return
        struct_name = name.rpartition(".")[2] if name else struct
        for key, child in value.items():
            child_path = f"{path}.{key}" if path else key
            child_node = props.get(key)
            if child_node is None:
                self.result.unknown_fields.append(child_path)
                continue
            self.walk(child, child_node, child_path, struct_name, [*go_path, key], value, key)
        top_level = not path
        if path == "status" or path.startswith(("status.", "status[")):
            # Status is written by controllers; kube-apiserver never rejects an object for a
            # status field the schema lists as required (those lists mean "no omitempty").
            return
        for required in _required_of(resolved, props):
            if top_level and required in ("metadata", "apiVersion", "kind"):
                continue
            if value.get(required) is None:
                self.result.errors.append(errors.required(f"{path}.{required}" if path else required))

    def check_scalar(self, value: Any, resolved: dict[str, Any], types: frozenset[str], path: str,
                     struct: str | None, go_path: list[str], node: dict[str, Any],
                     holder: Any = None, slot: Any = None) -> None:
        if isinstance(value, (dict, list)):
            self.type_error(_json_kind(value), struct, go_path, node)
            return
        if "integer" in types:
            if isinstance(value, bool) or isinstance(value, str):
                self.type_error(_json_kind(value), struct, go_path, node)
                return
            low, high = _INT_RANGES.get(str(resolved.get("format") or "int64"), _INT_RANGES["int64"])
            if isinstance(value, float) or not low <= value <= high:
                self.type_error(f"number {value}", struct, go_path, node)
            return
        if "number" in types:
            if isinstance(value, (bool, str)):
                self.type_error(_json_kind(value), struct, go_path, node)
            return
        if "boolean" in types:
            if not isinstance(value, bool):
                self.type_error(_json_kind(value), struct, go_path, node)
            return
        if "string" in types:
            if not isinstance(value, str):
                self.type_error(_json_kind(value), struct, go_path, node)
                return
            if resolved.get("format") == "byte":
                self.check_base64(value, holder, slot)
            enum = resolved.get("enum")
            last = path.rpartition(".")[2]
            if enum and value and last not in ("apiVersion", "kind") and value not in enum:
                self.result.errors.append(errors.not_supported(path, value, [str(e) for e in enum]))

    # custom unmarshallers -------------------------------------------------------------------

    def check_quantity(self, value: Any) -> None:
        if isinstance(value, bool) or isinstance(value, (dict, list)):
            self.custom_error(_QUANTITY_FORMAT_ERROR)
            return
        text = value.strip() if isinstance(value, str) else str(value)
        try:
            parse_quantity(text)  # Go's UnmarshalJSON: its errors (format, suffix, numeric) fail the decode
        except ValueError as err:
            self.custom_error(str(err))

    def check_int_or_string(self, value: Any) -> None:
        if isinstance(value, str):
            return
        if isinstance(value, int) and not isinstance(value, bool):
            if not -(2**31) <= value <= 2**31 - 1:
                self.custom_error(f"json: cannot unmarshal number {value} into Go value of type int32")
            return
        desc = f"number {value}" if isinstance(value, float) else _json_kind(value)
        self.custom_error(f"json: cannot unmarshal {desc} into Go value of type int32")

    def check_time(self, value: Any, micro: bool, holder: Any, slot: Any) -> None:
        if not isinstance(value, str):
            self.custom_error(f"json: cannot unmarshal {_json_kind(value)} into Go value of type string")
            return
        canonical, error = _canonical_time(value, micro)
        if error is not None:
            self.custom_error(error)
            return
        if canonical != value and holder is not None:
            self.result.canonical.append((holder, slot, canonical))

    def check_base64(self, value: str, holder: Any, slot: Any) -> None:
        try:
            canonical = gowire.canonical_base64(value)
        except ValueError as err:
            if self.result.decode_error is None:
                self.result.decode_error = str(err)
            return
        if canonical != value and holder is not None:
            self.result.canonical.append((holder, slot, canonical))


_TIME_REFS = ("io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime")


def _is_timestamp(node: dict[str, Any] | None) -> bool:
    ref = SchemaCatalog.ref_name(node) if node else None
    return ref in _TIME_REFS


# Memos of the walk. A schema node's plan and an object node's checked required fields depend on
# the node only (catalogs are loaded once and never change), so they are kept by the node's id
# with the node itself, which keeps the id from being reused; a time string's canonical form is
# a pure function of the string (the same creationTimestamp and managedFields times recur on
# every write within a second).

#: (resolved definition name, resolved node, what to do, JSON types).
_Plan = tuple[str | None, dict[str, Any], int, frozenset[str]]
_SKIP, _TAG_QUANTITY, _TAG_INT_OR_STRING, _TAG_TIME, _TAG_OBJECT, _TAG_ARRAY, _TAG_SCALAR = range(7)
_PLANS: dict[int, tuple[SchemaCatalog, dict[int, tuple[dict[str, Any], _Plan]]]] = {}
_REQUIRED: dict[int, tuple[dict[str, Any], tuple[str, ...]]] = {}
_TIMES: dict[tuple[str, bool], tuple[str, str | None]] = {}
_TIMES_MAX = 4096


def _plans_of(catalog: SchemaCatalog) -> dict[int, tuple[dict[str, Any], _Plan]]:
    entry = _PLANS.get(id(catalog))
    if entry is None or entry[0] is not catalog:
        entry = _PLANS[id(catalog)] = (catalog, {})
    return entry[1]


def _make_plan(catalog: SchemaCatalog, node: dict[str, Any]) -> _Plan:
    name, resolved = catalog.resolve_named(node)
    types = node_types(resolved)
    if name in _FREE_FORM:
        tag = _SKIP
    elif name == _QUANTITY:
        tag = _TAG_QUANTITY
    elif name == _INT_OR_STRING:
        tag = _TAG_INT_OR_STRING
    elif name in (_TIME, _MICRO_TIME):
        tag = _TAG_TIME
    elif not types:
        tag = _SKIP
    elif "object" in types:
        tag = _TAG_OBJECT
    elif "array" in types:
        tag = _TAG_ARRAY
    else:
        tag = _TAG_SCALAR
    return name, resolved, tag, types


def _required_of(resolved: dict[str, Any], props: dict[str, Any]) -> tuple[str, ...]:
    """The object's required fields but its timestamps (Go writes zero times as null; a null
    timestamp is never a missing field), in the schema's order."""
    cached = _REQUIRED.get(id(resolved))
    if cached is not None and cached[0] is resolved:
        return cached[1]
    required = tuple(r for r in resolved.get("required", ()) if not _is_timestamp(props.get(r)))
    _REQUIRED[id(resolved)] = (resolved, required)
    return required


def _canonical_time(value: str, micro: bool) -> tuple[str, str | None]:
    """``gowire.canonical_time``'s answer, or its error's text, remembered per string."""
    key = (value, micro)
    cached = _TIMES.get(key)
    if cached is not None:
        return cached
    try:
        answer: tuple[str, str | None] = (gowire.canonical_time(value, micro), None)
    except ValueError as err:
        answer = (value, str(err))
    if len(_TIMES) >= _TIMES_MAX:
        _TIMES.clear()
    _TIMES[key] = answer
    return answer


def validate_object(obj: dict[str, Any], catalog: SchemaCatalog, group: str, version: str,
                    kind: str) -> ValidationResult:
    """Type-check a built-in object, list its unknown fields and required/enum violations.

    Unknown kinds (custom resources) give an empty result: their schemas are not in the catalog.
    """
    root = catalog.root_schema(group, version, kind)
    walker = _Walker(catalog)
    if root is None:
        return walker.result
    name = catalog.definition_name(group, version, kind)
    walker.walk_object(obj, root, "", name, None, [])
    return walker.result


def _path_order(obj: Any) -> dict[str, int]:
    order: dict[str, int] = {}

    def visit(value: Any, path: str) -> None:
        if isinstance(value, dict):
            for key, child in value.items():
                child_path = f"{path}.{key}" if path else key
                order.setdefault(child_path, len(order))
                visit(child, child_path)
        elif isinstance(value, list):
            for index, child in enumerate(value):
                child_path = f"{path}[{index}]"
                order.setdefault(child_path, len(order))
                visit(child, child_path)

    visit(obj, "")
    return order


_DUPLICATE_RE = re.compile(r'^duplicate field "(.*)"$')


def strict_field_messages(obj: dict[str, Any], duplicate_messages: list[str],
                          unknown_fields: list[str]) -> list[str]:
    """Warnings for ``fieldValidation=Warn`` (or the parts of a Strict error), in Go's order.

    JSON duplicates and unknown fields interleave in document order; a field that is both
    unknown and duplicated is reported once, as unknown, and nothing under an unknown field is
    reported. YAML duplicate messages (``line N: ...``) come first, as go-yaml reports them.
    """
    unknown_set = set(unknown_fields)
    yaml_messages: list[str] = []
    entries: list[tuple[str, str]] = []
    for message in duplicate_messages:
        match = _DUPLICATE_RE.match(message)
        if match is None:
            yaml_messages.append(message)
            continue
        dup_path = match.group(1)
        if any(dup_path == u or dup_path.startswith((u + ".", u + "[")) for u in unknown_set):
            continue
        entries.append((dup_path, message))
    entries.extend((p, f'unknown field "{p}"') for p in unknown_fields)
    if not entries:
        return yaml_messages
    order = _path_order(obj)
    entries.sort(key=lambda entry: order.get(entry[0], len(order)))
    return yaml_messages + [message for _, message in entries]


def strict_decoding_error(messages: list[str]) -> str:
    """The ``fieldValidation=Strict`` error text for the messages of :func:`strict_field_messages`."""
    yaml_lines = [m for m in messages if m.startswith("line ")]
    others = [m for m in messages if not m.startswith("line ")]
    parts: list[str] = []
    if yaml_lines:
        parts.append("yaml: unmarshal errors:\n" + "\n".join("  " + m for m in yaml_lines))
    parts.extend(others)
    return "strict decoding error: " + ", ".join(parts)
