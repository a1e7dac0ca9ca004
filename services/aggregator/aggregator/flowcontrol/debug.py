"""``/debug/api_priority_and_fairness/dump_priority_levels``, ``dump_queues`` and ``dump_requests``:
kube's APF debug dumps (apf_controller_debug.go), in its text layout (comma-terminated cells aligned
by Go's tabwriter with minwidth 8 and padding 1). They sit behind authorization, as kube installs
them on its mux: system:masters, or a user granted ``get`` on the non-resource URL.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

from .controller import Controller, PriorityLevel
from .queueset import Request

PREFIX = "/debug/api_priority_and_fairness/"
_ZERO_TIME = "0001-01-01T00:00:00Z"


def tabwriter(rows: Sequence[Sequence[str]]) -> str:
    """Go's text/tabwriter(minwidth 8, tabwidth 0, padding 1, ' ') over rows whose cells were joined
    with ",\\t": every cell but a row's last is padded to its column's width."""
    widths: list[int] = []
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            w = len(cell) + 1
            if i >= len(widths):
                widths.append(max(8, w))
            else:
                widths[i] = max(widths[i], w)
    lines = []
    for row in rows:
        padded = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append("".join(padded) + (row[-1] if row else "") + "\n")
    return "".join(lines)


def _cells(*columns: str) -> list[str]:
    """kube's row(): columns joined by ",\\t"; the tab ends a cell, so every cell but the last keeps its comma."""
    return [c + "," for c in columns[:-1]] + [columns[-1]]


def _go_time(ts: float) -> str:
    if ts <= 0:
        return _ZERO_TIME
    moment = dt.datetime.fromtimestamp(ts, dt.UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    frac = f"{moment.microsecond:06d}000".rstrip("0")
    return f"{text}.{frac}Z" if frac else f"{text}Z"


def _seat_seconds(value: float) -> str:
    return f"{value:.8f}ss"


def _bool(b: bool) -> str:
    return "true" if b else "false"


def _levels(controller: Controller) -> list[PriorityLevel]:
    return [controller.levels[n] for n in sorted(controller.levels)]


def dump_priority_levels(controller: Controller) -> str:
    rows = [_cells("PriorityLevelName", "ActiveQueues", "IsIdle", "IsQuiescing", "WaitingRequests",
                   "ExecutingRequests", "DispatchedRequests", "RejectedRequests", "TimedoutRequests",
                   "CancelledRequests")]
    for level in _levels(controller):
        qs = level.queues
        active = sum(1 for q in qs.queues if q.waiting)
        rows.append(_cells(level.name, str(active), _bool(qs.idle), _bool(level.quiescing), str(qs.waiting),
                           str(qs.executing), str(qs.dispatched), str(qs.rejected), str(qs.timed_out),
                           str(qs.cancelled)))
    return tabwriter(rows)


def dump_queues(controller: Controller) -> str:
    rows = [_cells("PriorityLevelName", "Index", "PendingRequests", "ExecutingRequests", "SeatsInUse",
                   "NextDispatchR", "InitialSeatsSum", "MaxSeatsSum", "TotalWorkSum")]
    for level in _levels(controller):
        for i, q in enumerate(level.queues.queues):
            rows.append(_cells(level.name, str(i), str(len(q.waiting)), str(len(q.executing)), str(q.seats_in_use),
                               _seat_seconds(q.next_dispatch_r), str(q.seats_waiting), str(q.seats_waiting),
                               _seat_seconds(q.waiting_work)))
    return tabwriter(rows)


def dump_requests(controller: Controller, details: bool) -> str:
    header = ["PriorityLevelName", "FlowSchemaName", "QueueIndex", "RequestIndexInQueue", "FlowDistingsher",
              "ArriveTime", "InitialSeats", "FinalSeats", "AdditionalLatency", "StartTime"]
    if details:
        header += ["UserName", "Verb", "APIPath", "Namespace", "Name", "APIVersion", "Resource", "SubResource"]
    rows = [_cells(*header)]

    def add(level: PriorityLevel, iq: int, ir: int, r: Request) -> None:
        cols = [level.name, r.flow_schema, str(iq), str(ir), r.distinguisher, _go_time(r.arrival), str(r.seats), "0",
                "0s", _go_time(r.start_wall)]
        if details:
            user, info = r.details
            gv = f"{info.api_group}/{info.api_version}" if info.api_group else info.api_version
            cols += [user.name, info.verb, info.path, info.namespace, info.name, gv, info.resource, info.subresource]
        rows.append(_cells(*cols))

    for level in _levels(controller):
        for iq, q in enumerate(level.queues.queues):
            for ir, r in enumerate(q.waiting):
                add(level, iq, ir, r)
            for r in q.executing:
                add(level, iq, -1, r)
        for r in level.queues.queueless:
            add(level, -1, -1, r)
    return tabwriter(rows)


class WithDebugDumps:
    """Serves the three dumps at the mux (behind authorization); other paths go on."""

    def __init__(self, app: ASGIApp, controller: Controller) -> None:
        self.app = app
        self.controller = controller

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(PREFIX) or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        name = path[len(PREFIX):]
        query = scope.get("query_string", b"").decode("latin-1")
        details = any(p.partition("=")[0] == "includeRequestDetails" and p.partition("=")[2]
                      for p in query.split("&"))
        if name == "dump_priority_levels":
            text = dump_priority_levels(self.controller)
        elif name == "dump_queues":
            text = dump_queues(self.controller)
        elif name == "dump_requests":
            text = dump_requests(self.controller, details)
        else:
            await self.app(scope, receive, send)
            return
        body = text.encode()
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})
