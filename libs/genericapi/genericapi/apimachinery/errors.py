"""API errors: every failure a client sees is a ``metav1.Status`` built here.

This is the API error vocabulary; storage has its own (``genericapi.storage.errors``) and the
registry translates between them in one place. Messages follow kube-apiserver's wording
(``k8s.io/apimachinery/pkg/api/errors``) because clients and tests match on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from genericapi.apimachinery.gofmt import GoRendered as GoRendered
from genericapi.apimachinery.gofmt import json_quote


def _quote(value: Any) -> str:
    """Render a value the way Go's ``%#v``-ish field error formatting does for common types."""
    if isinstance(value, GoRendered):
        return str(value)
    if isinstance(value, str):
        return json_quote(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


@dataclass(frozen=True)
class FieldError:
    """One bad field, as ``k8s.io/apimachinery/pkg/util/validation/field.Error``."""

    reason: str  # FieldValueRequired, FieldValueInvalid, FieldValueNotSupported, ...
    field: str  # "spec.template.spec.containers[0].name"
    detail: str = ""
    value: Any = None
    has_value: bool = False

    _TYPES = {
        "FieldValueNotFound": "Not found",
        "FieldValueRequired": "Required value",
        "FieldValueDuplicate": "Duplicate value",
        "FieldValueInvalid": "Invalid value",
        "FieldValueNotSupported": "Unsupported value",
        "FieldValueForbidden": "Forbidden",
        "FieldValueTooLong": "Too long",
        "FieldValueTooMany": "Too many",
        "InternalError": "Internal error",
        "FieldValueTypeInvalid": "Invalid value",
    }

    def body(self) -> str:
        """The message without the field path (``ErrorBody`` in Go)."""
        kind = self._TYPES.get(self.reason, self.reason)
        if self.reason in ("FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong",
                           "InternalError") or not self.has_value:
            return f"{kind}: {self.detail}" if self.detail else kind
        text = f"{kind}: {_quote(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def required(path: str, detail: str = "") -> FieldError:
    return FieldError("FieldValueRequired", path, detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", path, detail, value, True)


def not_supported(path: str, value: Any, supported: Sequence[str]) -> FieldError:
    detail = "supported values: " + ", ".join(_quote(s) for s in supported) if supported else ""
    return FieldError("FieldValueNotSupported", path, detail, value, True)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", path, detail)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError("FieldValueDuplicate", path, "", value, True)


def too_long(path: str, max_length: int) -> FieldError:
    return FieldError("FieldValueTooLong", path, f"must have at most {max_length} bytes")


@dataclass
class APIError(Exception):
    """An error with the full ``metav1.Status`` the client receives."""

    code: int
    reason: str
    message: str
    details: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)
        # kube's ErrorNegotiated: a Status that asks the client to wait says so in Retry-After too.
        retry = (self.details or {}).get("retryAfterSeconds")
        if isinstance(retry, int) and retry > 0 and "Retry-After" not in self.headers:
            self.headers = {**self.headers, "Retry-After": str(retry)}

    def status(self) -> dict[str, Any]:
        """The Status object, keys in kube-apiserver's order."""
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # omitempty: a plain Go error (StatusReasonUnknown) has none
            out["reason"] = self.reason
        if self.details is not None:
            out["details"] = self.details
        out["code"] = self.code
        return out

    def body(self) -> bytes:
        """Serialized Status, ending in a newline as kube-apiserver's encoder writes it."""
        return orjson.dumps(self.status()) + b"\n"


def _details(name: str, group: str, kind: str, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if name:
        d["name"] = name
    if group:
        d["group"] = group
    d["kind"] = kind
    d.update(extra)
    return d


def _qualified(group: str, resource: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(group: str, resource: str, name: str) -> APIError:
    return APIError(404, "NotFound", f'{_qualified(group, resource)} "{name}" not found',
                    _details(name, group, resource))


def already_exists(group: str, resource: str, name: str) -> APIError:
    return APIError(409, "AlreadyExists", f'{_qualified(group, resource)} "{name}" already exists',
                    _details(name, group, resource))


def generate_name_conflict(group: str, resource: str, name: str) -> APIError:
    msg = (f'{_qualified(group, resource)} "{name}" already exists, the server was not able to '
           "generate a unique name for the object")
    return APIError(409, "AlreadyExists", msg, _details(name, group, resource, retryAfterSeconds=1))


def conflict(group: str, resource: str, name: str, why: str) -> APIError:
    msg = f'Operation cannot be fulfilled on {_qualified(group, resource)} "{name}": {why}'
    return APIError(409, "Conflict", msg, _details(name, group, resource))


OPTIMISTIC_LOCK_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def optimistic_lock(group: str, resource: str, name: str) -> APIError:
    return conflict(group, resource, name, OPTIMISTIC_LOCK_MESSAGE)


def invalid_object(group: str, kind: str, name: str, errors: Iterable[FieldError]) -> APIError:
    errs = list(errors)
    messages = list(dict.fromkeys(str(e) for e in errs))  # the aggregate drops repeated messages
    qualified = f"{kind}.{group}" if group else kind
    msg = f'{qualified} "{name}" is invalid'
    if len(messages) == 1:
        msg += f": {messages[0]}"
    elif messages:
        msg += ": [" + ", ".join(messages) + "]"
    causes = [{"reason": e.reason, "message": e.body(), "field": e.field} for e in errs]
    return APIError(422, "Invalid", msg, _details(name, group, kind, causes=causes))


def bad_request(message: str) -> APIError:
    return APIError(400, "BadRequest", message)


def forbidden_error(group: str, resource: str, name: str, why: str) -> APIError:
    res = _qualified(group, resource)
    if name:
        msg = f'{res} "{name}" is forbidden: {why}'
    else:
        msg = f"{res} is forbidden: {why}"
    return APIError(403, "Forbidden", msg, _details(name, group, resource))


def method_not_supported(group: str, resource: str, verb: str) -> APIError:
    return APIError(405, "MethodNotAllowed",
                    f"{verb} is not supported on resources of kind \"{_qualified(group, resource)}\"",
                    _details("", group, resource))


def unsupported_media_type(content_type: str) -> APIError:
    return APIError(415, "UnsupportedMediaType",
                    'the body of the request was in an unknown format - accepted media types include: '
                    'application/json, application/yaml, application/vnd.kubernetes.protobuf'
                    if not content_type else
                    f"the body of the request was in an unknown format - accepted media types include: "
                    f"application/json, application/yaml (got {content_type})")


def not_acceptable(accepted: Sequence[str]) -> APIError:
    return APIError(406, "NotAcceptable",
                    "only the following media types are accepted: " + ", ".join(accepted))


def request_entity_too_large(limit: int) -> APIError:
    return APIError(413, "RequestEntityTooLarge",
                    f"Request entity too large: limit is {limit}")


def resource_expired(message: str) -> APIError:
    return APIError(410, "Expired", message)


def gone(message: str) -> APIError:
    return APIError(410, "Gone", message)


def timeout(message: str, retry_after: int = 0) -> APIError:
    return APIError(504, "Timeout", message, {"retryAfterSeconds": retry_after} if retry_after else None)


def server_timeout(group: str, resource: str, operation: str, retry_after: int) -> APIError:
    """``NewServerTimeout``: the operation could not complete now (storage unreachable)."""
    return APIError(500, "ServerTimeout",
                    f"The {operation} operation against {_qualified(group, resource)} could not be completed at "
                    "this time, please try again.",
                    _details(operation, group, resource, retryAfterSeconds=retry_after))


def service_unavailable(message: str) -> APIError:
    return APIError(503, "ServiceUnavailable", message)


def internal_error(message: str) -> APIError:
    return APIError(500, "InternalError", f"Internal error occurred: {message}",
                    {"causes": [{"message": message}]})


def unauthorized(message: str = "Unauthorized") -> APIError:
    return APIError(401, "Unauthorized", message)


def path_not_found() -> APIError:
    """What the last link of the delegation chain answers for a path nobody serves."""
    return APIError(404, "NotFound", "the server could not find the requested resource",
                    {})


def too_many_requests(message: str, retry_after: int = 1) -> APIError:
    return APIError(429, "TooManyRequests", message, {"retryAfterSeconds": retry_after},
                    {"Retry-After": str(retry_after)})


def too_long_value(path: str, max_length: int) -> FieldError:
    """``field.TooLong`` as apimachinery 1.33 words it (the value itself is never shown)."""
    if max_length < 0:
        return FieldError("FieldValueTooLong", path, "value is too long")
    unit = "byte" if max_length == 1 else "bytes"
    return FieldError("FieldValueTooLong", path, f"may not be more than {max_length} {unit}")


def too_many(path: str, actual: int, max_items: int) -> FieldError:
    """``field.TooMany``: ``Too many: 5: must have at most 3 items``."""
    if max_items >= 0:
        detail = f"must have at most {max_items} {'item' if max_items == 1 else 'items'}"
    else:
        detail = "has too many items"
    if actual >= 0:
        return FieldError("FieldValueTooMany", path, detail, actual, True)
    return FieldError("FieldValueTooMany", path, detail)


def type_invalid(path: str, value: Any, detail: str) -> FieldError:
    """``field.TypeInvalid``: printed like Invalid value, reason ``FieldValueTypeInvalid``."""
    return FieldError("FieldValueTypeInvalid", path, detail, value, True)


def unknown_error(message: str, code: int = 500) -> APIError:
    """A plain Go error reaching the client (``ErrorToAPIStatus``): 500, no reason, the error text
    as message (e.g. a failed CR conversion: ``conversion for ... failed: ...``)."""
    return APIError(code, "", message)
