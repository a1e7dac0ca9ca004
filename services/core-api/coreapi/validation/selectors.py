"""``metav1.LabelSelector`` in specs: syntax (``ValidateLabelSelector``) and template matching.

Workload controllers own the pods their selector matches, so kube-apiserver rejects a selector
that does not parse, that is empty, or that does not select the pod template's own labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.labels import LabelSelector, LabelSelectorError, from_label_selector_object
from genericapi.apimachinery.validation_meta import (
    validate_label_value,
    validate_labels,
    validate_qualified_name,
)

from . import gorepr

_SET_OPERATORS = ("In", "NotIn")
_EXISTENCE_OPERATORS = ("Exists", "DoesNotExist")


def validate_label_selector(selector: Any, path: str, allow_invalid_values: bool = False) -> list[FieldError]:
    """``unversionedvalidation.ValidateLabelSelector``."""
    if not isinstance(selector, Mapping):
        return []
    errs: list[FieldError] = []
    match_labels = selector.get("matchLabels")
    if isinstance(match_labels, Mapping):
        errs.extend(validate_labels(match_labels, f"{path}.matchLabels"))
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        if isinstance(expr, Mapping):
            errs.extend(_validate_requirement(expr, f"{path}.matchExpressions[{i}]", allow_invalid_values))
    return errs


def _validate_requirement(expr: Mapping[str, Any], path: str, allow_invalid_values: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    operator = expr.get("operator") or ""
    values = expr.get("values") or []
    if operator in _SET_OPERATORS:
        if not values:
            errs.append(errors.required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif operator in _EXISTENCE_OPERATORS:
        if values:
            errs.append(errors.forbidden(f"{path}.values",
                                         "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    else:
        errs.append(errors.invalid(f"{path}.operator", operator, "not a valid selector operator"))
    key = str(expr.get("key") or "")
    errs.extend(errors.invalid(f"{path}.key", key, m) for m in validate_qualified_name(key))
    if not allow_invalid_values:
        for i, value in enumerate(values):
            if isinstance(value, str):
                errs.extend(errors.invalid(f"{path}.values[{i}]", value, m) for m in validate_label_value(value))
    return errs


def as_selector(selector: Any) -> LabelSelector | None:
    """``LabelSelectorAsSelector``, or None when it fails (nil selects nothing)."""
    try:
        return from_label_selector_object(selector if isinstance(selector, Mapping) else None)
    except (LabelSelectorError, TypeError):
        return None


def is_empty(selector: Any) -> bool:
    """A present selector with neither matchLabels nor matchExpressions."""
    return isinstance(selector, Mapping) and not selector.get("matchLabels") and not selector.get("matchExpressions")


def template_labels(template: Any) -> Mapping[str, Any] | None:
    meta = template.get("metadata") if isinstance(template, Mapping) else None
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else None


def selector_mismatch(labels: Mapping[str, Any] | None, path: str) -> FieldError:
    return errors.invalid(path, gorepr.labels_value(labels), "`selector` does not match template `labels`")


def matches(selector: LabelSelector, labels: Mapping[str, Any] | None) -> bool:
    return selector.matches({str(k): str(v) for k, v in (labels or {}).items()})
