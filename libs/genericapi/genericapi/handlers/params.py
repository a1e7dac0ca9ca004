"""Query parameters of the Kubernetes API, parsed and validated into registry options."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery import fields, labels
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry.options import DeleteOptions, ListOptions, Predicate
from genericapi.registry.selection import selection_predicate


def flag(params: Mapping[str, str], name: str) -> bool:
    """A boolean query parameter as kube's conversion reads it: absent is false, ``0`` and
    ``false`` (any case) are false, anything else (``watch``, ``watch=``, ``watch=yes``) is true."""
    value = params.get(name)
    if value is None:
        return False
    return value != "0" and value.lower() != "false"


def int_param(params: Mapping[str, str], name: str) -> int | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    # kube decodes query parameters with Go's strconv.ParseInt(value, 10, 64) and answers its
    # error as a 400.
    digits = value[1:] if value[:1] in "+-" else value
    if not (digits.isascii() and digits.isdigit()):
        raise apierrors.bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax')
    number = int(value) if len(digits) <= 20 else 2**64
    if not -(2**63) <= number <= 2**63 - 1:
        raise apierrors.bad_request(f'strconv.ParseInt: parsing "{value}": value out of range')
    return number


def lookup(params: Mapping[str, str]) -> Mapping[str, str]:
    """The query's single values by name, for lookups that mostly miss (``pretty``, ``dryRun``,
    ``fieldManager``, ... on a plain create or GET): Starlette's ``QueryParams.get`` is
    ``Mapping.get``, which raises and catches a ``KeyError`` for every absent name; its own dict
    (each name's last value, what ``QueryParams[name]`` answers) answers a miss without one.
    Anything else is returned as it is."""
    own = getattr(params, "_dict", None)
    return own if type(own) is dict else params


#: The options kind kube-apiserver validates a write's query against, by HTTP method.
OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions",
                "DELETE": "DeleteOptions"}


def dry_run(params: Mapping[str, str], options_kind: str = "CreateOptions") -> bool:
    if "dryRun" not in params:  # most writes: no list to build or check
        return False
    values = _query_values(params, "dryRun")
    errs = _dry_run_errors(values)
    if errs:
        raise apierrors.invalid_object("meta.k8s.io", options_kind, "", errs)
    return bool(values)


def _query_values(params: Mapping[str, str], name: str) -> list[str]:
    if hasattr(params, "getlist"):
        return list(params.getlist(name))
    return [params[name]] if name in params else []


def _dry_run_errors(values: Any) -> list[apierrors.FieldError]:
    """``ValidateDryRun``: only ``All``, the value shown as Go prints a []string."""
    if isinstance(values, list) and all(v == "All" for v in values):
        return []
    shown = values if not isinstance(values, list) else apierrors.GoRendered(
        "[]string{" + ", ".join(orjson.dumps(v).decode() for v in values) + "}")
    return [apierrors.FieldError("FieldValueNotSupported", "dryRun", 'supported values: "All"', shown, True)]


FIELD_VALIDATION = ("Ignore", "Warn", "Strict")


def field_validation(params: Mapping[str, str], options_kind: str = "CreateOptions") -> str:
    """The fieldValidation directive (default Warn); values are case-sensitive as in kube."""
    value = params.get("fieldValidation", "")
    if not value:
        return "Warn"
    if value in FIELD_VALIDATION:
        return value
    raise apierrors.invalid_object("meta.k8s.io", options_kind, "", [
        apierrors.not_supported("fieldValidation", value, ["", *sorted(FIELD_VALIDATION)])])


def list_options(info: ResourceInfo, params: Mapping[str, str], name: str = "") -> ListOptions:
    """ListOptions from query parameters; ``name`` restricts to one object (legacy watch path)."""
    selector: labels.LabelSelector | None = None
    label_text = params.get("labelSelector", "")
    if label_text:
        try:
            selector = labels.parse_label_selector(label_text)
        except labels.LabelSelectorError as err:
            raise apierrors.bad_request(str(err)) from None
    field_text = params.get("fieldSelector", "")
    if name:
        field_text = f"metadata.name={name}" + ("," + field_text if field_text else "")
    fsel: fields.FieldSelector | None = None
    if field_text:
        try:
            parsed = fields.parse_field_selector(field_text)
        except fields.FieldSelectorError as err:
            raise apierrors.bad_request(str(err)) from None
        if parsed.requirements:
            fsel = fields.convert_field_selector(info.group, info.version, info.plural, parsed)
    # Evaluated on the watch cache's attributes where it can (registry/selection.py).
    predicate: Predicate | None = selection_predicate(info.group, info.plural, info.namespaced, selector, fsel)
    filtered = predicate is not None
    limit = int_param(params, "limit") or 0
    if limit < 0:
        limit = 0
    send_initial: bool | None = None
    if "sendInitialEvents" in params:
        send_initial = flag(params, "sendInitialEvents")
    return ListOptions(
        predicate=predicate,
        filtered=filtered,
        resource_version=params.get("resourceVersion", ""),
        resource_version_match=params.get("resourceVersionMatch", ""),
        limit=limit,
        continue_token=params.get("continue", ""),
        allow_bookmarks=flag(params, "allowWatchBookmarks"),
        send_initial_events=send_initial,
        timeout_seconds=int_param(params, "timeoutSeconds"),
    )


def delete_options(params: Mapping[str, str], body: dict[str, Any] | None) -> DeleteOptions:
    """DeleteOptions from the body when one was sent, else from the query (never both, as k8s)."""
    if body is not None:
        pre = body.get("preconditions") or {}
        dry_values = body.get("dryRun") or []
        opts = DeleteOptions(
            precondition_uid=pre.get("uid"),
            precondition_rv=pre.get("resourceVersion"),
            propagation_policy=body.get("propagationPolicy"),
            grace_period_seconds=body.get("gracePeriodSeconds"),
            orphan_dependents=body.get("orphanDependents"),
        )
    else:
        dry_values = _query_values(params, "dryRun")
        opts = DeleteOptions(
            propagation_policy=params.get("propagationPolicy"),
            grace_period_seconds=int_param(params, "gracePeriodSeconds"),
            orphan_dependents=flag(params, "orphanDependents") if "orphanDependents" in params else None,
        )
    errs: list[apierrors.FieldError] = []
    if opts.propagation_policy is not None and opts.orphan_dependents is not None:
        errs.append(apierrors.invalid("propagationPolicy", opts.propagation_policy,
                                      "orphanDependents and deletionPropagation cannot be both set"))
    if opts.propagation_policy not in (None, "Orphan", "Background", "Foreground"):
        errs.append(apierrors.not_supported("propagationPolicy", opts.propagation_policy,
                                            ["Foreground", "Background", "Orphan", "nil"]))
    errs.extend(_dry_run_errors(dry_values))
    if errs:
        raise apierrors.invalid_object("meta.k8s.io", "DeleteOptions", "", errs)
    opts.dry_run = bool(dry_values)
    # A negative grace period means one second on the delete path (rest.BeforeDelete).
    if isinstance(opts.grace_period_seconds, int) and opts.grace_period_seconds < 0:
        opts.grace_period_seconds = 1
    return opts
