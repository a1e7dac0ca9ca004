"""Is an openAPIV3Schema structural? apiextensions' ``ValidateStructural`` with its messages.

A structural schema specifies a non-empty ``type`` for every node (except under
``x-kubernetes-int-or-string`` / ``x-kubernetes-preserve-unknown-fields``), keeps allOf/anyOf/oneOf/not
to pure value validation (no types, descriptions, defaults or extensions there, and no field that the
structural part does not also specify), and lets root ``metadata`` restrict only ``name`` and
``generateName``. Errors are sorted by their text, as kube-apiserver sorts them.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError

from .regex import PatternError, compile_pattern

ROOT, ITEM, FIELD = "root", "item", "field"
_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]
#: keys that belong to the value-validation part of a node
VALUE_VALIDATION_KEYS = frozenset({
    "format", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
    "maxItems", "minItems", "uniqueItems", "multipleOf", "enum", "maxProperties", "minProperties", "required",
    "allOf", "oneOf", "anyOf", "not",
})


def _p(path: str, child: str) -> str:
    return f"{path}.{child}" if path else child


def _k(path: str, key: str) -> str:
    return f"{path}[{key}]"


def _is_int_or_string_any_of(node: dict[str, Any]) -> bool:
    return node.get("anyOf") == _INT_OR_STRING_ANY_OF


def _is_int_or_string_all_of(node: dict[str, Any]) -> bool:
    all_of = node.get("allOf")
    return (isinstance(all_of, list) and len(all_of) >= 1 and isinstance(all_of[0], dict)
            and all_of[0].get("anyOf") == _INT_OR_STRING_ANY_OF)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _props(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in _dict(node.get("properties")).items() if isinstance(v, dict)}


def _value_validation(node: dict[str, Any], skip_any_of: bool, skip_first_all_of_any_of: bool, path: str,
                      ) -> list[FieldError]:
    errs: list[FieldError] = []
    if not skip_any_of:
        for i, sub in enumerate(node.get("anyOf") or []):
            errs.extend(_nested(_dict(sub), False, _p(path, f"anyOf[{i}]")))
    for i, sub in enumerate(node.get("allOf") or []):
        errs.extend(_nested(_dict(sub), skip_first_all_of_any_of and i == 0, _p(path, f"allOf[{i}]")))
    for i, sub in enumerate(node.get("oneOf") or []):
        errs.extend(_nested(_dict(sub), False, _p(path, f"oneOf[{i}]")))
    if isinstance(node.get("not"), dict):
        errs.extend(_nested(node["not"], False, _p(path, "not")))
    pattern = node.get("pattern")
    if isinstance(pattern, str) and pattern:
        try:
            compile_pattern(pattern)
        except PatternError as exc:
            errs.append(errors.invalid(_p(path, "pattern"), pattern,
                                       f"must be a valid regular expression, but isn't: {exc}"))
    return errs


_EMPTY = "must be empty to be structural"
_UNDEFINED = "must be undefined to be structural"
_FALSE = "must be false to be structural"
_NESTED_FORBIDDEN: list[tuple[str, Any, str]] = [
    ("type", bool, _EMPTY),
    ("additionalProperties", None, _UNDEFINED),
    ("default", lambda v: v is not None, _UNDEFINED),
    ("title", bool, _EMPTY),
    ("description", bool, _EMPTY),
    ("nullable", bool, _FALSE),
    ("externalDocs", lambda v: v is not None, _UNDEFINED),
    ("x-kubernetes-preserve-unknown-fields", bool, _FALSE),
    ("x-kubernetes-embedded-resource", bool, _FALSE),
    ("x-kubernetes-int-or-string", bool, _FALSE),
    ("x-kubernetes-list-map-keys", bool, _EMPTY),
    ("x-kubernetes-list-type", lambda v: v is not None, _UNDEFINED),
    ("x-kubernetes-map-type", lambda v: v is not None, _UNDEFINED),
    ("x-kubernetes-validations", bool, _EMPTY),
]


def _nested(node: dict[str, Any], skip_any_of: bool, path: str) -> list[FieldError]:
    """``validateNestedValueValidation``: what may appear under allOf/anyOf/oneOf/not."""
    errs = _value_validation(node, skip_any_of, False, path)
    if isinstance(node.get("items"), dict):
        errs.extend(_nested(node["items"], False, _p(path, "items")))
    for key, sub in _props(node).items():
        errs.extend(_nested(sub, False, _k(_p(path, "properties"), key)))
    for key, present, detail in _NESTED_FORBIDDEN:
        if present(node.get(key)) if key != "additionalProperties" else key in node:
            errs.append(errors.forbidden(_p(path, key), detail))
    if "metadata" in _props(node):
        errs.append(errors.forbidden(_k(_p(path, "properties"), "metadata"),
                                     "must not be specified in a nested context"))
    return errs


_EMBEDDED_OBJECT = "must be object if x-kubernetes-embedded-resource is true"
_METADATA_ALLOWED = {"type", "default", "properties"}


def _metadata(node: dict[str, Any], check: bool, level: str, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    typ = node.get("type") or ""
    if check and typ != "object":
        errs.append(errors.invalid(_p(path, "type"), typ, "must be object"))
    if level == ROOT:
        props = set(_dict(node.get("properties")))
        props_ok = not props or props <= {"name", "generateName"}
        others = [k for k, v in node.items() if k not in _METADATA_ALLOWED and v not in (None, False, "", [], {})]
        if not props_ok or others:
            errs.append(errors.forbidden(path, "must not specify anything other than name and generateName, "
                                               "but metadata is implicitly specified"))
    return errs


def _invariants(node: dict[str, Any], level: str, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    typ = node.get("type") or ""
    if typ == "array" and not isinstance(node.get("items"), dict):
        errs.append(errors.required(_p(path, "items"), "must be specified"))
    if isinstance(node.get("items"), dict):
        errs.extend(_invariants(node["items"], ITEM, _p(path, "items")))
    props = _props(node)
    for key, sub in props.items():
        errs.extend(_invariants(sub, FIELD, _k(_p(path, "properties"), key)))
    additional = node.get("additionalProperties")
    if additional is not None:
        if level == ROOT:
            errs.append(errors.forbidden(_p(path, "additionalProperties"), "must not be used at the root"))
        if isinstance(additional, dict):
            errs.extend(_invariants(additional, FIELD, _p(path, "additionalProperties")))
    int_or_string = bool(node.get("x-kubernetes-int-or-string"))
    preserve = bool(node.get("x-kubernetes-preserve-unknown-fields"))
    embedded = bool(node.get("x-kubernetes-embedded-resource"))
    if int_or_string and preserve:
        errs.append(errors.invalid(_p(path, "x-kubernetes-preserve-unknown-fields"), True,
                                   "must be false if x-kubernetes-int-or-string is true"))
    if int_or_string and embedded:
        errs.append(errors.invalid(_p(path, "x-kubernetes-embedded-resource"), True,
                                   "must be false if x-kubernetes-int-or-string is true"))
    errs.extend(_value_validation(node, _is_int_or_string_any_of(node), _is_int_or_string_all_of(node), path))
    check_metadata = level == ROOT or embedded
    if embedded and typ != "object":
        if not typ:
            errs.append(errors.required(_p(path, "type"), _EMBEDDED_OBJECT))
        else:
            errs.append(errors.invalid(_p(path, "type"), typ, _EMBEDDED_OBJECT))
    elif not typ and not int_or_string and not preserve:
        detail = {ROOT: "must not be empty at the root", ITEM: "must not be empty for specified array items",
                  FIELD: "must not be empty for specified object fields"}[level]
        errs.append(errors.required(_p(path, "type"), detail))
    if embedded and additional is not None:
        errs.append(errors.forbidden(_p(path, "additionalProperties"),
                                     "must not be used if x-kubernetes-embedded-resource is set"))
    if level == ROOT and typ and typ != "object":
        errs.append(errors.invalid(_p(path, "type"), typ, "must be object at the root"))
    for meta_field in ("kind", "apiVersion"):
        if meta_field in props and check_metadata and props[meta_field].get("type") != "string":
            errs.append(errors.invalid(_p(_k(_p(path, "properties"), meta_field), "type"),
                                       props[meta_field].get("type") or "", "must be string"))
    if "metadata" in props:
        errs.extend(_metadata(props["metadata"], check_metadata, level, _k(_p(path, "properties"), "metadata")))
    if embedded and not preserve and not props:
        errs.append(errors.required(_p(path, "properties"), "must not be empty if x-kubernetes-embedded-resource is "
                                                             "true without x-kubernetes-preserve-unknown-fields"))
    return errs


def _complete_nested(v: dict[str, Any], s: dict[str, Any] | None, s_path: str, v_path: str) -> list[FieldError]:
    if s is None:
        return [errors.required(s_path, f"because it is defined in {v_path}")]
    errs = _complete(v, s, s_path, v_path)
    if isinstance(v.get("items"), dict):
        s_items = s.get("items") if isinstance(s.get("items"), dict) else None
        errs.extend(_complete_nested(v["items"], s_items, _p(s_path, "items"), _p(v_path, "items")))
    s_props = _props(s)
    for key, sub in _props(v).items():
        if key not in s_props:
            errs.append(errors.required(_k(_p(s_path, "properties"), key),
                                        f"because it is defined in {_k(_p(v_path, 'properties'), key)}"))
        else:
            errs.extend(_complete_nested(sub, s_props[key], _k(_p(s_path, "properties"), key),
                                         _k(_p(v_path, "properties"), key)))
    return errs


def _complete(v: dict[str, Any], s: dict[str, Any], s_path: str, v_path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if isinstance(v.get("not"), dict):
        errs.extend(_complete_nested(v["not"], s, s_path, _p(v_path, "not")))
    for junctor in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(v.get(junctor) or []):
            errs.extend(_complete_nested(_dict(sub), s, s_path, _p(v_path, f"{junctor}[{i}]")))
    return errs


def _completeness(node: dict[str, Any], path: str) -> list[FieldError]:
    """``validateStructuralCompleteness``: kube-apiserver checks the root node's junctors only."""
    return _complete(node, node, path, path)


def validate_structural(schema: dict[str, Any], path: str = "") -> list[FieldError]:
    """``ValidateStructural``: every violation, sorted by message text."""
    errs = _invariants(schema, ROOT, path) + _completeness(schema, path)
    return sorted(errs, key=str)


def is_structural(schema: dict[str, Any]) -> bool:
    return not validate_structural(schema)
