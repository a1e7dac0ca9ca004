"""APIService validation, as kube-aggregator's ``ValidateAPIService`` and its update/status forms.

Pure functions over the object (a dict), returning field errors with kube's paths and texts.
The schema (types, unknown fields) is checked by the strategy before these run.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.validation_meta import (
    name_is_path_segment,
    validate_dns1035_label,
    validate_dns1123_subdomain,
    validate_object_meta,
)

from .types import ca_bundle, spec

MAX_GROUP_PRIORITY = 20000
MAX_VERSION_PRIORITY = 1000
_CONDITION_STATUSES = ("True", "False", "Unknown")


def _name_rule(required_name: str) -> Any:
    """The name must be a valid path segment and exactly ``spec.version + "." + spec.group``."""

    def check(name: str, prefix: bool) -> list[str]:
        failures = name_is_path_segment(name, prefix)
        if failures:
            return failures
        if name != required_name:
            return [f'must be `spec.version+"."+spec.group`: "{required_name}"']
        return []

    return check


def validate(obj: dict[str, Any]) -> list[FieldError]:
    """``ValidateAPIService``: metadata (name rule), group, version, priorities, TLS settings."""
    s = spec(obj)
    group = str(s.get("group") or "")
    version = str(s.get("version") or "")
    errs = validate_object_meta(obj.get("metadata") or {}, False, _name_rule(f"{version}.{group}"))
    if not group and version != "v1":
        errs.append(errors.required("spec.group", "only v1 may have an empty group and it better be legacy kube"))
    if group:
        errs.extend(errors.invalid("spec.group", group, m) for m in validate_dns1123_subdomain(group))
    errs.extend(errors.invalid("spec.version", version, m) for m in validate_dns1035_label(version))
    group_priority = s.get("groupPriorityMinimum") or 0
    if not 0 < group_priority <= MAX_GROUP_PRIORITY:
        errs.append(errors.invalid("spec.groupPriorityMinimum", group_priority,
                                   "must be positive and less than 20000"))
    version_priority = s.get("versionPriority") or 0
    if not 0 < version_priority <= MAX_VERSION_PRIORITY:
        errs.append(errors.invalid("spec.versionPriority", version_priority, "must be positive and less than 1000"))
    insecure = s.get("insecureSkipTLSVerify") is True
    bundle = ca_bundle(obj)
    service = s.get("service")
    if not isinstance(service, dict):
        if bundle:
            errs.append(errors.invalid("spec.caBundle", f"{len(bundle)} bytes",
                                       "local APIServices may not have a caBundle"))
        if insecure:
            errs.append(errors.invalid("spec.insecureSkipTLSVerify", True,
                                       "local APIServices may not have insecureSkipTLSVerify"))
        return errs
    if not service.get("namespace"):
        errs.append(errors.required("spec.service.namespace"))
    if not service.get("name"):
        errs.append(errors.required("spec.service.name"))
    if insecure and bundle:
        errs.append(errors.invalid("spec.insecureSkipTLSVerify", True, "may not be true if caBundle is present"))
    return errs


def validate_status(obj: dict[str, Any]) -> list[FieldError]:
    """``ValidateAPIServiceStatus``: every condition's status is True, False or Unknown."""
    errs: list[FieldError] = []
    for i, cond in enumerate((obj.get("status") or {}).get("conditions") or []):
        status = cond.get("status") if isinstance(cond, dict) else None
        if status not in _CONDITION_STATUSES:
            errs.append(errors.not_supported(f"status.conditions[{i}].status", status or "", _CONDITION_STATUSES))
    return errs
