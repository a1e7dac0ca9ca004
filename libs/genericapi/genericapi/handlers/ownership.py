"""Who a write is by: the ``fieldManager`` query parameter, else the User-Agent prefix.

kube-apiserver names the manager of every write (``managerOrUserAgent``) and validates the
parameter (``ValidateFieldManager``: at most 128 bytes, printable characters only) against
the write's options kind.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import Request

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.fieldmanager.managers import manager_from_user_agent
from genericapi.registry.fieldtracking import Writer

from .body import header
from .params import lookup

_MAX_MANAGER = 128


def field_manager_errors(value: str, path: str = "fieldManager") -> list[apierrors.FieldError]:
    errs: list[apierrors.FieldError] = []
    if len(value.encode()) > _MAX_MANAGER:
        errs.append(apierrors.too_long(path, _MAX_MANAGER))
    for i, ch in enumerate(value):
        if not ch.isprintable():
            errs.append(apierrors.invalid(path, value, f"invalid character U+{ord(ch):04X} (at position {i})"))
    return errs


def field_manager(params: Mapping[str, str], options_kind: str) -> str:
    value = params.get("fieldManager", "")
    if not value:
        return value
    errs = field_manager_errors(value)
    if errs:
        raise apierrors.invalid_object("meta.k8s.io", options_kind, "", errs)
    return value


def writer_for(request: Request, options_kind: str, subresource: str = "", *, recorded: bool = False) -> Writer:
    manager = field_manager(lookup(request.query_params), options_kind)
    if not manager:
        manager = manager_from_user_agent(header(request, b"user-agent") or "")
    return Writer(manager, subresource, recorded)
