"""kube's APF config controller and dispatcher (util/flowcontrol/apf_controller.go), for one gateway.

``refresh`` digests the cached FlowSchemas and PriorityLevelConfigurations whenever they change:
broken levels are skipped, the mandatory ``exempt`` and ``catch-all`` are imagined when missing,
levels that disappeared keep serving what they hold (quiescing) until idle, FlowSchemas whose level
does not exist are left out (Dangling), and seats are divided by nominal shares (allocation.py).
``update_borrowing`` runs every 10 seconds as kube's does: each limited level's current limit is
re-derived from its seat demand (high watermark, average, deviation, smoothed), between its lower
and upper bound, so idle levels lend seats to busy ones. ``classify`` picks the first matching
FlowSchema in precedence order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from genericapi.apimachinery.flowcontrol import bootstrap
from genericapi.apimachinery.flowcontrol.allocation import (
    Item,
    Limits,
    allocate,
    go_round,
    max_seats,
    nominal_limits,
)
from genericapi.apimachinery.flowcontrol.matching import flow_distinguisher, matches_flow_schema, schema_order
from genericapi.apimachinery.flowcontrol.shufflesharding import hash_flow_id
from genericapi.apimachinery.requestinfo import RequestInfo
from genericapi.apimachinery.user import UserInfo

from . import metrics
from .queueset import QueueSet, QueuingConfig

log = logging.getLogger(__name__)

Obj = dict[str, Any]

#: Distinct request shapes whose classification is kept (all are dropped when full).
CLASSIFICATION_CACHE_SIZE = 4096
#: kube's borrowingAdjustmentPeriod and seatDemandSmoothingCoefficient.
BORROWING_PERIOD = 10.0
SMOOTHING = 0.977


class ConfigSource(Protocol):
    @property
    def generation(self) -> Any: ...

    def flow_schemas(self) -> list[Obj]: ...

    def priority_levels(self) -> list[Obj]: ...


@dataclass(eq=False)
class PriorityLevel:
    obj: Obj
    queues: QueueSet
    limits: Limits = field(default_factory=lambda: Limits(0, 0, 0))
    current: int = 0
    smoothed: float = 0.0
    quiescing: bool = False

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.obj["metadata"].get("uid") or "")

    @property
    def exempt(self) -> bool:
        return self.obj["spec"].get("type") == "Exempt"

    @property
    def max_seats(self) -> int:
        queuing = queuing_config(self.obj)
        return max_seats(self.limits.nominal, queuing.hand_size) if queuing.queues > 0 else 1


@dataclass(frozen=True)
class Classification:
    flow_schema: Obj
    level: PriorityLevel
    distinguisher: str
    hash_value: int

    # Read once per Classification (the controller keeps it for every request of its shape).
    @cached_property
    def flow_schema_name(self) -> str:
        return str(self.flow_schema["metadata"]["name"])

    @cached_property
    def flow_schema_uid(self) -> str:
        return str(self.flow_schema["metadata"].get("uid") or "")


def queuing_config(pl: Obj) -> QueuingConfig:
    name = str(pl["metadata"]["name"])
    spec = pl.get("spec") or {}
    if spec.get("type") == "Exempt":
        return QueuingConfig(name, -1)
    queuing = ((spec.get("limited") or {}).get("limitResponse") or {}).get("queuing")
    if not queuing:
        return QueuingConfig(name, 0)
    return QueuingConfig(name, int(queuing.get("queues") or 0), int(queuing.get("handSize") or 0),
                         int(queuing.get("queueLengthLimit") or 0))


def well_formed(pl: Obj) -> bool:
    """The union checks kube's queueSetCompleterForPL makes before it accepts a level."""
    spec = pl.get("spec") or {}
    kind = spec.get("type")
    name = (pl.get("metadata") or {}).get("name")
    if (kind == "Limited") != (spec.get("limited") is not None):
        return False
    if (kind == "Exempt") != (spec.get("exempt") is not None):
        return False
    if (kind == "Exempt") != (name == bootstrap.EXEMPT):
        return False
    if kind == "Limited":
        response = spec["limited"].get("limitResponse") or {}
        if (response.get("type") == "Reject") != (response.get("queuing") is None):
            return False
        queuing = response.get("queuing")
        if queuing is not None:
            try:
                QueueSet(queuing_config(pl), 1)
            except ValueError:
                return False
    return kind in ("Limited", "Exempt")


@dataclass
class Controller:
    source: ConfigSource | None
    server_limit: int = 600
    levels: dict[str, PriorityLevel] = field(default_factory=dict)
    flow_schemas: list[Obj] = field(default_factory=list)
    #: FlowSchemas whose priority level does not exist: name -> level name (their Dangling status).
    dangling: dict[str, str] = field(default_factory=dict)
    on_digest: Callable[[], None] | None = None
    _seen: Any = None
    #: Classifications by what matching reads of a request (see classify); emptied by digest.
    _classified: dict[tuple[Any, ...], Classification] = field(default_factory=dict)

    def refresh(self) -> None:
        if self.source is None:
            if not self.levels:  # no etcd: the mandatory configuration only
                self.digest([], [])
            return
        generation = self.source.generation
        if generation != self._seen:
            self._seen = generation
            self.digest(self.source.flow_schemas(), self.source.priority_levels())

    # -- digesting the configuration ------------------------------------------------------------------
    def digest(self, fss: list[Obj], pls: list[Obj]) -> None:
        new: dict[str, PriorityLevel] = {}
        for pl in pls:
            if not well_formed(pl):
                log.warning("priority level %s is broken; ignored", (pl.get("metadata") or {}).get("name"))
                continue
            name = str(pl["metadata"]["name"])
            state = self.levels.get(name)
            if state is None:
                state = PriorityLevel(pl, QueueSet(queuing_config(pl), 0))
            state.obj, state.quiescing = pl, False
            new[name] = state
        for name, state in self.levels.items():
            if name in new:
                continue
            if name in (bootstrap.EXEMPT, bootstrap.CATCH_ALL) and name not in new:
                continue  # imagined again below from the mandatory object
            if state.queues.idle:
                continue
            state.quiescing = True
            new[name] = state
        for name, proto in bootstrap.mandatory("PriorityLevelConfiguration").items():
            if name not in new:
                state = self.levels.get(name) or PriorityLevel(proto, QueueSet(queuing_config(proto), 0))
                state.obj, state.quiescing = proto, False
                new[name] = state
        limits = nominal_limits(self.server_limit, {n: s.obj["spec"] for n, s in new.items()})
        for name, state in new.items():
            fresh = state.limits.nominal == 0 and state.current == 0
            state.limits = limits[name]
            if fresh:
                state.current = state.limits.initial
            metrics.NOMINAL_SEATS.labels(name).set(state.limits.nominal)
            metrics.CONCURRENCY_LIMIT.labels(name).set(state.limits.nominal)
            metrics.LOWER_SEATS.labels(name).set(state.limits.lower)
            metrics.UPPER_SEATS.labels(name).set(state.limits.upper)
        for name in set(self.levels) - set(new):
            for gauge in (metrics.NOMINAL_SEATS, metrics.CONCURRENCY_LIMIT, metrics.LOWER_SEATS, metrics.UPPER_SEATS,
                          metrics.CURRENT_SEATS):
                try:
                    gauge.remove(name)
                except KeyError:
                    pass
        self.levels = new
        self._classified = {}
        self._digest_flow_schemas(fss)
        self.update_borrowing(take_stats=False)
        if self.on_digest is not None:
            self.on_digest()

    def _digest_flow_schemas(self, fss: list[Obj]) -> None:
        good: list[Obj] = []
        dangling: dict[str, str] = {}
        names = set()
        for fs in fss:
            level = str(((fs.get("spec") or {}).get("priorityLevelConfiguration") or {}).get("name") or "")
            name = str(fs["metadata"]["name"])
            names.add(name)
            if level not in self.levels or self.levels[level].quiescing:
                dangling[name] = level
                continue
            good.append(fs)
        good.sort(key=schema_order)
        mandatory = bootstrap.mandatory("FlowSchema")
        if bootstrap.EXEMPT not in {f["metadata"]["name"] for f in good}:
            good.insert(0, mandatory[bootstrap.EXEMPT])
        if bootstrap.CATCH_ALL not in {f["metadata"]["name"] for f in good}:
            good.append(mandatory[bootstrap.CATCH_ALL])
        self.flow_schemas = good
        self.dangling = dangling

    # -- borrowing --------------------------------------------------------------------------------------
    def update_borrowing(self, take_stats: bool = True) -> None:
        """kube's updateBorrowingLocked: re-derive every level's current limit from its seat demand."""
        nominal_sum = sum(s.limits.nominal for s in self.levels.values())
        remaining = nominal_sum
        items: list[Item] = []
        limited: list[PriorityLevel] = []
        floors: dict[str, int] = {}
        min_sum = min_current_sum = 0
        for state in self.levels.values():
            high = 0
            if take_stats:
                high, avg, dev = state.queues.take_demand_stats()
                envelope = avg + dev
                state.smoothed = max(envelope, SMOOTHING * state.smoothed + (1 - SMOOTHING) * envelope)
            if state.exempt:
                floor = max(state.limits.lower, high)
                floors[state.name] = floor
                remaining -= floor
                continue
            floor = max(state.limits.lower, min(state.limits.nominal, high))
            floors[state.name] = floor
            limited.append(state)
            items.append(Item(max(float(floor), state.smoothed), float(floor), float(state.limits.upper)))
            min_sum += state.limits.lower
            min_current_sum += floor
        allocs: list[float] = []
        share = 0.0
        if remaining <= min_sum:
            metrics.FAIR_FRAC.set(0)
        elif remaining <= min_current_sum:
            share = (remaining - min_sum) / (min_current_sum - min_sum)
            metrics.FAIR_FRAC.set(0)
        else:
            allocs, fair = allocate(nominal_sum, items)
            metrics.FAIR_FRAC.set(fair)
        for state in self.levels.values():
            if state.exempt:
                current = floors[state.name]
            elif remaining <= min_sum:
                current = state.limits.lower
            elif remaining <= min_current_sum:
                current = state.limits.lower + go_round((floors[state.name] - state.limits.lower) * share)
            else:
                current = go_round(allocs[limited.index(state)])
            state.current = current
            state.queues.reconfigure(queuing_config(state.obj), current)
            metrics.CURRENT_SEATS.labels(state.name).set(current)

    async def run_borrowing(self) -> None:
        while True:
            await asyncio.sleep(BORROWING_PERIOD)
            try:
                self.refresh()
                self.update_borrowing()
            except Exception:  # never let the loop die: limits would freeze
                log.exception("APF borrowing adjustment failed")

    # -- classification -----------------------------------------------------------------------------
    def classify(self, user: UserInfo, info: RequestInfo) -> Classification:
        self.refresh()
        # What kube's matching reads of a request (subjects: name and groups; rules: verb, group,
        # resource/subresource, namespace or the non-resource path): requests alike in these are
        # classified alike, so the answer is kept until the configuration changes (digest).
        key = (user.name, tuple(user.groups), info.is_resource_request, info.verb, info.api_group, info.resource,
               info.subresource, info.namespace, "" if info.is_resource_request else info.path)
        found = self._classified.get(key)
        if found is not None:
            return found
        found = self._classify(user, info)
        if len(self._classified) >= CLASSIFICATION_CACHE_SIZE:
            self._classified.clear()
        self._classified[key] = found
        return found

    def _classify(self, user: UserInfo, info: RequestInfo) -> Classification:
        chosen: Obj | None = None
        catch_all: Obj | None = None
        for fs in self.flow_schemas:
            if matches_flow_schema(fs, user, info):
                chosen = fs
                break
            if fs["metadata"]["name"] == bootstrap.CATCH_ALL:
                catch_all = fs
        if chosen is None:
            chosen = catch_all or bootstrap.mandatory("FlowSchema")[bootstrap.CATCH_ALL]
        level = self.levels[chosen["spec"]["priorityLevelConfiguration"]["name"]]
        distinguisher, hash_value = "", 0
        if not level.exempt and level.queues.config.queues > 1:
            distinguisher = flow_distinguisher(chosen, user, info)
            hash_value = hash_flow_id(str(chosen["metadata"]["name"]), distinguisher)
        return Classification(chosen, level, distinguisher, hash_value)
