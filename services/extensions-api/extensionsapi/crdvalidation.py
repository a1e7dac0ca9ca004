"""Validation of CustomResourceDefinition objects, as apiextensions' ``ValidateCustomResourceDefinition``.

kube-apiserver converts a v1 CRD to its internal form before validating, and that decides the error
paths users see: when every version carries the same schema (always true with one version), the
schema moves to ``spec.validation`` (``spec.validation.openAPIV3Schema.properties[spec].type``), and
likewise ``spec.subresources`` and ``spec.additionalPrinterColumns``; webhook conversion settings
appear as ``spec.conversion.webhookClientConfig`` and ``spec.conversion.conversionReviewVersions``.
This module reproduces that conversion and the checks in Go's order. ``default_crd`` applies the v1
defaults (singular, listKind, conversion strategy, service port, ``status.storedVersions``) that the
decoder applies before validation and storage.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError, GoRendered
from genericapi.apimachinery.gofmt import field_value, json_quote, string_slice
from genericapi.apimachinery.validation_meta import (
    name_is_dns_subdomain,
    validate_dns1035_label,
    validate_dns1123_subdomain,
    validate_object_meta,
)

from .crdvalidation_schema import SchemaOptions, validate_crd_schema
from .crdvalidation_versions import (
    CONVERSION_REVIEW_VERSIONS,
    validate_conversion,
    validate_deprecation_warning,
    validate_printer_column,
    validate_selectable_fields,
    validate_subresources,
)
from .schema.structural import is_structural
from .schema.values import json_equal

APPROVAL_ANNOTATION = "api-approved.kubernetes.io"
_ENHANCEMENTS = "see https://github.com/kubernetes/enhancements/pull/1111"


def default_crd(crd: dict[str, Any]) -> dict[str, Any]:
    """The v1 defaults (``SetDefaults_CustomResourceDefinition``), applied in place; returns ``crd``."""
    spec = crd.setdefault("spec", {})
    names = spec.setdefault("names", {})
    kind = names.get("kind") or ""
    if not names.get("singular") and kind:
        names["singular"] = kind.lower()
    if not names.get("listKind") and kind:
        names["listKind"] = kind + "List"
    conversion = spec.get("conversion")
    if not conversion:
        spec["conversion"] = {"strategy": "None"}
    else:
        service = ((conversion.get("webhook") or {}).get("clientConfig") or {}).get("service")
        if isinstance(service, dict) and service.get("port") is None:
            service["port"] = 443
    status = crd.setdefault("status", {})
    if not status.get("storedVersions"):
        for version in spec.get("versions") or []:
            if isinstance(version, dict) and version.get("storage"):
                status["storedVersions"] = [version.get("name") or ""]
                break
    return crd


def _internal_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """v1 -> internal: identical per-version schema/subresources/columns move to the top level."""
    out = copy.deepcopy(spec)
    versions = [v for v in out.get("versions") or [] if isinstance(v, dict)]
    out["versions"] = versions
    conversion = out.get("conversion")
    if isinstance(conversion, dict):
        webhook = conversion.pop("webhook", None) or {}
        if "clientConfig" in webhook and webhook["clientConfig"] is not None:
            conversion["webhookClientConfig"] = webhook["clientConfig"]
        if webhook.get("conversionReviewVersions") is not None:
            conversion["conversionReviewVersions"] = webhook["conversionReviewVersions"]
    if not versions:
        return out
    out["version"] = versions[0].get("name") or ""
    for per_version, top in (("schema", "validation"), ("subresources", "subresources"),
                             ("additionalPrinterColumns", "additionalPrinterColumns")):
        first = versions[0].get(per_version)
        if per_version == "additionalPrinterColumns" and not first:
            first = None
        same = all(json_equal(v.get(per_version) or None, first) for v in versions)
        if same:
            if first is not None:
                out[top] = first
            for v in versions:
                v.pop(per_version, None)
    return out


def _p(path: str, child: str) -> str:
    return f"{path}.{child}"


def _dns1035_errors(path: str, value: str) -> list[FieldError]:
    msgs = validate_dns1035_label(value)
    return [errors.invalid(path, value, ",".join(msgs))] if msgs else []


def validate_names(names: dict[str, Any], path: str) -> list[FieldError]:
    """``ValidateCustomResourceDefinitionNames`` (spec.names and status.acceptedNames)."""
    errs: list[FieldError] = []
    for key in ("plural", "singular"):
        value = names.get(key) or ""
        if value:
            errs.extend(_dns1035_errors(_p(path, key), value))
    for key in ("kind", "listKind"):
        value = names.get(key) or ""
        msgs = validate_dns1035_label(value.lower()) if value else []
        if msgs:
            errs.append(errors.invalid(_p(path, key), value, "may have mixed case, but should otherwise match: "
                                       + ",".join(msgs)))
    for i, short in enumerate(names.get("shortNames") or []):
        errs.extend(_dns1035_errors(f"{path}.shortNames[{i}]", str(short)))
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        errs.append(errors.invalid(_p(path, "listKind"), names["listKind"], "kind and listKind may not be the same"))
    for i, category in enumerate(names.get("categories") or []):
        errs.extend(_dns1035_errors(f"{path}.categories[{i}]", str(category)))
    return errs


def _has_schema_with(spec: dict[str, Any], pred: Any) -> bool:
    schemas = [(spec.get("validation") or {}).get("openAPIV3Schema")]
    schemas += [(v.get("schema") or {}).get("openAPIV3Schema") for v in spec.get("versions") or []]
    return any(isinstance(s, dict) and _walk_any(s, pred) for s in schemas)


def _walk_any(node: dict[str, Any], pred: Any) -> bool:
    if pred(node):
        return True
    children: list[Any] = [node.get("items"), node.get("not"), node.get("additionalProperties")]
    children += list((node.get("properties") or {}).values())
    for junctor in ("allOf", "anyOf", "oneOf"):
        children += node.get(junctor) or []
    return any(isinstance(c, dict) and _walk_any(c, pred) for c in children)


def _has_extensions(node: dict[str, Any]) -> bool:
    return any(node.get(k) for k in ("x-kubernetes-embedded-resource", "x-kubernetes-int-or-string",
                                     "x-kubernetes-list-map-keys", "x-kubernetes-validations")) or \
        node.get("x-kubernetes-preserve-unknown-fields") is not None or node.get("x-kubernetes-list-type") is not None


def _versions_validation(spec: dict[str, Any], opts: SchemaOptions, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    versions = spec.get("versions") or []
    top_sub = spec.get("subresources")
    per_version_sub = any(v.get("subresources") is not None for v in versions)
    for i, version in enumerate(versions):
        vpath = f"{path}.versions[{i}]"
        name = version.get("name") or ""
        msgs = validate_dns1035_label(name)
        if msgs:
            errs.append(errors.invalid(_p(vpath, "name"), name, ",".join(msgs)))
        sub = version.get("subresources") if per_version_sub else top_sub
        errs.extend(validate_deprecation_warning(version, vpath))
        errs.extend(validate_crd_schema(version.get("schema"), _has_status(sub), opts, _p(vpath, "schema")))
        errs.extend(validate_subresources(version.get("subresources"), _p(vpath, "subresources")))
        for j, col in enumerate(version.get("additionalPrinterColumns") or []):
            errs.extend(validate_printer_column(col or {}, f"{vpath}.additionalPrinterColumns[{j}]"))
        if version.get("selectableFields"):
            schema = version.get("schema") or spec.get("validation") or {}
            errs.extend(validate_selectable_fields(version["selectableFields"], schema.get("openAPIV3Schema"),
                                                   _p(vpath, "selectableFields")))
    return errs


def _has_status(sub: Any) -> bool:
    return isinstance(sub, dict) and sub.get("status") is not None


def validate_spec(spec: dict[str, Any], opts: SchemaOptions, require_recognized_review: bool,
                  require_openapi: bool, path: str = "spec") -> list[FieldError]:
    """``validateCustomResourceDefinitionSpec`` on the internal form of the spec."""
    errs: list[FieldError] = []
    group = spec.get("group") or ""
    if not group:
        errs.append(errors.required(_p(path, "group")))
    elif msgs := validate_dns1123_subdomain(group):
        errs.append(errors.invalid(_p(path, "group"), group, ",".join(msgs)))
    elif len(group.split(".")) < 2:
        errs.append(errors.invalid(_p(path, "group"), group, "should be a domain with at least one dot"))
    scope = spec.get("scope") or ""
    if not scope:
        errs.append(errors.required(_p(path, "scope")))
    elif scope not in ("Cluster", "Namespaced"):
        errs.append(errors.not_supported(_p(path, "scope"), scope, ["Cluster", "Namespaced"]))
    preserve = bool(spec.get("preserveUnknownFields"))
    versions = spec.get("versions") or []
    if require_openapi and not (spec.get("validation") or {}).get("openAPIV3Schema"):
        for i, version in enumerate(versions):
            if not (version.get("schema") or {}).get("openAPIV3Schema"):
                errs.append(errors.required(f"{path}.versions[{i}].schema.openAPIV3Schema", "schemas are required"))
    if _has_schema_with(spec, lambda n: n.get("default") is not None):
        opts = SchemaOptions(**{**opts.__dict__, "require_structural": True})
        if preserve:
            errs.append(errors.invalid(_p(path, "preserveUnknownFields"), True,
                                       "must be false in order to use defaults in the schema"))
    errs.extend(_versions_validation(spec, opts, path))
    names_seen: set[str] = set()
    unique = True
    for version in versions:
        name = version.get("name") or ""
        unique = unique and name not in names_seen
        names_seen.add(name)
    if spec.get("validation") is not None and any(v.get("schema") is not None for v in versions):
        errs.append(errors.forbidden(_p(path, "validation"),
                                     "top-level and per-version schemas are mutually exclusive"))
    shown = GoVersions(versions)
    if not unique:
        errs.append(errors.invalid(_p(path, "versions"), shown, "must contain unique version names"))
    if sum(1 for v in versions if v.get("storage")) != 1:
        errs.append(errors.invalid(_p(path, "versions"), shown,
                                   "must have exactly one version marked as storage version"))
    names = spec.get("names") or {}
    for key in ("plural", "singular", "kind", "listKind"):
        if not names.get(key):
            errs.append(errors.required(f"{path}.names.{key}"))
    errs.extend(validate_names(names, _p(path, "names")))
    status_anywhere = _has_status(spec.get("subresources")) or any(_has_status(v.get("subresources")) for v in versions)
    errs.extend(validate_crd_schema(spec.get("validation"), status_anywhere, opts, _p(path, "validation")))
    errs.extend(validate_subresources(spec.get("subresources"), _p(path, "subresources")))
    for i, col in enumerate(spec.get("additionalPrinterColumns") or []):
        errs.extend(validate_printer_column(col or {}, f"{path}.additionalPrinterColumns[{i}]"))
    conversion = spec.get("conversion")
    if isinstance(conversion, dict) and conversion.get("strategy") not in (None, "None") and preserve:
        errs.append(errors.invalid(_p(path, "conversion.strategy"), conversion.get("strategy"),
                                   "must be None if spec.preserveUnknownFields is true"))
    errs.extend(validate_conversion(conversion, require_recognized_review, _p(path, "conversion")))
    return errs


class GoVersions(GoRendered):
    """``%#v`` of ``[]apiextensions.CustomResourceDefinitionVersion`` is unreadable; kube prints it anyway.

    We print the short Go form for the names only, which is what users look at.
    """

    def __new__(cls, versions: list[dict[str, Any]]) -> GoVersions:
        inner = ", ".join(f'apiextensions.CustomResourceDefinitionVersion{{Name:"{v.get("name") or ""}", '
                          f'Served:{str(bool(v.get("served"))).lower()}, Storage:{str(bool(v.get("storage"))).lower()}'
                          "}" for v in versions)
        return super().__new__(cls, "[]apiextensions.CustomResourceDefinitionVersion{" + inner + "}")


def validate_stored_versions(stored: list[Any] | None, versions: list[dict[str, Any]], path: str) -> list[FieldError]:
    if not stored:
        return [errors.invalid(path, string_slice(None if stored is None else [], json_quote),
                               "must have at least one stored version")]
    errs: list[FieldError] = []
    remaining = {str(v): i for i, v in enumerate(stored)}
    for version in versions:
        name = version.get("name") or ""
        if version.get("storage") and name not in remaining:
            errs.append(errors.invalid(path, string_slice(stored, json_quote),
                                       "must have the storage version " + name))
        remaining.pop(name, None)
    for name, i in remaining.items():
        errs.append(errors.invalid(f"{path}[{i}]", name, f"missing from spec.versions; {name} was previously a storage "
                                   f"version, and must remain in spec.versions until a storage migration ensures no "
                                   f"data remains persisted in {name} and removes {name} from status.storedVersions"))
    return errs


def _protected_group(group: str) -> bool:
    return group in ("k8s.io", "kubernetes.io") or group.endswith((".k8s.io", ".kubernetes.io"))


def _approval_state(annotations: dict[str, Any]) -> tuple[str, str]:
    value = str(annotations.get(APPROVAL_ANNOTATION) or "")
    if not value:
        return "missing", f'protected groups must have approval annotation "{APPROVAL_ANNOTATION}", {_ENHANCEMENTS}'
    if value.startswith("unapproved"):
        return "bypassed", f"not approved: {value!r}"
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]+", value):
        return "approved", f"approved in {value}"
    return "invalid", (f'protected groups must have approval annotation "{APPROVAL_ANNOTATION}" with either a URL or '
                       f'a reason starting with "unapproved", {_ENHANCEMENTS}')


def _validate_api_approval(crd: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    if not _protected_group((crd.get("spec") or {}).get("group") or ""):
        return []
    annotations = (crd.get("metadata") or {}).get("annotations") or {}
    state, reason = _approval_state(annotations)
    if old is not None and _approval_state((old.get("metadata") or {}).get("annotations") or {})[0] == state:
        return []
    path = f"metadata.annotations[{APPROVAL_ANNOTATION}]"
    if state == "missing":
        return [errors.required(path, reason)]
    if state == "invalid":
        return [errors.invalid(path, annotations.get(APPROVAL_ANNOTATION), reason)]
    return []


def _validate_preserve_unknown_fields(crd: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    if old is not None and (old.get("spec") or {}).get("preserveUnknownFields"):
        return []
    if (crd.get("spec") or {}).get("preserveUnknownFields"):
        return [errors.invalid("spec.preserveUnknownFields", True, "cannot set to true, set "
                               "x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead")]
    return []


def _name_validator(spec: dict[str, Any]) -> Any:
    required = f"{(spec.get('names') or {}).get('plural') or ''}.{spec.get('group') or ''}"

    def check(name: str, prefix: bool) -> list[str]:
        msgs = name_is_dns_subdomain(name, prefix)
        if name != required:
            msgs.append('must be spec.names.plural+"."+spec.group')
        return msgs

    return check


def validate_crd_status(crd: dict[str, Any]) -> list[FieldError]:
    """``ValidateCustomResourceDefinitionStatus``: the accepted names."""
    return validate_names(((crd.get("status") or {}).get("acceptedNames")) or {}, "status.acceptedNames")


def _common(crd: dict[str, Any], old: dict[str, Any] | None, opts: SchemaOptions, require_review: bool,
            require_openapi: bool) -> tuple[dict[str, Any], list[FieldError], list[FieldError]]:
    """Spec errors, and the status/storedVersions/approval errors that Go reports after them."""
    crd = default_crd(copy.deepcopy(crd))
    spec = _internal_spec(crd.get("spec") or {})
    spec_errs = validate_spec(spec, opts, require_review, require_openapi)
    errs = validate_crd_status(crd)
    errs.extend(validate_stored_versions((crd.get("status") or {}).get("storedVersions"), spec.get("versions") or [],
                                         "status.storedVersions"))
    errs.extend(_validate_api_approval(crd, old))
    errs.extend(_validate_preserve_unknown_fields(crd, old))
    return spec, spec_errs, errs


def validate_crd(crd: dict[str, Any]) -> list[FieldError]:
    """``ValidateCustomResourceDefinition`` (create) for a v1 CRD given as a dict."""
    spec = crd.get("spec") or {}
    errs = validate_object_meta(crd.get("metadata") or {}, False, _name_validator(spec), "metadata")
    _, spec_errs, more = _common(crd, None, SchemaOptions(), True, True)
    return errs + spec_errs + more


def _established(crd: dict[str, Any]) -> bool:
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or [] if isinstance(c, dict))


def _old_options(old_spec: dict[str, Any]) -> tuple[SchemaOptions, bool, bool]:
    """What an update must satisfy: rules the old object already broke are not tightened."""
    def schemas() -> list[dict[str, Any]]:
        found = [(old_spec.get("validation") or {}).get("openAPIV3Schema")]
        found += [(v.get("schema") or {}).get("openAPIV3Schema") for v in old_spec.get("versions") or []]
        return [s for s in found if isinstance(s, dict)]

    old_schemas = schemas()
    valid_types = not _has_schema_with(old_spec, lambda n: bool(n.get("type")) and n.get("type") not in
                                       ("array", "boolean", "integer", "number", "object", "string"))
    non_atomic_set = _has_schema_with(old_spec, lambda n: n.get("x-kubernetes-list-type") == "set" and isinstance(
        n.get("items"), dict) and ((n["items"].get("type") == "array" and n["items"].get("x-kubernetes-list-type")
                                    not in (None, "atomic")) or (n["items"].get("type") == "object" and
                                                                 n["items"].get("x-kubernetes-map-type") != "atomic")))
    opts = SchemaOptions(require_valid_property_type=valid_types,
                         require_structural=all(is_structural(s) for s in old_schemas),
                         require_atomic_set_type=not non_atomic_set)
    conversion = old_spec.get("conversion") or {}
    old_review = conversion.get("conversionReviewVersions") or []
    require_review = not old_review or any(v in CONVERSION_REVIEW_VERSIONS for v in old_review)
    versions = old_spec.get("versions") or []
    require_openapi = bool((old_spec.get("validation") or {}).get("openAPIV3Schema")) or all(
        (v.get("schema") or {}).get("openAPIV3Schema") for v in versions)
    return opts, require_review, require_openapi


def validate_crd_update(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """``ValidateCustomResourceDefinitionUpdate`` (metadata update rules are the generic store's)."""
    old_spec = _internal_spec(default_crd(copy.deepcopy(old)).get("spec") or {})
    opts, require_review, require_openapi = _old_options(old_spec)
    spec, errs, rest = _common(new, old, opts, require_review, require_openapi)
    if _established(old):
        old_kind = (old_spec.get("names") or {}).get("kind")
        for key, old_value in (("scope", old_spec.get("scope")), ("names.kind", old_kind)):
            new_value = spec.get("scope") if key == "scope" else (spec.get("names") or {}).get("kind")
            if new_value != old_value:
                errs.append(errors.invalid(f"spec.{key}", field_value(new_value), "field is immutable"))
    for key, old_value, new_value in (("group", old_spec.get("group"), spec.get("group")),
                                      ("names.plural", (old_spec.get("names") or {}).get("plural"),
                                       (spec.get("names") or {}).get("plural"))):
        if new_value != old_value:
            errs.append(errors.invalid(f"spec.{key}", field_value(new_value), "field is immutable"))
    return errs + rest
