"""Per-version parts of a CRD: printer columns, subresources, selectable fields, conversion webhook.

Split from :mod:`extensionsapi.crdvalidation` (same checks, same kube-apiserver messages): these are
the leaf validators that do not depend on the schema machinery beyond resolving a field path.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.gofmt import json_quote, string_slice
from genericapi.apimachinery.validation_meta import validate_dns1035_label, validate_dns1123_subdomain

from .crdvalidation_schema import resolve_field_path

PRINTER_COLUMN_TYPES = ["boolean", "date", "integer", "number", "string"]
PRINTER_COLUMN_FORMATS = ["byte", "date", "date-time", "double", "float", "int32", "int64", "password"]
CONVERSION_REVIEW_VERSIONS = ["v1", "v1beta1"]
MAX_SELECTABLE_FIELDS = 8
_WEBHOOK_FORM = "; desired format: https://host[/path]"


def _p(path: str, child: str) -> str:
    return f"{path}.{child}"


def _simple_json_path(value: str, path: str) -> list[FieldError]:
    if not value:
        return [errors.invalid(path, value, "must not be empty")]
    if value[0] != ".":
        return [errors.invalid(path, value, "must be a simple json path starting with .")]
    return []


def validate_printer_column(col: dict[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not col.get("name"):
        errs.append(errors.required(_p(path, "name")))
    typ = col.get("type") or ""
    detail = "must be one of " + ",".join(PRINTER_COLUMN_TYPES)
    if not typ:
        errs.append(errors.required(_p(path, "type"), detail))
    elif typ not in PRINTER_COLUMN_TYPES:
        errs.append(errors.invalid(_p(path, "type"), typ, detail))
    fmt = col.get("format") or ""
    if fmt and fmt not in PRINTER_COLUMN_FORMATS:
        errs.append(errors.invalid(_p(path, "format"), fmt, "must be one of " + ",".join(PRINTER_COLUMN_FORMATS)))
    json_path = col.get("jsonPath") or ""
    if not json_path:
        errs.append(errors.required(_p(path, "JSONPath")))
    else:
        errs.extend(_simple_json_path(json_path, _p(path, "JSONPath")))
    return errs


def validate_subresources(sub: dict[str, Any] | None, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    scale = (sub or {}).get("scale")
    if not isinstance(scale, dict):
        return errs
    for key, prefixes, where in (("specReplicasPath", (".spec.",), ".spec"),
                                 ("statusReplicasPath", (".status.",), ".status")):
        value = scale.get(key) or ""
        fpath = _p(path, f"scale.{key}")
        if not value:
            errs.append(errors.required(fpath))
            continue
        bad = _simple_json_path(value, fpath)
        if bad:
            errs.extend(bad)
        elif not value.startswith(prefixes):
            errs.append(errors.invalid(fpath, value, f"should be a json path under {where}"))
    selector = scale.get("labelSelectorPath")
    if selector:
        fpath = _p(path, "scale.labelSelectorPath")
        bad = _simple_json_path(selector, fpath)
        if bad:
            errs.extend(bad)
        elif not selector.startswith((".spec.", ".status.")):
            errs.append(errors.invalid(fpath, selector, "should be a json path under either .spec or .status"))
    return errs


def validate_selectable_fields(fields: list[Any], schema: dict[str, Any] | None, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, entry in enumerate(fields):
        ipath = f"{path}[{i}].jsonPath"
        json_path = (entry or {}).get("jsonPath") or "" if isinstance(entry, dict) else ""
        if not json_path:
            errs.append(errors.required(ipath))
            continue
        node = resolve_field_path(schema or {}, json_path, allow_index=False) if schema else None
        if node is None:
            errs.append(errors.invalid(ipath, json_path, "is an invalid path: does not refer to a valid field"))
            continue
        if json_path.startswith(".metadata") or json_path.startswith("['metadata']"):
            errs.append(errors.invalid(ipath, json_path, "must not point to fields in metadata"))
        if node.get("type") not in ("string", "boolean", "integer"):
            errs.append(errors.invalid(ipath, json_path, "must point to a field of type string, boolean or integer. "
                                       "Enum string fields and strings with formats are allowed."))
        if json_path in seen:
            errs.append(errors.duplicate(ipath, json_path))
        seen.add(json_path)
    if len(seen) > MAX_SELECTABLE_FIELDS:
        errs.append(errors.too_many(path, len(seen), MAX_SELECTABLE_FIELDS))
    return errs


def validate_deprecation_warning(version: dict[str, Any], path: str) -> list[FieldError]:
    warning = version.get("deprecationWarning")
    msgs: list[str] = []
    if not version.get("deprecated") and warning is not None:
        msgs.append("can only be set for deprecated versions")
    elif isinstance(warning, str):
        if len(warning.encode()) > 256:
            msgs.append("must be <= 256 characters long")
        if not warning:
            msgs.append("must not be an empty string")
        for i, ch in enumerate(warning):
            if not ch.isprintable():
                msgs.append(f"must only contain printable UTF-8 characters; non-printable character found at index "
                            f"{len(warning[:i].encode())}")
                break
    return [errors.invalid(_p(path, "deprecationWarning"), warning, m) for m in msgs]


def _webhook_url(url: str, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return [errors.required(path, f"url must be a valid URL: {exc}{_WEBHOOK_FORM}")]
    if parts.scheme != "https":
        errs.append(errors.invalid(path, parts.scheme, "'https' is the only allowed URL scheme" + _WEBHOOK_FORM))
    host = parts.netloc.rsplit("@", 1)[-1]
    if not host:
        errs.append(errors.invalid(path, host, "host must be specified" + _WEBHOOK_FORM))
    if "@" in parts.netloc:
        errs.append(errors.invalid(path, parts.netloc.rsplit("@", 1)[0],
                                   "user information is not permitted in the URL"))
    if parts.fragment:
        errs.append(errors.invalid(path, parts.fragment, "fragments are not permitted in the URL"))
    if parts.query:
        errs.append(errors.invalid(path, parts.query, "query parameters are not permitted in the URL"))
    return errs


def _webhook_service(service: dict[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not service.get("name"):
        errs.append(errors.required(_p(path, "name"), "service name is required"))
    if not service.get("namespace"):
        errs.append(errors.required(_p(path, "namespace"), "service namespace is required"))
    port = service.get("port", 443)
    if not isinstance(port, int) or not 1 <= port <= 65535:
        errs.append(errors.invalid(_p(path, "port"), port, "port is not valid: must be between 1 and 65535, inclusive"))
    url_path = service.get("path")
    if url_path is None or url_path in ("", "/"):
        return errs
    if url_path == "//":
        return [*errs, errors.invalid(_p(path, "path"), url_path, "segment[0] may not be empty")]
    if not url_path.startswith("/"):
        errs.append(errors.invalid(_p(path, "path"), url_path, "must start with a '/'"))
    check = url_path[1:]
    if check.endswith("/"):
        check = check[:-1]
    for i, step in enumerate(check.split("/")):
        if not step:
            errs.append(errors.invalid(_p(path, "path"), url_path, f"segment[{i}] may not be empty"))
            continue
        errs.extend(errors.invalid(_p(path, "path"), url_path, f"segment[{i}]: {m}")
                    for m in validate_dns1123_subdomain(step))
    return errs


def validate_conversion(conversion: dict[str, Any] | None, require_recognized: bool, path: str) -> list[FieldError]:
    if not isinstance(conversion, dict):
        return []
    errs: list[FieldError] = []
    strategy = conversion.get("strategy") or ""
    if not strategy:
        errs.append(errors.required(_p(path, "strategy")))
    elif strategy not in ("None", "Webhook"):
        errs.append(errors.not_supported(_p(path, "strategy"), strategy, ["None", "Webhook"]))
    config = conversion.get("webhookClientConfig")
    review_versions = conversion.get("conversionReviewVersions")
    if strategy == "Webhook":
        cpath = _p(path, "webhookClientConfig")
        if not isinstance(config, dict):
            errs.append(errors.required(cpath, "required when strategy is set to Webhook"))
        elif (config.get("url") is None) == (config.get("service") is None):
            errs.append(errors.required(cpath, "exactly one of url or service is required"))
        elif config.get("url") is not None:
            errs.extend(_webhook_url(str(config["url"]), _p(cpath, "url")))
        else:
            errs.extend(_webhook_service(config["service"] or {}, _p(cpath, "service")))
        errs.extend(_conversion_review_versions(review_versions or [], require_recognized,
                                                _p(path, "conversionReviewVersions")))
    else:
        if config is not None:
            errs.append(errors.forbidden(_p(path, "webhookClientConfig"),
                                         "should not be set when strategy is not set to Webhook"))
        if review_versions:
            errs.append(errors.forbidden(_p(path, "conversionReviewVersions"),
                                         "should not be set when strategy is not set to Webhook"))
    return errs


def _conversion_review_versions(versions: list[Any], require_recognized: bool, path: str) -> list[FieldError]:
    if not versions:
        return [errors.required(path)]
    errs: list[FieldError] = []
    seen: set[str] = set()
    recognized = False
    for i, version in enumerate(versions):
        version = str(version)
        if version in seen:
            errs.append(errors.invalid(f"{path}[{i}]", version, "duplicate version"))
            continue
        seen.add(version)
        errs.extend(errors.invalid(f"{path}[{i}]", version, m) for m in validate_dns1035_label(version))
        recognized = recognized or version in CONVERSION_REVIEW_VERSIONS
    if require_recognized and not recognized:
        errs.append(errors.invalid(path, string_slice(versions, json_quote),
                                   "must include at least one of " + ", ".join(CONVERSION_REVIEW_VERSIONS)))
    return errs
