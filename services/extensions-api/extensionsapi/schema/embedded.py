"""Validation of ``x-kubernetes-embedded-resource`` values (apiextensions' objectmeta.Validate).

An embedded resource must carry ``apiVersion`` and ``kind`` (``Required value: must not be
empty``), ``kind`` must look like a kind, and its ``metadata`` is validated as ObjectMeta with
path-segment names. The root object's own metadata is the generic store's job and is skipped.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.gofmt import field_value
from genericapi.apimachinery.validation_meta import name_is_path_segment, validate_dns1035_label, validate_object_meta

_META_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,), "generateName": (str,), "namespace": (str,), "selfLink": (str,), "uid": (str,),
    "resourceVersion": (str,), "generation": (int,), "creationTimestamp": (str,), "deletionTimestamp": (str,),
    "deletionGracePeriodSeconds": (int,), "labels": (dict,), "annotations": (dict,), "ownerReferences": (list,),
    "finalizers": (list,), "managedFields": (list,),
}
_GO_TYPES = {"generation": "int64", "deletionGracePeriodSeconds": "int64", "labels": "map[string]string",
             "annotations": "map[string]string", "ownerReferences": "[]v1.OwnerReference", "finalizers": "[]string",
             "managedFields": "[]v1.ManagedFieldsEntry", "creationTimestamp": "v1.Time",
             "deletionTimestamp": "v1.Time"}
_JSON_KIND = {bool: "bool", int: "number", float: "number", str: "string", list: "array", dict: "object"}


def _meta_type_error(meta: dict[str, Any]) -> str | None:
    for key, allowed in _META_TYPES.items():
        value = meta.get(key)
        if value is None or (isinstance(value, allowed) and not isinstance(value, bool)):
            continue
        kind = _JSON_KIND.get(type(value), "value")
        return (f"json: cannot unmarshal {kind} into Go struct field ObjectMeta.{key} of type "
                f"{_GO_TYPES.get(key, 'string')}")
    return None


def _validate_embedded(path: str, obj: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    if "apiVersion" not in obj:
        errs.append(errors.required(f"{path}.apiVersion" if path else "apiVersion", "must not be empty"))
    if "kind" not in obj:
        errs.append(errors.required(f"{path}.kind" if path else "kind", "must not be empty"))
    for key, value in obj.items():
        sub = f"{path}.{key}" if path else key
        if key == "apiVersion":
            if not isinstance(value, str):
                errs.append(errors.invalid(sub, field_value(value), "must be a string"))
            elif not value:
                errs.append(errors.invalid(sub, value, "must not be empty"))
            elif value.count("/") > 1:
                errs.append(errors.invalid(sub, value, f"unexpected GroupVersion string: {value}"))
        elif key == "kind":
            if not isinstance(value, str):
                errs.append(errors.invalid(sub, field_value(value), "must be a string"))
            elif not value:
                errs.append(errors.invalid(sub, value, "must not be empty"))
            else:
                msgs = validate_dns1035_label(value.lower())
                if msgs:
                    errs.append(errors.invalid(sub, value, "may have mixed case, but should otherwise match: "
                                               + ",".join(msgs)))
        elif key == "metadata":
            if not isinstance(value, dict):
                errs.append(errors.invalid(sub, field_value(value), "json: cannot unmarshal "
                                           f"{_JSON_KIND.get(type(value), 'value')} into Go value of type "
                                           "v1.ObjectMeta"))
                continue
            problem = _meta_type_error(value)
            if problem:
                errs.append(errors.invalid(sub, field_value(value), problem))
                continue
            meta = dict(value)
            if not meta.get("name"):
                meta["name"] = "fakename"
            errs.extend(validate_object_meta(meta, bool(meta.get("namespace")), name_is_path_segment, sub))
    return errs


def validate_embedded(value: Any, node: dict[str, Any] | None, path: str = "") -> list[FieldError]:
    """Check every embedded resource under ``value`` (the root itself is not one here)."""
    if node is None:
        return []
    errs: list[FieldError] = []
    if isinstance(value, dict):
        if node.get("x-kubernetes-embedded-resource"):
            errs.extend(_validate_embedded(path, value))
        props = node.get("properties") or {}
        additional = node.get("additionalProperties")
        for key, sub in value.items():
            if isinstance(props.get(key), dict):
                errs.extend(validate_embedded(sub, props[key], f"{path}.{key}" if path else key))
            elif isinstance(additional, dict):
                errs.extend(validate_embedded(sub, additional, f"{path}[{key}]"))
    elif isinstance(value, list):
        items = node.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                errs.extend(validate_embedded(item, items, f"{path}[{i}]"))
    return errs
