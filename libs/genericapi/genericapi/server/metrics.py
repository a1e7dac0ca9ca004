"""Request metrics with kube-apiserver's names (``apiserver_request_total`` and friends)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from genericapi.apimachinery.requestinfo import RequestInfo

REQUESTS = Counter(
    "apiserver_request_total",
    "Counter of apiserver requests broken out for each verb, group, version, resource, subresource and "
    "HTTP response code.",
    ["verb", "group", "version", "resource", "subresource", "code"],
)
LATENCY = Histogram(
    "apiserver_request_duration_seconds",
    "Response latency distribution in seconds for each verb, group, version, resource and subresource.",
    ["verb", "group", "version", "resource", "subresource"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
WATCHERS = Gauge(
    "apiserver_longrunning_requests",
    "Gauge of all active long-running apiserver requests (watches) by group, version and resource.",
    ["group", "version", "resource"],
)


#: kube's metrics verb for a RequestInfo verb (its route instrumentation names writes by HTTP method).
_METRIC_VERBS = {"get": "GET", "list": "LIST", "watch": "WATCH", "create": "POST", "update": "PUT",
                 "patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETECOLLECTION"}


def metric_verb(info: RequestInfo, content_type: str = "") -> str:
    """The ``verb`` label kube-apiserver gives a request (``APPLY`` for server-side apply)."""
    if not info.is_resource_request:
        return info.verb.upper()
    if info.verb == "patch" and content_type.split(";", 1)[0].strip() == "application/apply-patch+yaml":
        return "APPLY"
    return _METRIC_VERBS.get(info.verb, info.verb.upper())


def verb_of(method: str, item: bool, watch: bool) -> str:
    """kube-apiserver's verb label: LIST and WATCH are told apart from GET."""
    if watch:
        return "WATCH"
    if method == "GET":
        return "GET" if item else "LIST"
    return method
