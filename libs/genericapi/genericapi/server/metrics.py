"""kube-apiserver's metrics, with its names, labels, help texts and buckets, so that dashboards and
alerts written for kube (``apiserver_request_total``, ``apiserver_request_duration_seconds`` and the
rest) work against the chain unchanged.

Each metric is recorded where kube records it: request totals and latencies by the handler that
serves the resource (the member's router; the gateway's own discovery and health answers), 429s by
flow control, long-running requests and watch events by the watch handler, ``authentication_*`` and
``authorization_*`` by the gateway's filters, in-flight watermarks by the gateway (see
aggregator/metricsmerge.py for how the members' metrics reach the gateway's ``/metrics``).

The series updated on every request are the lean kinds (genericapi.leanmetrics: ``LeanCounter``,
``LeanHistogram``, ``LeanGauge``): a cached child per label tuple whose update is an addition, where
``prometheus_client``'s own ``labels()`` validates and its children lock on every call. They expose
the same text prometheus_client's Counter, Histogram and Gauge would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from urllib.parse import parse_qs

from prometheus_client import Gauge, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import REGISTRY, Collector

from genericapi.apimachinery.requestinfo import RequestInfo
from genericapi.handlers.watchmetrics import WATCH_EVENT_SIZES, WATCH_EVENTS
from genericapi.leanmetrics import LeanCounter, LeanGauge, LeanGaugeValue, LeanHistogram, LeanValue

# WATCH_EVENTS, WATCH_EVENT_SIZES: recorded by the watch handler (handlers/watchmetrics.py); the lean
# kinds live in genericapi.leanmetrics (every layer uses them) and are named here too.
__all__ = ["WATCH_EVENTS", "WATCH_EVENT_SIZES", "LeanCounter", "LeanGauge", "LeanGaugeValue", "LeanHistogram",
           "LeanValue"]

# kube's registry has no ``*_created`` series.
disable_created_metrics()

#: kube's ``component`` label value for everything its handlers record.
COMPONENT = "apiserver"

#: kube's buckets for request and etcd latencies (the SLO buckets).
LATENCY_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20,
                   30, 45, 60)


class PlainCounter(Collector):
    """A counter exposed under its exact name: kube's ``authentication_attempts`` and
    ``authenticated_user_requests`` have no ``_total`` suffix, which prometheus_client's Counter
    always adds. Exposed untyped (the one visible difference from kube's ``# TYPE ... counter``)."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...]) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self.values: dict[tuple[str, ...], float] = {}
        REGISTRY.register(self)

    def inc(self, *labelvalues: str) -> None:
        self.values[labelvalues] = self.values.get(labelvalues, 0.0) + 1

    def collect(self) -> Iterator[Metric]:
        family = Metric(self.name, self.documentation, "unknown")
        for labelvalues, value in list(self.values.items()):
            family.add_sample(self.name, dict(zip(self.labelnames, labelvalues, strict=True)), value)
        yield family


#: The per-request series, updated on every request the backends' routers and the gateway answer:
#: the lean kinds (one addition per update), exposed exactly as prometheus_client's Counter,
#: Histogram and Gauge would (tests/unit/test_request_metrics_lean.py compares the text).
REQUESTS = LeanCounter(
    "apiserver_request_total",
    "[STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, "
    "scope, component, and HTTP response code.",
    ("verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"),
)
LATENCY = LeanHistogram(
    "apiserver_request_duration_seconds",
    "[STABLE] Response latency distribution in seconds for each verb, dry run value, group, version, resource, "
    "subresource, scope and component.",
    ("verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"),
    buckets=LATENCY_BUCKETS,
)
RESPONSE_SIZES = LeanHistogram(
    "apiserver_response_sizes",
    "[STABLE] Response size distribution in bytes for each group, version, verb, resource, subresource, scope "
    "and component.",
    ("verb", "group", "version", "resource", "subresource", "scope", "component"),
    buckets=(1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9),
)
LONGRUNNING = LeanGauge(
    "apiserver_longrunning_requests",
    "[STABLE] Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, "
    "scope and component. Not all requests are tracked this way.",
    ("verb", "group", "version", "resource", "subresource", "scope", "component"),
)
#: Published once a second at most (InflightWatermark), not per request: prometheus_client's own.
INFLIGHT = Gauge(
    "apiserver_current_inflight_requests",
    "[STABLE] Maximal number of currently used inflight request limit of this apiserver per request kind in "
    "last second.",
    ["request_kind"],
)
TERMINATIONS = LeanCounter(
    "apiserver_request_terminations_total",
    "[ALPHA] Number of requests which apiserver terminated in self-defense.",
    ("verb", "group", "version", "resource", "subresource", "scope", "component", "code"),
)

AUTHENTICATION_ATTEMPTS = PlainCounter(
    "authentication_attempts", "[ALPHA] Counter of authenticated attempts.", ("result",))
AUTHENTICATED_USERS = PlainCounter(
    "authenticated_user_requests", "[ALPHA] Counter of authenticated requests broken out by username.",
    ("username",))
AUTHENTICATION_LATENCY = LeanHistogram(
    "authentication_duration_seconds", "[ALPHA] Authentication duration in seconds broken out by result.",
    ("result",), buckets=tuple(0.001 * 2 ** i for i in range(15)))
AUTHORIZATION_ATTEMPTS = LeanCounter(
    "authorization_attempts_total",
    "[ALPHA] Counter of authorization attempts broken down by result. It can be either 'allowed', 'denied', "
    "'no-opinion' or 'error'.",
    ("result",))
AUTHORIZATION_LATENCY = LeanHistogram(
    "authorization_duration_seconds", "[ALPHA] Authorization duration in seconds broken out by result.",
    ("result",), buckets=tuple(0.001 * 2 ** i for i in range(15)))

#: Labels of a request as kube records it: verb, dry_run, group, version, resource, subresource,
#: scope, component.
RequestLabels = tuple[str, str, str, str, str, str, str, str]

#: A request's three children (count, latency, and size for reads) by its labels and code: one dict
#: lookup per request. Children are never removed, so they stay those the collectors expose.
_children: dict[tuple[RequestLabels, int],
                tuple[LeanValue, LeanHistogram.Child, LeanHistogram.Child | None]] = {}


def _request_children(labels: RequestLabels, code: int) -> tuple[LeanValue, LeanHistogram.Child,
                                                                  LeanHistogram.Child | None]:
    sizes = RESPONSE_SIZES.labels(labels[0], *labels[2:]) if labels[0] in ("GET", "LIST") else None
    children = _children[(labels, code)] = (REQUESTS.labels(*labels, str(code)), LATENCY.labels(*labels), sizes)
    return children


def record_request(labels: RequestLabels, code: int, elapsed: float, size: int = 0) -> None:
    """kube's MonitorRequest: count, time and (reads only) size one answered request."""
    children = _children.get((labels, code)) or _request_children(labels, code)
    children[0].value += 1
    children[1].observe(elapsed)
    sizes = children[2]
    if sizes is not None:
        sizes.observe(size)


def longrunning(labels: RequestLabels) -> LeanGaugeValue:
    """The ``apiserver_longrunning_requests`` child of a watch or connect request (inc/dec it)."""
    return LONGRUNNING.labels(labels[0], *labels[2:])


def record_dropped(labels: RequestLabels) -> None:
    """kube's RecordDroppedRequest + RecordRequestTermination: a request refused with 429 by flow
    control or the in-flight limit (counted in ``apiserver_request_total`` with code 429)."""
    REQUESTS.labels(*labels, "429").inc()
    TERMINATIONS.labels(labels[0], *labels[2:], "429").inc()


def record_authentication(result: str, elapsed: float, username: str = "") -> None:
    """kube's recordAuthenticationMetrics: ``success`` (with the compressed user name), ``failure``
    or ``error``."""
    if result == "success":
        AUTHENTICATED_USERS.inc(compress_username(username))
    AUTHENTICATION_ATTEMPTS.inc(result)
    child = _authn_latency.get(result)
    if child is None:
        child = _authn_latency[result] = AUTHENTICATION_LATENCY.labels(result)
    child.observe(elapsed)


def record_authorization(result: str, elapsed: float) -> None:
    """kube's recordAuthorizationMetrics: ``allowed``, ``denied``, ``no-opinion`` or ``error``."""
    children = _authz.get(result)
    if children is None:
        children = _authz[result] = (AUTHORIZATION_ATTEMPTS.labels(result), AUTHORIZATION_LATENCY.labels(result))
    children[0].inc()
    children[1].observe(elapsed)


_authn_latency: dict[str, LeanHistogram.Child] = {}
_authz: dict[str, tuple[LeanValue, LeanHistogram.Child]] = {}


_KNOWN_USERS = frozenset({"admin", "client", "kube_proxy", "kubelet", "system:serviceaccount:kube-system:default"})


def compress_username(username: str) -> str:
    """kube's compressUsername: a few known identities by name, e-mail addresses as ``email_id``,
    everyone else ``other`` (bounded cardinality, no user names in metrics)."""
    if username in _KNOWN_USERS:
        return username
    return "email_id" if "@" in username else "other"


# -- labels ---------------------------------------------------------------------------------

#: Connect subresources kube reports as CONNECT.
CONNECT_SUBRESOURCES = frozenset({"log", "exec", "portforward", "attach", "proxy"})
_APPLY = "application/apply-patch+yaml"


def request_scope(name: str, namespace: str, method: str) -> str:
    """kube's installer scope of a resource route: an object's path or any POST is ``resource``;
    a list within a namespace ``namespace``; anything else (all namespaces, cluster-scoped) ``cluster``."""
    if name or method == "POST":
        return "resource"
    return "namespace" if namespace else "cluster"


def dry_run_label(query_string: bytes) -> str:
    """kube's cleanDryRun: "" without ``dryRun``; the sorted, deduplicated values; "invalid" unless all
    of them are ``All``."""
    if b"dryRun" not in query_string:
        return ""
    values = parse_qs(query_string.decode("latin-1"), keep_blank_values=True).get("dryRun", [])
    if any(v != "All" for v in values):
        return "invalid"
    return ",".join(sorted(set(values)))


def resource_verb(method: str, scope: str, watch: bool, subresource: str, content_type: str) -> str:
    """kube's reported verb (CanonicalVerb + CleanVerb): LIST and WATCH told from GET, APPLY from
    PATCH, CONNECT for connect subresources; DELETE of a collection stays DELETE."""
    if subresource in CONNECT_SUBRESOURCES:
        return "CONNECT"
    if watch:
        return "WATCH"
    if method in ("GET", "HEAD"):
        return "GET" if scope == "resource" else "LIST"
    if method == "PATCH" and content_type.split(";", 1)[0].strip() == _APPLY:
        return "APPLY"
    return method


def metric_verb(info: RequestInfo, content_type: str = "") -> str:
    """The ``verb`` label kube-apiserver gives a request, from the gateway's RequestInfo."""
    if not info.is_resource_request:
        return "GET" if info.verb in ("get", "head") else info.verb.upper()
    method = _METHODS.get(info.verb, info.verb.upper())
    scope = request_scope(info.name, info.namespace, method)
    return resource_verb(method, scope, info.verb == "watch", info.subresource, content_type)


_METHODS = {"get": "GET", "list": "GET", "watch": "GET", "create": "POST", "update": "PUT", "patch": "PATCH",
            "delete": "DELETE", "deletecollection": "DELETE"}


def non_resource_labels(path: str, component: str = COMPONENT) -> RequestLabels:
    """Labels of a path kube instruments by hand (discovery, health): the path as subresource."""
    return ("GET", "", "", "", "", path, "", component)


# -- in-flight watermarks ----------------------------------------------------------------------

#: kube's request kinds of ``apiserver_current_inflight_requests``.
READ_ONLY, MUTATING = "readOnly", "mutating"
_READ_ONLY_VERBS = frozenset({"get", "list", "watch"})


class InflightWatermark:
    """kube's max-in-flight watermark: the most requests of each kind (read-only, mutating) in
    flight at once during the last second, published as ``apiserver_current_inflight_requests``.
    Long-running requests (watches, connects) are not counted, as kube's filter skips them."""

    def __init__(self, period: float = 1.0) -> None:
        self.period = period
        self.current = [0, 0]
        self.high = [0, 0]
        self._next = 0.0
        self._gauges = (INFLIGHT.labels(READ_ONLY), INFLIGHT.labels(MUTATING))
        for gauge in self._gauges:
            gauge.set(0)

    @staticmethod
    def kind(info: RequestInfo | None, method: str) -> int:
        """0 (read-only) or 1 (mutating); kube reads the RequestInfo's verb."""
        if info is None:
            return 0 if method in ("GET", "HEAD") else 1
        return 0 if info.verb in _READ_ONLY_VERBS else 1

    def started(self, kind: int) -> None:
        current = self.current[kind] = self.current[kind] + 1
        if current > self.high[kind]:
            self.high[kind] = current
        now = time.monotonic()
        if now >= self._next:
            self.publish(now)

    def finished(self, kind: int) -> None:
        self.current[kind] -= 1

    def publish(self, now: float | None = None) -> None:
        """Publish the watermarks of the period just ended and start the next from what is in flight."""
        self._next = (now if now is not None else time.monotonic()) + self.period
        for kind, gauge in enumerate(self._gauges):
            gauge.set(self.high[kind])
            self.high[kind] = self.current[kind]


# -- storage objects ---------------------------------------------------------------------------

class StorageObjects(Collector):
    """``apiserver_storage_objects`` per resource (kube's GroupResource string: ``pods``,
    ``deployments.apps``), read from the watch caches at scrape time: no polling, no etcd count.
    One collector per process; each API server of the process adds its source."""

    def __init__(self) -> None:
        self.sources: list[Callable[[], Iterable[tuple[str, int]]]] = []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "apiserver_storage_objects",
            "[STABLE] Number of stored objects at the time of last check split by kind. In case of a fetching "
            "error, the value will be -1.", labels=["resource"])
        seen: set[str] = set()
        for source in list(self.sources):
            for resource, count in source():
                if resource not in seen:  # several served versions share one storage
                    seen.add(resource)
                    family.add_metric([resource], count)
        yield family


STORAGE_OBJECTS = StorageObjects()
REGISTRY.register(STORAGE_OBJECTS)


def storage_objects_from(counts: Callable[[], Iterable[tuple[str, int]]], remove: bool = False) -> None:
    """Add (or remove) an API server's ``(resource, count)`` source of ``apiserver_storage_objects``."""
    if remove:
        if counts in STORAGE_OBJECTS.sources:
            STORAGE_OBJECTS.sources.remove(counts)
    else:
        STORAGE_OBJECTS.sources.append(counts)
