"""What a request asks for, in Kubernetes terms: kube-apiserver's ``RequestInfoFactory``.

Authorization, audit, priority-and-fairness and (here) the gateway's fault rules all see a request
as a verb (``get list watch create update patch delete deletecollection``, or the lowercase HTTP
method for a non-resource path), an API group/version, a resource and subresource, a namespace and
a name. The verb depends on method, path *and* query (``GET`` of a collection is ``list``, or
``watch`` with ``?watch=true``; a ``fieldSelector=metadata.name=x`` names the object), so it is
derived once, here, exactly as ``k8s.io/apiserver/pkg/endpoints/request.NewRequestInfo`` does.
Pure: no HTTP framework types, just method, path and query string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs

from genericapi.apimachinery.fields import FieldSelectorError, parse_field_selector
from genericapi.apimachinery.labels import LabelSelectorError, parse_label_selector

__all__ = ["RequestInfo", "RequestInfoError", "parse_request_info"]

#: Path prefixes of the Kubernetes API (``--api-prefixes``); ``api`` has no group segment.
API_PREFIXES = frozenset({"api", "apis"})
GROUPLESS_API_PREFIXES = frozenset({"api"})
#: Verbs that may appear in the path itself (``/api/v1/watch/pods``, ``.../proxy/...``).
SPECIAL_VERBS = frozenset({"proxy", "watch"})
#: Special verbs whose path never names a subresource.
SPECIAL_VERBS_NO_SUBRESOURCES = frozenset({"proxy"})
#: ``/api/v1/namespaces/{name}/{these}`` are subresources of the namespace, not namespaced resources.
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})

_METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch",
                 "DELETE": "delete"}
_INT64 = re.compile(r"[+-]?[0-9]+")


class RequestInfoError(ValueError):
    """A resource path kube cannot interpret (its filter answers 500 for it)."""


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """``request.RequestInfo``: the Kubernetes reading of one HTTP request."""

    is_resource_request: bool
    path: str
    verb: str
    api_prefix: str = ""
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    parts: tuple[str, ...] = ()


def _split_path(path: str) -> list[str]:
    trimmed = path.strip("/")
    return trimmed.split("/") if trimmed else []


def _valid_int64(text: str) -> bool:
    return bool(_INT64.fullmatch(text)) and -(2**63) <= int(text) < 2**63


def _go_bool(values: list[str]) -> bool:
    """``runtime.Convert_Slice_string_To_bool``: ``""``, ``0`` and any-case ``false`` are false."""
    if not values:
        return False
    first = values[0]
    return not (first in ("", "0") or first.lower() == "false")


def _list_options(query: dict[str, list[str]]) -> tuple[bool, str]:
    """(watch, name from ``fieldSelector``) as kube reads the query of a collection GET.

    Decoding ``ListOptions`` fails on a bad label or field selector or a non-integer
    ``timeoutSeconds``/``limit``; kube then keeps only ``watch`` (any value but false/0 is true)
    and names nothing.
    """
    try:
        for key in ("timeoutSeconds", "limit"):
            values = query.get(key)
            if values and not _valid_int64(values[0]):
                raise ValueError(key)
        labels = query.get("labelSelector")
        if labels:
            parse_label_selector(labels[0])
        fields = query.get("fieldSelector")
        selector = parse_field_selector(fields[0]) if fields else None
    except (ValueError, LabelSelectorError, FieldSelectorError):
        watch_values = query.get("watch") or []
        return bool(watch_values) and watch_values[0].lower() not in ("false", "0"), ""
    name = ""
    if selector is not None:
        # fields.Selector.RequiresExactMatch: the first `metadata.name=`/`==` term.
        for req in selector.requirements:
            if req.field == "metadata.name" and req.operator == "=":
                name = req.value
                break
        # path.IsValidPathSegmentName: a name that could not be a path segment names nothing.
        if name in (".", "..") or "/" in name or "%" in name:
            name = ""
    return _go_bool(query.get("watch", [])), name


def parse_request_info(method: str, path: str, query_string: str = "") -> RequestInfo:
    """The ``RequestInfo`` of ``method`` on ``path`` (already percent-decoded) with ``query_string``.

    Raises ``RequestInfoError`` for ``/api/v1/watch`` (a special verb and nothing after it), which
    kube rejects with "unable to determine kind and namespace from url".
    """
    method = method.upper()
    lowered = method.lower()
    parts = _split_path(path)
    if len(parts) < 3 or parts[0] not in API_PREFIXES:
        return RequestInfo(False, path, lowered)
    prefix, rest = parts[0], parts[1:]
    group = ""
    if prefix not in GROUPLESS_API_PREFIXES:
        if len(rest) < 3:
            return RequestInfo(False, path, lowered)
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    if rest[0] in SPECIAL_VERBS:
        if len(rest) < 2:
            target = path + ("?" + query_string if query_string else "")
            raise RequestInfoError(f"unable to determine kind and namespace from url, {target}")
        verb, rest = rest[0], rest[1:]
    else:
        verb = _METHOD_VERBS.get(method, "")
    namespace = ""
    if rest[0] == "namespaces":
        if len(rest) > 1:
            namespace = rest[1]
            if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
                rest = rest[2:]
    resource = name = subresource = ""
    if len(rest) >= 3 and verb not in SPECIAL_VERBS_NO_SUBRESOURCES:
        subresource = rest[2]
    if len(rest) >= 2:
        name = rest[1]
    if rest:
        resource = rest[0]
    if not name and verb == "get":
        query = parse_qs(query_string, keep_blank_values=True) if query_string else {}
        watch, name = _list_options(query)
        verb = "watch" if watch else "list"
    if not name and verb == "delete":
        verb = "deletecollection"
    return RequestInfo(True, path, verb, prefix, group, version, namespace, resource, subresource, name,
                       tuple(rest))
