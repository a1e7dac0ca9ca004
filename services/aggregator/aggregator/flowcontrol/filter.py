"""kube's WithPriorityAndFairness filter (server/filters/priority-and-fairness.go) as ASGI.

Sits inside impersonation and outside authorization, as in kube's handler chain. Every request is
classified (FlowSchema -> priority level), then: exempt ones run at once; others take a seat of their
level, waiting in its fair queues at most a quarter of the request's timeout (``?timeout=`` or
``--request-timeout``, capped at a minute); a request that can neither run nor wait gets kube's 429
(plain text "Too many requests, please try again later.", ``Retry-After``). Every answer carries the
``X-Kubernetes-PF-FlowSchema-UID`` and ``X-Kubernetes-PF-PriorityLevel-UID`` headers. Long-running
requests other than watches (exec, attach, log, port-forward, proxy) are not limited, as in kube; a
watch holds its seat only until its response starts (kube: until its initial events are sent),
then streams without one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from genericapi.apimachinery.requestinfo import RequestInfo
from genericapi.apimachinery.user import UserInfo
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import filters
from . import metrics
from .controller import Classification, Controller
from .queueset import QueueSet, Rejected, Request
from .retryafter import DroppedRequests

FLOW_SCHEMA_UID_HEADER = b"x-kubernetes-pf-flowschema-uid"
PRIORITY_LEVEL_UID_HEADER = b"x-kubernetes-pf-prioritylevel-uid"
TOO_MANY_REQUESTS = b"Too many requests, please try again later.\n"

#: kube-apiserver's BasicLongRunningRequestCheck(verbs watch/proxy, subresources attach/exec/proxy/log/portforward).
LONG_RUNNING_VERBS = frozenset({"watch", "proxy"})
LONG_RUNNING_SUBRESOURCES = frozenset({"attach", "exec", "proxy", "log", "portforward"})
MAX_WAIT_SECONDS = 60.0


def is_long_running(info: RequestInfo) -> bool:
    return info.verb in LONG_RUNNING_VERBS or (info.is_resource_request
                                                and info.subresource in LONG_RUNNING_SUBRESOURCES)


def wait_limit(scope: Scope, request_timeout: float) -> float:
    """A quarter of the request's deadline: ``?timeout=`` when it parses (kube's WithRequestDeadline
    takes it when no longer than --request-timeout), else --request-timeout; at most a minute."""
    timeout = request_timeout
    query = scope.get("query_string", b"").decode("latin-1")
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if key == "timeout" and value:
            parsed = _go_duration_seconds(value)
            if parsed is not None and 0 < parsed <= request_timeout:
                timeout = parsed
            break
    return min(timeout / 4, MAX_WAIT_SECONDS)


def _go_duration_seconds(text: str) -> float | None:
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    total, number = 0.0, ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isdigit() or ch == ".":
            number += ch
            i += 1
            continue
        unit = next((u for u in ("ns", "us", "µs", "ms", "s", "m", "h") if text.startswith(u, i)), None)
        if unit is None or not number:
            return None
        try:
            total += float(number) * units[unit]
        except ValueError:
            return None
        number = ""
        i += len(unit)
    return total if not number else None


class _Series:
    """One (priority level, FlowSchema)'s labelled metric children and response headers, looked up
    once instead of on every request (prometheus_client's ``labels`` is the costly part)."""

    def __init__(self, c: Classification) -> None:
        level, fs = c.level.name, c.flow_schema_name
        self.headers = [(FLOW_SCHEMA_UID_HEADER, c.flow_schema_uid.encode()),
                        (PRIORITY_LEVEL_UID_HEADER, c.level.uid.encode())]
        self.inqueue = metrics.INQUEUE.labels(level, fs)
        self.inqueue_seats = metrics.INQUEUE_SEATS.labels(level, fs)
        self.queue_length = metrics.QUEUE_LENGTH.labels(level, fs)
        self.waited = metrics.WAIT.labels(level, fs, "true")
        self.gave_up = metrics.WAIT.labels(level, fs, "false")
        self.dispatched = metrics.DISPATCHED.labels(level, fs)
        self.executing = metrics.EXECUTING.labels(level, fs)
        self.executing_seats = metrics.EXECUTING_SEATS.labels(level, fs)
        self.execution = {False: metrics.EXECUTION.labels(level, fs, "regular"),
                          True: metrics.EXECUTION.labels(level, fs, "watch")}


class Seat:
    """A request's seat at its priority level, from ``admit`` until ``release`` (which counts once):
    the end of the request, or for a watch the start of its response (kube: once its initial
    events are sent, it streams on without one). ``headers``: the X-Kubernetes-PF-* response headers."""

    __slots__ = ("headers", "queues", "released", "req", "series", "started", "watch")

    def __init__(self, queues: QueueSet | None, series: _Series | None, req: Request | None, watch: bool,
                 started: float) -> None:
        self.queues = queues
        self.series = series
        self.req = req
        self.watch = watch
        self.started = started
        self.released = series is None
        self.headers: list[tuple[bytes, bytes]] = series.headers if series is not None else []

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        series, req = self.series, self.req
        assert series is not None and req is not None and self.queues is not None
        self.queues.finish(req)
        series.executing.dec()
        series.executing_seats.dec(req.seats)
        series.execution[self.watch].observe(time.monotonic() - self.started)


#: What APF does not limit (long-running requests other than watches): no seat, no headers.
UNLIMITED = Seat(None, None, None, False, 0.0)


class WithPriorityAndFairness:
    def __init__(self, app: ASGIApp, controller: Controller, request_timeout: float = 60.0,
                 on_dropped: Callable[[Scope], None] | None = None) -> None:
        self.app = app
        self.controller = controller
        self.request_timeout = request_timeout
        self.dropped = DroppedRequests()
        #: Records a 429 in the request metrics (kube's RecordDroppedRequest; the server knows the labels).
        self.on_dropped = on_dropped
        self._series: dict[tuple[str, str, str, str], _Series] = {}
        #: The series of each Classification the controller handed out, by identity (the controller
        #: keeps one per request shape until its configuration changes): no names and UIDs read from
        #: the objects per request. The Classification is kept with it, so its id is never reused.
        self._series_by_classification: dict[int, tuple[Classification, _Series]] = {}

    def _series_of(self, c: Classification) -> _Series:
        found = self._series_by_classification.get(id(c))
        if found is not None and found[0] is c:
            return found[1]
        series = self._series_by_name(c)
        if len(self._series_by_classification) >= 1024:  # the controller's cache is renewed: let go
            self._series_by_classification.clear()
        self._series_by_classification[id(c)] = (c, series)
        return series

    def _series_by_name(self, c: Classification) -> _Series:
        key = (c.level.name, c.flow_schema_name, c.level.uid, c.flow_schema_uid)
        series = self._series.get(key)
        if series is None:
            if len(self._series) >= 1024:  # configurations come and go: keep it bounded
                self._series.clear()
            series = self._series[key] = _Series(c)
        return series

    async def admit(self, scope: Scope, info: RequestInfo | None, user: UserInfo, send: Send) -> Seat | None:
        """Classify the request and take its seat (waiting in its queue if need be): the seat to
        release when it is done (``UNLIMITED`` for what APF does not limit), or None when it was
        refused and answered 429."""
        if info is None:
            info = RequestInfo(False, scope["path"], scope["method"].lower())
        watch = info.verb == "watch"
        if not watch and is_long_running(info):
            return UNLIMITED
        c = self.controller.classify(user, info)
        level = c.level
        series = self._series_of(c)
        arrived = time.monotonic()
        try:
            req = level.queues.start(c.hash_value, 1, c.flow_schema_name, c.distinguisher, (user, info))
        except Rejected as err:
            await self._reject(c, err.reason, scope, send, series.headers)
            return None
        if req.future is not None and not req.future.done():
            series.inqueue.inc()
            series.inqueue_seats.inc(req.seats)
            if level.queues.config.queues > 0 and req.queue is not None:
                series.queue_length.observe(len(req.queue.waiting))
            try:
                await level.queues.wait(req, wait_limit(scope, self.request_timeout))
            except Rejected as err:
                series.gave_up.observe(time.monotonic() - arrived)
                await self._reject(c, err.reason, scope, send, series.headers)
                return None
            finally:
                series.inqueue.dec()
                series.inqueue_seats.dec(req.seats)
        now = time.monotonic()
        series.waited.observe(now - arrived)
        series.dispatched.inc()
        series.executing.inc()
        series.executing_seats.inc(req.seats)
        return Seat(level.queues, series, req, watch, now)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The filter as ASGI (the gateway runs ``admit`` in its one-pass chain instead)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        seat = await self.admit(scope, filters.request_info_of(scope), scope[filters.USER], send)
        if seat is None:
            return
        if seat is UNLIMITED:
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *seat.headers]}
                await send(message)
                if seat.watch:  # the watch is established: it streams on without a seat
                    seat.release()
                return
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            seat.release()

    async def _reject(self, c: Classification, reason: str, scope: Scope, send: Send,
                      headers: list[tuple[bytes, bytes]]) -> None:
        level = c.level.name
        metrics.REJECTED.labels(level, c.flow_schema_name, reason).inc()
        if self.on_dropped is not None:
            self.on_dropped(scope)
        self.dropped.record(level)
        retry_after = str(self.dropped.retry_after(level)).encode()
        await send({"type": "http.response.start", "status": 429, "headers": [
            (b"content-type", b"text/plain; charset=utf-8"), (b"x-content-type-options", b"nosniff"),
            (b"retry-after", retry_after), (b"content-length", str(len(TOO_MANY_REQUESTS)).encode()), *headers]})
        await send({"type": "http.response.body", "body": TOO_MANY_REQUESTS, "more_body": False})
