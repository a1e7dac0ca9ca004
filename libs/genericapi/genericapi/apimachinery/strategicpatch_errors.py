"""Errors of strategic merge patch, worded and classified like apimachinery's.

kube-apiserver turns a handful of well-known patch format errors into 400 BadRequest, two
into 422, and lets every other merge failure surface as a 500 whose message is the raw Go
error text. Messages embed values printed with Go's ``%v``, so this module also renders
JSON values the way ``fmt`` does (``map[a:1 b:[x y]]``).
"""

from __future__ import annotations

import math
from typing import Any

from genericapi.apimachinery import errors, gofmt

BAD_JSON_DOC = "invalid JSON document"
NO_LIST_OF_LISTS = "lists of lists are not supported"
BAD_PRIMITIVE_LIST_FORMAT = "invalid patch format of primitive list"
BAD_RETAIN_KEYS_FORMAT = "invalid patch format of retainKeys"
BAD_SET_ELEMENT_ORDER_FORMAT = "invalid patch format of setElementOrder list"
PATCH_CONTENT_NOT_MATCH_RETAIN_KEYS = "patch content doesn't match retainKeys list"

_BAD_REQUEST = {BAD_JSON_DOC, BAD_PRIMITIVE_LIST_FORMAT, BAD_RETAIN_KEYS_FORMAT,
                BAD_SET_ELEMENT_ORDER_FORMAT, "strategic merge patch format is not supported"}
_UNPROCESSABLE = {NO_LIST_OF_LISTS, PATCH_CONTENT_NOT_MATCH_RETAIN_KEYS}


class StrategicMergePatchError(Exception):
    """A patch that cannot be applied; :meth:`to_api_error` gives what the client sees."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_api_error(self) -> errors.APIError:
        if self.message in _BAD_REQUEST:
            return errors.bad_request(self.message)
        if self.message in _UNPROCESSABLE:
            return errors.APIError(
                422, "Invalid", "the server rejected our request due to an error in our request",
                {"causes": [{"reason": "UnexpectedServerResponse", "message": self.message}]})
        # Any other merge error is not a metav1.Status in Go: it becomes a 500 with no reason.
        return errors.APIError(500, "", self.message)


def go_type_name(value: Any) -> str:
    """``reflect.TypeOf(v).String()`` as these messages print it (a nil type shows as ``%!s(<nil>)``)."""
    return "%!s(<nil>)" if value is None else gofmt.go_type_name(value)


def _go_float(value: float) -> str:
    """Merge-patch messages print integral floats as integers (kept as the original port did)."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        sign = "-" if exponent.startswith("-") else "+"
        digits = exponent.lstrip("+-").rjust(2, "0")
        return f"{mantissa}e{sign}{digits}"
    return text


def go_format(value: Any) -> str:
    """Go's ``%v`` of a decoded JSON value (maps print with sorted keys)."""
    return gofmt.go_v(value, float_text=_go_float)


def go_format_s(value: Any) -> str:
    """Go's ``%s`` of a value: strings as-is, anything else flagged like fmt does."""
    if isinstance(value, str):
        return value
    if value is None:
        return "%!s(<nil>)"
    return f"%!s({go_type_name(value)}={go_format(value)})"


def bad_arg_type(expected: str, actual: Any) -> StrategicMergePatchError:
    return StrategicMergePatchError(f"expected a {expected}, but received a {go_type_name(actual)}")


def no_merge_key(item: Any, merge_key: str) -> StrategicMergePatchError:
    return StrategicMergePatchError(
        f"map: {go_format(item)} does not contain declared merge key: {merge_key}")


def bad_patch_type(directive: Any, patch: dict[str, Any]) -> StrategicMergePatchError:
    return StrategicMergePatchError(
        f"unknown patch type: {go_format_s(directive)} in map: {go_format(patch)}")
