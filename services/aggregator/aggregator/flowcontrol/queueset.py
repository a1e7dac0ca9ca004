"""One priority level's queues: kube's fair queuing ``queueSet`` (fairqueuing/queueset), on asyncio.

Requests of a queuing level are dealt a hand of queues by their flow's hash and wait in the
shortest one (by waiting work). Dispatching follows kube's fair queuing over virtual time: the
virtual clock R advances at ``min(seats requested, limit) / active queues`` seat-seconds per second,
each queue keeps the R at which its next request may start (``nextDispatchR``), and the queue whose
oldest request would finish first in R is served next; each dispatch advances its queue by the
request's estimated work (seats x 3 ms) and a finish corrects that by the real service time. A
request that cannot be queued (its queue is full while every seat is taken) is rejected
(``queue-full``); one still waiting at its deadline is removed (``time-out``). A Reject level has
no queues: no free seat is ``concurrency-limit``. The exempt level never waits. One event loop,
so no locks.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from genericapi.apimachinery.flowcontrol.shufflesharding import Dealer

#: kube's estimatedServiceDuration: the work a request is assumed to be while it runs.
ESTIMATED_SERVICE_SECONDS = 0.003
#: Flow hashes whose dealt hand is kept (all are dropped when full; a hand depends only on the hash
#: and the deck, so it is dealt once per flow instead of once per request).
HAND_CACHE_SIZE = 4096


@dataclass(frozen=True)
class QueuingConfig:
    """``queues`` 0: no queuing (Reject); -1: exempt (never limited)."""

    name: str
    queues: int = 0
    hand_size: int = 0
    queue_length_limit: int = 0


@dataclass(eq=False)
class Request:
    flow_schema: str
    distinguisher: str
    seats: int
    arrival: float  # wall clock (time.time), for the dumps
    arrival_r: float
    details: Any = None  # (user, RequestInfo) for dump_requests
    queue: Queue | None = None
    start: float = 0.0  # monotonic, once dispatched
    start_wall: float = 0.0
    future: asyncio.Future[bool] | None = None

    @property
    def work(self) -> float:
        return self.seats * ESTIMATED_SERVICE_SECONDS


@dataclass(eq=False)
class Queue:
    index: int
    waiting: deque[Request] = field(default_factory=deque)
    executing: set[Request] = field(default_factory=set)
    seats_in_use: int = 0
    seats_waiting: int = 0
    next_dispatch_r: float = 0.0

    @property
    def waiting_work(self) -> float:
        return self.seats_waiting * ESTIMATED_SERVICE_SECONDS


class Rejected(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason  # queue-full, concurrency-limit, time-out, cancelled


class QueueSet:
    def __init__(self, config: QueuingConfig, concurrency_limit: int,
                 on_change: Callable[[], None] | None = None) -> None:
        self.config = config
        self.concurrency_limit = concurrency_limit
        self.dealer = Dealer(config.queues, config.hand_size) if config.queues > 0 else None
        self.queues: list[Queue] = [Queue(i) for i in range(max(config.queues, 0))]
        self.queueless: set[Request] = set()
        #: Seats of the queueless requests executing (``seats_in_use`` less these: the queues' seats).
        self._queueless_seats = 0
        #: Dealt hands by flow hash (see HAND_CACHE_SIZE); emptied whenever the dealer is replaced.
        self._hands: dict[int, list[int]] = {}
        self.current_r = 0.0
        self._last = time.monotonic()
        self._enqueues = 0
        self._robin = -1
        self.seats_in_use = 0
        self.seats_waiting = 0
        self.executing = 0
        self.waiting = 0
        #: Queues with a request waiting or executing (kube counts these as active).
        self._active: set[Queue] = set()
        #: Queues with a request waiting: the only ones dispatching looks at.
        self._waiting_queues: set[Queue] = set()
        self.dispatched = self.rejected = self.timed_out = self.cancelled = 0
        #: Seat demand (seats in use + seats waiting) high-water mark since the last borrowing round.
        self.demand_high = 0
        self._demand_area = 0.0
        self._demand_sq_area = 0.0
        self._demand_since = self._last
        self._demand_last = self._last
        self._demand_now = 0
        self.on_change = on_change

    # -- configuration ------------------------------------------------------------------
    def reconfigure(self, config: QueuingConfig, concurrency_limit: int) -> None:
        """New queuing settings or limit; queues are only added (kube keeps extra queues until empty)."""
        self._sync_time()
        if config.queues > len(self.queues):
            self.queues.extend(Queue(i) for i in range(len(self.queues), config.queues))
        self.config = config
        self.dealer = Dealer(config.queues, config.hand_size) if config.queues > 0 else None
        self._hands = {}
        self.concurrency_limit = concurrency_limit
        self._dispatch_as_much_as_possible()

    @property
    def exempt(self) -> bool:
        return self.config.queues < 0

    @property
    def idle(self) -> bool:
        return self.waiting == 0 and self.executing == 0

    # -- virtual time -----------------------------------------------------------------------
    def _sync_time(self) -> None:
        now = time.monotonic()
        self.current_r += self._virtual_time_ratio() * (now - self._last)
        self._last = now

    def _virtual_time_ratio(self) -> float:
        active = len(self._active)
        if active == 0:
            return 0.0
        # The seats requested of the active queues: every queue holding seats is active (a queue leaves
        # ``_active`` only once it holds none), so this is the sum over ``_active`` without the loop.
        requested = self.seats_in_use - self._queueless_seats + self.seats_waiting
        return min(float(requested), float(self.concurrency_limit)) / active

    def _note_demand(self) -> None:
        now = time.monotonic()
        span = now - self._demand_last
        self._demand_area += self._demand_now * span
        self._demand_sq_area += self._demand_now * self._demand_now * span
        self._demand_last = now
        demand = self.seats_in_use + self.seats_waiting
        self._demand_now = demand
        self.demand_high = max(self.demand_high, demand)
        if self.on_change is not None:
            self.on_change()

    def take_demand_stats(self) -> tuple[int, float, float]:
        """(high watermark, average, standard deviation) of seat demand since the last call (kube's
        seat demand integrator), then start a new period."""
        now = time.monotonic()
        span = now - self._demand_last
        area = self._demand_area + self._demand_now * span
        sq_area = self._demand_sq_area + self._demand_now * self._demand_now * span
        total = now - self._demand_since
        high = self.demand_high
        avg = area / total if total > 0 else float(self._demand_now)
        var = max(sq_area / total - avg * avg, 0.0) if total > 0 else 0.0
        self._demand_area = self._demand_sq_area = 0.0
        self._demand_since = self._demand_last = now
        self.demand_high = self._demand_now
        return high, avg, var ** 0.5

    # -- requests -------------------------------------------------------------------------------
    def start(self, hash_value: int, seats: int, flow_schema: str, distinguisher: str, details: Any) -> Request:
        """Admit a request: executing at once (``future`` is None or done with True), or queued
        (await ``wait``). Raises Rejected when it may neither run nor wait."""
        self._sync_time()
        req = Request(flow_schema, distinguisher, seats, time.time(), self.current_r, details)
        if self.config.queues < 1:
            if not self._can_accommodate(seats):
                self.rejected += 1
                raise Rejected("concurrency-limit")
            self._begin(req, None)
            return req
        queue = self._shuffle_shard(hash_value)
        if self.seats_in_use >= self.concurrency_limit and len(queue.waiting) >= self.config.queue_length_limit:
            self.rejected += 1
            raise Rejected("queue-full")
        if not queue.waiting and not queue.executing:
            queue.next_dispatch_r = self.current_r
        req.queue = queue
        if not self.waiting and self._can_accommodate(seats):
            # Nothing waits anywhere: enqueuing and dispatching would pick this request from this queue
            # at once (kube's StartRequest does both); the same bookkeeping without the round trip.
            self._active.add(queue)
            self._robin = queue.index
            self._begin(req, queue)
            queue.next_dispatch_r += req.work
            return req
        req.future = asyncio.get_running_loop().create_future()
        queue.waiting.append(req)
        queue.seats_waiting += seats
        self._active.add(queue)
        self._waiting_queues.add(queue)
        self.waiting += 1
        self.seats_waiting += seats
        self._bound_next_dispatch(queue)
        self._note_demand()
        self._dispatch_as_much_as_possible()
        return req

    async def wait(self, req: Request, limit_seconds: float) -> None:
        """Wait until dispatched; Rejected("time-out") when ``limit_seconds`` pass first, and the request
        leaves its queue (so does a cancelled one)."""
        if req.future is None or req.future.done():
            return
        try:
            async with asyncio.timeout(limit_seconds):
                await asyncio.shield(req.future)
            return
        except TimeoutError:
            reason = "time-out"
        except asyncio.CancelledError:
            if req.future.done():  # dispatched just as the client went away: give the seat back
                self.finish(req)
                raise
            self._withdraw(req, "cancelled")
            raise
        if req.future.done():  # dispatched in the same instant as the deadline: it runs
            return
        self._withdraw(req, reason)
        raise Rejected(reason)

    def _withdraw(self, req: Request, reason: str) -> None:
        self._sync_time()
        queue = req.queue
        if queue is not None and req in queue.waiting:
            queue.waiting.remove(req)
            if not queue.waiting:
                self._waiting_queues.discard(queue)
            queue.seats_waiting -= req.seats
            self.waiting -= 1
            self.seats_waiting -= req.seats
            if not queue.waiting and not queue.executing:
                self._active.discard(queue)
            self.rejected += 1
            if reason == "time-out":
                self.timed_out += 1
            else:
                self.cancelled += 1
            self._bound_next_dispatch(queue)
            self._note_demand()
        if req.future is not None and not req.future.done():
            req.future.cancel()

    def finish(self, req: Request) -> None:
        """The request is done: its seats go back and waiting requests are dispatched."""
        self._sync_time()
        self.executing -= 1
        self.seats_in_use -= req.seats
        queue = req.queue
        if queue is not None:
            queue.executing.discard(req)
            queue.seats_in_use -= req.seats
            served = time.monotonic() - req.start
            queue.next_dispatch_r -= req.seats * (ESTIMATED_SERVICE_SECONDS - served)
            self._bound_next_dispatch(queue)
            if not queue.waiting and not queue.executing:
                self._active.discard(queue)
        else:
            self.queueless.discard(req)
            self._queueless_seats -= req.seats
        self._note_demand()
        self._dispatch_as_much_as_possible()

    # -- internals ---------------------------------------------------------------------------------
    def _can_accommodate(self, seats: int) -> bool:
        if self.config.queues < 0:
            return True
        if seats > self.concurrency_limit:
            return self.executing == 0
        return self.seats_in_use + seats <= self.concurrency_limit

    def _begin(self, req: Request, queue: Queue | None) -> None:
        req.start = time.monotonic()
        req.start_wall = time.time()
        self.executing += 1
        self.seats_in_use += req.seats
        self.dispatched += 1
        if queue is None:
            self.queueless.add(req)
            self._queueless_seats += req.seats
        else:
            queue.executing.add(req)
            queue.seats_in_use += req.seats
        self._note_demand()

    def _shuffle_shard(self, hash_value: int) -> Queue:
        hand = self._hands.get(hash_value)
        if hand is None:
            assert self.dealer is not None
            hand = self.dealer.deal(hash_value)
            if len(self._hands) >= HAND_CACHE_SIZE:
                self._hands.clear()
            self._hands[hash_value] = hand
        offset = self._enqueues % len(hand)
        self._enqueues += 1
        if not self.seats_waiting:
            # No queue holds waiting work: every candidate's is 0, so the first one looked at wins.
            return self.queues[hand[offset]]
        best: Queue | None = None
        best_work = float("inf")
        for i in range(len(hand)):
            queue = self.queues[hand[(offset + i) % len(hand)]]
            work = queue.waiting_work
            if work < best_work:
                best, best_work = queue, work
        assert best is not None
        return best

    def _bound_next_dispatch(self, queue: Queue) -> None:
        if queue.waiting and queue.next_dispatch_r < queue.waiting[0].arrival_r:
            queue.next_dispatch_r = queue.waiting[0].arrival_r

    def _dispatch_as_much_as_possible(self) -> None:
        while self.waiting and self.seats_in_use < self.concurrency_limit and self._dispatch_one():
            pass

    def _dispatch_one(self) -> bool:
        """kube's findDispatchQueueToBoundLocked: of the queues with a request waiting, the one whose
        oldest request would finish first in virtual time; ties go to the first in round-robin order
        after the last queue served (kube scans every queue from there; only waiting ones can win)."""
        best: Queue | None = None
        best_key = (float("inf"), 0)
        n = len(self.queues)
        robin = self._robin
        for queue in self._waiting_queues:
            key = (queue.next_dispatch_r + queue.waiting[0].work, (queue.index - robin - 1) % n)
            if key < best_key:
                best, best_key = queue, key
        if best is None:
            return False
        req = best.waiting[0]
        if not self._can_accommodate(req.seats):
            return False
        best.waiting.popleft()
        if not best.waiting:
            self._waiting_queues.discard(best)
        best.seats_waiting -= req.seats
        self.waiting -= 1
        self.seats_waiting -= req.seats
        self._robin = best.index
        if req.future is not None and req.future.done():  # gave up already
            self._bound_next_dispatch(best)
            if not best.waiting and not best.executing:
                self._active.discard(best)
            return True
        self._begin(req, best)
        best.next_dispatch_r += req.work
        self._bound_next_dispatch(best)
        if req.future is not None:
            req.future.set_result(True)
        return True
