"""APF for one gateway, wired: kube-apiserver's flags, the config view, the controller, the borrowing
loop, the readiness check and the two places in the handler chain (the filter, and the debug dumps
at the mux)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from genericapi.server.health import HealthChecks
from genericapi.storage.etcd import EtcdClient
from starlette.types import ASGIApp, Scope

from .config import FlowControlView
from .controller import Controller
from .debug import WithDebugDumps
from .filter import WithPriorityAndFairness

#: The gateway's readiness check for the configuration cache (kube's post-start hook of that name).
HEALTH_CHECK = "poststarthook/priority-and-fairness-config-consumer"


def add_flowcontrol_flags(parser: argparse.ArgumentParser) -> None:
    """kube-apiserver's flags for APF, with its defaults."""
    parser.add_argument("--enable-priority-and-fairness", type=_go_bool, nargs="?", const=True, default=True,
                        help="API Priority and Fairness: classify, queue and limit requests (default true)")
    parser.add_argument("--max-requests-inflight", type=int, default=400,
                        help="with --max-mutating-requests-inflight: the seats APF divides among priority levels")
    parser.add_argument("--max-mutating-requests-inflight", type=int, default=200,
                        help="added to --max-requests-inflight for APF's server concurrency limit")
    parser.add_argument("--request-timeout", type=_duration_seconds, default=60.0,
                        help="a request's deadline (Go duration, default 1m0s); APF waits at most a quarter of it")


def validate_flags(args: argparse.Namespace) -> str:
    """kube's error for limits that do not add up to something positive ("" when fine)."""
    if args.enable_priority_and_fairness and args.max_requests_inflight + args.max_mutating_requests_inflight <= 0:
        return (f"invalid configuration: MaxRequestsInFlight={args.max_requests_inflight} and "
                f"MaxMutatingRequestsInFlight={args.max_mutating_requests_inflight}; "
                "they must add up to something positive")
    return ""


def _go_bool(text: str) -> bool:
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise argparse.ArgumentTypeError(f"strconv.ParseBool: parsing {text!r}: invalid syntax")


def _duration_seconds(text: str) -> float:
    from .filter import _go_duration_seconds

    seconds = _go_duration_seconds(text)
    if seconds is None:
        raise argparse.ArgumentTypeError(f"time: invalid duration {text!r}")
    return seconds


@dataclass
class PriorityAndFairness:
    view: FlowControlView | None  # None without etcd: the mandatory configuration only
    controller: Controller
    request_timeout: float = 60.0
    #: Records a 429 in the request metrics (the server's labels: metrics.record_dropped).
    on_dropped: Callable[[Scope], None] | None = None
    _task: asyncio.Task[None] | None = None

    @classmethod
    def build(cls, etcd: EtcdClient | None, prefix: str, server_limit: int, request_timeout: float,
              on_dropped: Callable[[Scope], None] | None = None) -> PriorityAndFairness:
        view = FlowControlView(etcd, prefix) if etcd is not None else None
        return cls(view, Controller(view, server_limit), request_timeout, on_dropped)

    def install_health(self, health: HealthChecks) -> None:
        view = self.view

        async def synced() -> bool:
            return view is None or view.ready

        health.add(HEALTH_CHECK, synced)  # a post-start hook: listed by livez and healthz too, as kube lists it

    async def start(self) -> None:
        if self.view is not None:
            await self.view.start()
        self.controller.refresh()
        self._task = asyncio.create_task(self.controller.run_borrowing(), name="apf-borrowing")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.view is not None:
            await self.view.stop()

    # -- the filters.FlowControl protocol ----------------------------------------------------------------
    def around_mux(self, mux: ASGIApp) -> ASGIApp:
        return WithDebugDumps(mux, self.controller)

    def filter(self, handler: ASGIApp) -> WithPriorityAndFairness:
        return WithPriorityAndFairness(handler, self.controller, self.request_timeout, self.on_dropped)
