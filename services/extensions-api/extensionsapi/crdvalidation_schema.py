"""Validation of a CRD's openAPIV3Schema (apiextensions' ``validateCustomResourceDefinitionValidation``).

Three layers, in kube-apiserver's order and with its messages: the structural-schema rules
(:mod:`extensionsapi.schema.structural`), the defaults (each must validate against its own node and
survive pruning unchanged), and the OpenAPI subset CRDs accept (no ``$ref``, ``uniqueItems``,
``patternProperties``...; list/map-type rules; ``x-kubernetes-validations`` shape). CEL rules are
compiled by :mod:`genericapi.apimachinery.cel` when that module is available.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.cel import compile_schema
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.gofmt import field_value

from .schema.embedded import validate_embedded
from .schema.prune import prune as prune_resource
from .schema.prune import prune_value
from .schema.structural import validate_structural
from .schema.values import json_equal, to_field_errors, validate_value

OPENAPI_V3_TYPES = ["array", "boolean", "integer", "number", "object", "string"]
SUPPORTED_VALIDATION_REASONS = ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid",
                                "FieldValueRequired"]
ALLOWED_AT_ROOT_WITH_STATUS = {"description", "type", "format", "title", "maximum", "exclusiveMaximum", "minimum",
                               "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
                               "uniqueItems", "multipleOf", "required", "items", "properties", "externalDocs",
                               "example", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations"}
_ALLOWED_ROOT_NAMES = ("[Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength "
                       "MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties "
                       "ExternalDocs Example XPreserveUnknownFields XValidations]")
_META_FIELDS = ("metadata", "kind", "apiVersion")
_MAP_KEY_DEFAULT = ("this property is in x-kubernetes-list-map-keys, so it must have a default or be a required "
                    "property")


@dataclass(frozen=True)
class SchemaOptions:
    allow_defaults: bool = True
    disallow_defaults_reason: str = ""
    inside_resource_meta: bool = False
    require_valid_property_type: bool = True
    require_structural: bool = True
    require_pruned_defaults: bool = True
    require_atomic_set_type: bool = True
    require_map_list_keys_map_set: bool = True


def _p(path: str, child: str) -> str:
    return f"{path}.{child}"


def _k(path: str, key: str) -> str:
    return f"{path}[{key}]"


def _present(value: Any) -> bool:
    return value not in (None, False, "", [], {}, 0)


def _standard(schema: dict[str, Any], path: str, opts: SchemaOptions) -> list[FieldError]:
    """``specStandardValidatorV3.validate``: the OpenAPI features CRDs do not support."""
    errs: list[FieldError] = []
    typ = schema.get("type")
    if opts.require_valid_property_type and typ and typ not in OPENAPI_V3_TYPES:
        errs.append(errors.not_supported(_p(path, "type"), typ, OPENAPI_V3_TYPES))
    if schema.get("default") is not None and not opts.allow_defaults:
        detail = "must not be set"
        if opts.disallow_defaults_reason:
            detail += " " + opts.disallow_defaults_reason
        errs.append(errors.forbidden(_p(path, "default"), detail))
    if schema.get("id"):
        errs.append(errors.forbidden(_p(path, "id"), "id is not supported"))
    if schema.get("additionalItems") is not None:
        errs.append(errors.forbidden(_p(path, "additionalItems"), "additionalItems is not supported"))
    if schema.get("patternProperties"):
        errs.append(errors.forbidden(_p(path, "patternProperties"), "patternProperties is not supported"))
    if schema.get("definitions"):
        errs.append(errors.forbidden(_p(path, "definitions"), "definitions is not supported"))
    if schema.get("dependencies") is not None:
        errs.append(errors.forbidden(_p(path, "dependencies"), "dependencies is not supported"))
    if schema.get("$ref") is not None:
        errs.append(errors.forbidden(_p(path, "$ref"), "$ref is not supported"))
    if typ == "null":
        errs.append(errors.forbidden(_p(path, "type"), "type cannot be set to null, use nullable as an alternative"))
    if isinstance(schema.get("items"), list):
        errs.append(errors.forbidden(_p(path, "items"), "items must be a schema object and not an array"))
    if opts.inside_resource_meta and schema.get("x-kubernetes-embedded-resource"):
        errs.append(errors.forbidden(_p(path, "x-kubernetes-embedded-resource"),
                                     "must not be used inside of resource meta"))
    return errs


def _list_and_map_types(schema: dict[str, Any], path: str, opts: SchemaOptions) -> list[FieldError]:
    errs: list[FieldError] = []
    typ = schema.get("type") or ""
    map_type = schema.get("x-kubernetes-map-type")
    list_type = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys") or []
    items = schema.get("items") if isinstance(schema.get("items"), dict) else None
    if map_type is not None and typ != "object":
        if not typ:
            errs.append(errors.required(_p(path, "type"), "must be object if x-kubernetes-map-type is specified"))
        else:
            errs.append(errors.invalid(_p(path, "type"), typ, "must be object if x-kubernetes-map-type is specified"))
    if map_type is not None and map_type not in ("atomic", "granular"):
        errs.append(errors.not_supported(_p(path, "x-kubernetes-map-type"), map_type, ["atomic", "granular"]))
    if list_type is not None and typ != "array":
        if not typ:
            errs.append(errors.required(_p(path, "type"), "must be array if x-kubernetes-list-type is specified"))
        else:
            errs.append(errors.invalid(_p(path, "type"), typ, "must be array if x-kubernetes-list-type is specified"))
    elif opts.require_atomic_set_type and list_type == "set" and items is not None:
        if items.get("type") == "array" and items.get("x-kubernetes-list-type") not in (None, "atomic"):
            errs.append(errors.invalid(_p(_p(path, "items"), "x-kubernetes-list-type"),
                                       items.get("x-kubernetes-list-type"),
                                       "must be atomic as item of a list with x-kubernetes-list-type=set"))
        if items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
            errs.append(errors.invalid(_p(_p(path, "items"), "x-kubernetes-map-type"), list_type,
                                       "must be atomic as item of a list with x-kubernetes-list-type=set"))
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        errs.append(errors.not_supported(_p(path, "x-kubernetes-list-type"), list_type, ["atomic", "set", "map"]))
    if keys:
        if list_type is None:
            errs.append(errors.required(_p(path, "x-kubernetes-list-type"),
                                        "must be map if x-kubernetes-list-map-keys is non-empty"))
        elif list_type != "map":
            errs.append(errors.invalid(_p(path, "x-kubernetes-list-type"), list_type,
                                       "must be map if x-kubernetes-list-map-keys is non-empty"))
    if list_type == "map":
        if not keys:
            errs.append(errors.required(_p(path, "x-kubernetes-list-map-keys"),
                                        "must not be empty if x-kubernetes-list-type is map"))
        if schema.get("items") is None:
            errs.append(errors.required(_p(path, "items"), "must have a schema if x-kubernetes-list-type is map"))
        elif items is None:
            errs.append(errors.invalid(_p(path, "items"), field_value(schema["items"]),
                                       "must only have a single schema if x-kubernetes-list-type is map"))
        if items is not None and items.get("type") != "object":
            errs.append(errors.invalid(_p(_p(path, "items"), "type"), items.get("type") or "",
                                       "must be object if parent array's x-kubernetes-list-type is map"))
        if items is not None and items.get("type") == "object":
            item_props = items.get("properties") or {}
            seen: set[str] = set()
            shown = field_value(list(keys))
            for key in keys:
                if key in item_props:
                    if (item_props[key] or {}).get("type") in ("array", "object"):
                        errs.append(errors.invalid(_p(_k(_p(_p(path, "items"), "properties"), key), "type"), "object",
                                                   "must be a scalar type if parent array's x-kubernetes-list-type "
                                                   "is map"))
                else:
                    errs.append(errors.invalid(_p(path, "x-kubernetes-list-map-keys"), shown,
                                               "entries must all be names of item properties"))
                if key in seen:
                    errs.append(errors.invalid(_p(path, "x-kubernetes-list-map-keys"), shown,
                                               "must not contain duplicate entries"))
                seen.add(key)
    if opts.require_map_list_keys_map_set and items is not None and list_type in ("set", "map"):
        if items.get("nullable"):
            errs.append(errors.forbidden(_p(_p(path, "items"), "nullable"),
                                         f"cannot be nullable when x-kubernetes-list-type is {list_type}"))
        if list_type == "map":
            required = set(items.get("required") or [])
            item_props = items.get("properties") or {}
            for key in keys:
                if key not in item_props:
                    continue
                prop = item_props[key] or {}
                key_path = _k(_p(_p(path, "items"), "properties"), key)
                if key not in required and prop.get("default") is None:
                    errs.append(errors.required(_p(key_path, "default"), _MAP_KEY_DEFAULT))
                if prop.get("nullable"):
                    errs.append(errors.forbidden(_p(key_path, "nullable"),
                                                 "this property is in x-kubernetes-list-map-keys, so it cannot be "
                                                 "nullable"))
    return errs


def _validation_rules(schema: dict[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, rule in enumerate(schema.get("x-kubernetes-validations") or []):
        rule = rule if isinstance(rule, dict) else {}
        rpath = _p(path, f"x-kubernetes-validations[{i}]")
        text = str(rule.get("rule") or "")
        message = str(rule.get("message") or "")
        message_expr = str(rule.get("messageExpression") or "")
        if not text.strip():
            errs.append(errors.required(_p(rpath, "rule"), "rule is not specified"))
        elif message and not message.strip():
            errs.append(errors.invalid(_p(rpath, "message"), message, "message must be non-empty if specified"))
        elif any(c in message.strip() for c in "\r\n"):
            errs.append(errors.invalid(_p(rpath, "message"), message, "message must not contain line breaks"))
        elif any(c in text.strip() for c in "\r\n") and not message.strip():
            errs.append(errors.required(_p(rpath, "message"), "message must be specified if rule contains line breaks"))
        if message_expr and not message_expr.strip():
            errs.append(errors.required(_p(rpath, "messageExpression"),
                                        "messageExpression must be non-empty if specified"))
        reason = rule.get("reason")
        if reason is not None and reason not in SUPPORTED_VALIDATION_REASONS:
            errs.append(errors.not_supported(_p(rpath, "reason"), reason, SUPPORTED_VALIDATION_REASONS))
        field_path = str(rule.get("fieldPath") or "")
        if field_path and not field_path.strip():
            errs.append(errors.invalid(_p(rpath, "fieldPath"), field_path, "fieldPath must be non-empty if specified"))
        if any(c in field_path for c in "\r\n"):
            errs.append(errors.invalid(_p(rpath, "fieldPath"), field_path, "fieldPath must not contain line breaks"))
        if field_path.strip() and not field_path_valid(schema, field_path):
            errs.append(errors.invalid(_p(rpath, "fieldPath"), field_path, "fieldPath must be a valid path"))
    return errs


def field_path_valid(schema: dict[str, Any], path: str) -> bool:
    """A ``.a.b['c'][0]``-style path that names a field the schema specifies."""
    return resolve_field_path(schema, path, allow_index=True) is not None


def resolve_field_path(schema: dict[str, Any], path: str, *, allow_index: bool) -> dict[str, Any] | None:
    import re

    if not path.startswith(".") and not path.startswith("["):
        return None
    node: dict[str, Any] | None = schema
    pos = 0
    token = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\['((?:[^'\\]|\\.)*)'\]|\[(\d+)\]")
    while pos < len(path):
        m = token.match(path, pos)
        if m is None or node is None:
            return None
        pos = m.end()
        name = m.group(1) if m.group(1) is not None else m.group(2)
        if name is not None:
            props = node.get("properties") or {}
            if name in props:
                node = props[name]
            elif isinstance(node.get("additionalProperties"), dict):
                node = node["additionalProperties"]
            else:
                return None
        else:
            if not allow_index or node.get("type") != "array" or not isinstance(node.get("items"), dict):
                return None
            node = node["items"]
    return node


def validate_openapi_schema(schema: dict[str, Any] | None, path: str, opts: SchemaOptions, is_root: bool,
                            ) -> list[FieldError]:
    """``ValidateCustomResourceDefinitionOpenAPISchema`` (schema errors only; CEL is separate)."""
    if not isinstance(schema, dict):
        return []
    errs = _standard(schema, path, opts)
    if schema.get("uniqueItems"):
        errs.append(errors.forbidden(_p(path, "uniqueItems"), "uniqueItems cannot be set to true since the "
                                     "runtime complexity becomes quadratic"))
    raw_props = schema.get("properties")
    props: dict[str, Any] = raw_props if isinstance(raw_props, dict) else {}
    additional = schema.get("additionalProperties")
    if additional is not None:
        if props and (additional is False or isinstance(additional, dict)):
            errs.append(errors.forbidden(_p(path, "additionalProperties"),
                                         "additionalProperties and properties are mutual exclusive"))
        sub_opts = opts
        if opts.inside_resource_meta:
            sub_opts = replace(opts, allow_defaults=False,
                               disallow_defaults_reason="inside additionalProperties applying to object metadata")
        if isinstance(additional, dict):
            errs.extend(validate_openapi_schema(additional, _p(path, "additionalProperties"), sub_opts, False))
    for name, sub in props.items():
        sub_opts = opts
        if (is_root or schema.get("x-kubernetes-embedded-resource")) and name in _META_FIELDS:
            sub_opts = replace(sub_opts, inside_resource_meta=True)
            if is_root:
                sub_opts = replace(sub_opts, allow_defaults=False, disallow_defaults_reason=f"in top-level {name}")
        errs.extend(validate_openapi_schema(sub, _k(_p(path, "properties"), name), sub_opts, False))
    errs.extend(validate_openapi_schema(schema.get("not"), _p(path, "not"), opts, False))
    for junctor in ("allOf", "oneOf", "anyOf"):
        for i, sub in enumerate(schema.get(junctor) or []):
            errs.extend(validate_openapi_schema(sub, _p(path, f"{junctor}[{i}]"), opts, False))
    if isinstance(schema.get("items"), dict):
        errs.extend(validate_openapi_schema(schema["items"], _p(path, "items"), opts, False))
    elif isinstance(schema.get("items"), list):
        for i, sub in enumerate(schema["items"]):
            errs.extend(validate_openapi_schema(sub, _p(path, f"items[{i}]"), opts, False))
    if schema.get("x-kubernetes-preserve-unknown-fields") is False:
        errs.append(errors.invalid(_p(path, "x-kubernetes-preserve-unknown-fields"), False,
                                   "must be true or undefined"))
    errs.extend(_list_and_map_types(schema, path, opts))
    errs.extend(_validation_rules(schema, path))
    return errs


def _validate_default(node: dict[str, Any], path: str, require_pruned: bool) -> list[FieldError]:
    value = node["default"]
    dpath = _p(path, "default")
    errs: list[FieldError] = []
    embedded = bool(node.get("x-kubernetes-embedded-resource"))
    if require_pruned:
        pruned = copy.deepcopy(value)
        if embedded and isinstance(pruned, dict):
            prune_resource(pruned, {k: v for k, v in node.items() if k != "default"})
        else:
            prune_value(pruned, node)
        if not json_equal(pruned, value):
            return [errors.invalid(dpath, field_value(value), "must not have unknown fields")]
    if embedded and isinstance(value, dict):
        errs.extend(validate_embedded(value, node, dpath))
        if errs:
            return errs
    return to_field_errors(validate_value(node, value), dpath)


def validate_defaults(node: dict[str, Any], path: str, require_pruned: bool, inside_meta: bool = False,
                      ) -> list[FieldError]:
    """``ValidateDefaults``: every default validates against its node and is already pruned."""
    errs: list[FieldError] = []
    if node.get("x-kubernetes-embedded-resource"):
        inside_meta = False
    if node.get("default") is not None and not inside_meta:
        errs.extend(_validate_default(node, path, require_pruned))
    if isinstance(node.get("items"), dict):
        errs.extend(validate_defaults(node["items"], _p(path, "items"), require_pruned, inside_meta))
    for name, sub in (node.get("properties") or {}).items():
        if isinstance(sub, dict):
            sub_meta = inside_meta or (bool(node.get("x-kubernetes-embedded-resource")) and name in _META_FIELDS)
            errs.extend(validate_defaults(sub, _k(_p(path, "properties"), name), require_pruned, sub_meta))
    return errs


def _compile_cel(schema: dict[str, Any], path: str) -> list[FieldError]:
    """Compile every x-kubernetes-validations rule now: bad rules reject the CRD, not its objects."""
    _, errs = compile_schema(schema, path)
    return list(errs)


def validate_crd_schema(validation: dict[str, Any] | None, status_enabled: bool, opts: SchemaOptions,
                        path: str) -> list[FieldError]:
    """``validateCustomResourceDefinitionValidation`` for one ``{openAPIV3Schema: ...}`` block."""
    if not isinstance(validation, dict):
        return []
    schema = validation.get("openAPIV3Schema")
    errs: list[FieldError] = []
    if not isinstance(schema, dict):
        return errs
    spath = _p(path, "openAPIV3Schema")
    if status_enabled:
        for key, value in schema.items():
            if not _present(value):
                continue
            if key == "type":
                if value != "object":
                    errs.append(errors.invalid(_p(spath, "type"), value, 'only "object" is allowed as the type at the '
                                               "root of the schema if the status subresource is enabled"))
                    break
                continue
            if key not in ALLOWED_AT_ROOT_WITH_STATUS:
                errs.append(errors.invalid(spath, field_value(schema), f"only {_ALLOWED_ROOT_NAMES} fields are allowed "
                                           "at the root of the schema if the status subresource is enabled"))
                break
    if schema.get("nullable"):
        errs.append(errors.forbidden(_p(spath, "nullable"), "nullable cannot be true at the root"))
    cel_ok = False
    if opts.require_structural:
        structural = validate_structural(schema, spath)
        if structural:
            errs.extend(structural)
        else:
            defaults = validate_defaults(dict(schema, **{"x-kubernetes-embedded-resource": True}), spath,
                                         opts.require_pruned_defaults)
            errs.extend(defaults)
            cel_ok = not defaults
    schema_errs = validate_openapi_schema(schema, spath, opts, True)
    errs.extend(schema_errs)
    if cel_ok and not schema_errs:
        errs.extend(_compile_cel(schema, spath))
    return errs
