"""Name, label, annotation and ObjectMeta validation with apimachinery's exact messages.

Every kind validates its metadata the same way (``ValidateObjectMeta``) except for how its
name is checked: most use DNS-1123 subdomains, namespaces DNS-1123 labels, services DNS-1035
labels and RBAC objects mere path segments. Clients show these messages verbatim, so they are
reproduced character for character (including Go's double space in regex examples).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError

#: A name validator: (name, is_generate_name_prefix) -> error messages.
NameValidator = Callable[[str, bool], list[str]]

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
DNS1035_LABEL_MAX = 63
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"

_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = re.compile(_DNS1035_LABEL_FMT)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)

_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                       "end with an alphanumeric character")


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """apimachinery's ``RegexError`` wording."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    text = message + " (e.g. " + " or ".join(f"'{e}', " for e in examples)
    return text + f"regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


EMPTY_ERROR = "must be non-empty"


def validate_dns1123_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        errs.append(regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
            "and must start and end with an alphanumeric character",
            _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def validate_dns1123_subdomain(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
            "or '.', and must start and end with an alphanumeric character",
            _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def validate_dns1035_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > DNS1035_LABEL_MAX:
        errs.append(max_len_error(DNS1035_LABEL_MAX))
    if not _DNS1035_LABEL_RE.fullmatch(value):
        errs.append(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
            "an alphabetic character, and end with an alphanumeric character",
            _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def validate_qualified_name(value: str) -> list[str]:
    """``IsQualifiedName``: ``[prefix/]name`` with a DNS subdomain prefix."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + EMPTY_ERROR)
        else:
            errs.extend("prefix part " + m for m in validate_dns1123_subdomain(prefix))
    else:
        return ["a qualified name " + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT,
                                                  "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part " + EMPTY_ERROR)
    elif len(name) > QUALIFIED_NAME_MAX:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append("name part " + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT,
                                               "MyName", "my.name", "123-abc"))
    return errs


validate_label_key = validate_qualified_name


def validate_label_value(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > LABEL_VALUE_MAX:
        errs.append(max_len_error(LABEL_VALUE_MAX))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
            "or '.', and must start and end with an alphanumeric character",
            _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _mask_trailing_dash(name: str) -> str:
    """A generateName prefix may end in '-': check it as if a suffix followed."""
    return name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    return validate_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    return validate_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool) -> list[str]:
    return validate_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def name_is_path_segment(name: str, prefix: bool) -> list[str]:
    """``path.ValidatePathSegmentName``: used by the RBAC kinds."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]


def validate_labels(labels: Mapping[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key, value in labels.items():
        errs.extend(errors.invalid(path, key, m) for m in validate_qualified_name(key))
        if isinstance(value, str):
            errs.extend(errors.invalid(path, value, m) for m in validate_label_value(value))
    return errs


def validate_annotations(annotations: Mapping[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    total = 0
    for key, value in annotations.items():
        errs.extend(errors.invalid(path, key, m) for m in validate_qualified_name(key.lower()))
        total += len(key.encode()) + (len(value.encode()) if isinstance(value, str) else 0)
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(errors.too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs


def validate_finalizers(finalizers: list[Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for finalizer in finalizers:
        if isinstance(finalizer, str):
            errs.extend(errors.invalid(path, finalizer, m) for m in validate_qualified_name(finalizer))
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errs.append(errors.invalid(path, finalizers,
                                   "finalizer orphan and foregroundDeletion cannot be both set"))
    return errs


def validate_object_meta(meta: Mapping[str, Any], namespaced: bool, name_validator: NameValidator,
                         path: str = "metadata") -> list[FieldError]:
    """``ValidateObjectMeta``: the metadata checks every kind shares, in Go's order."""
    errs: list[FieldError] = []
    generate_name = meta.get("generateName") or ""
    name = meta.get("name") or ""
    if generate_name:
        errs.extend(errors.invalid(f"{path}.generateName", generate_name, m)
                    for m in name_validator(generate_name, True))
    if not name:
        # The registry fills name from generateName before validating; accept either here.
        if not generate_name:
            errs.append(errors.required(f"{path}.name", "name or generateName is required"))
    else:
        errs.extend(errors.invalid(f"{path}.name", name, m) for m in name_validator(name, False))
    namespace = meta.get("namespace") or ""
    if namespaced:
        if not namespace:
            errs.append(errors.required(f"{path}.namespace"))
        else:
            errs.extend(errors.invalid(f"{path}.namespace", namespace, m)
                        for m in name_is_dns_label(namespace, False))
    elif namespace:
        errs.append(errors.forbidden(f"{path}.namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        errs.append(errors.invalid(f"{path}.generation", generation,
                                   "must be greater than or equal to 0"))
    labels = meta.get("labels")  # absent on most objects: no ABC instance check for None
    if labels is not None and isinstance(labels, Mapping):
        errs.extend(validate_labels(labels, f"{path}.labels"))
    annotations = meta.get("annotations")
    if annotations is not None and isinstance(annotations, Mapping):
        errs.extend(validate_annotations(annotations, f"{path}.annotations"))
    finalizers = meta.get("finalizers")
    if isinstance(finalizers, list):
        errs.extend(validate_finalizers(finalizers, f"{path}.finalizers"))
    refs = meta.get("ownerReferences")
    if isinstance(refs, list):
        errs.extend(validate_owner_references(refs, f"{path}.ownerReferences"))
    return errs


def validate_owner_references(refs: list[Any], path: str) -> list[FieldError]:
    """``ValidateOwnerReferences``: every field set, no Event owner, one controller at most."""
    errs: list[FieldError] = []
    controller = ""
    for ref in refs:
        if not isinstance(ref, Mapping):
            continue
        api_version, kind = str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")
        group, _, version = api_version.rpartition("/")
        if not version:
            errs.append(errors.invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        if not kind:
            errs.append(errors.invalid(f"{path}.kind", kind, "kind must not be empty"))
        for key in ("name", "uid"):
            if not ref.get(key):
                errs.append(errors.invalid(f"{path}.{key}", str(ref.get(key) or ""), f"{key} must not be empty"))
        if (group, version, kind) == ("", "v1", "Event"):
            errs.append(errors.invalid(path, dict(ref), "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            current = f"{kind}/{ref.get('name') or ''}"
            if controller:
                errs.append(errors.invalid(path, list(refs), "Only one reference can have Controller set to true. "
                                           f"Found \"true\" in references for {controller} and {current}"))
            else:
                controller = current
    return errs
