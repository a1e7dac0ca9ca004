"""Garbage-collector settings for a long-running service, applied once start-up is done.

py-spy put CPython's cyclic collector at about 10% of core-api's busy time under a create load
(issue 15). Two standard levers, as large Python services use them:

- ``gc.freeze()`` after start-up moves everything alive then (schemas, the catalog, OpenAPI
  documents, compiled CEL, bootstrap data) into a permanent generation that full collections no
  longer walk;
- a larger first-generation threshold: a request allocates thousands of short-lived containers
  that reference counting frees anyway, and with CPython's default of 700 the collector runs
  many times per request and promotes in-flight request state into older generations, where it
  is scanned again.

Memory held in cycles is still reclaimed, only less often; ``KUBECHAIN_GC_THRESHOLD`` (three
comma-separated integers) overrides the thresholds, and ``0`` turns the tuning off for a measurement.

The full collection before the freeze walks everything start-up left (~30 ms of CPU in core-api):
called on a running event loop, it waits ``FREEZE_DELAY`` seconds, so it does not hold up the
service's first answers while the chain's start waits for them (issue 15, cold start).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import os
from types import ModuleType

log = logging.getLogger(__name__)

#: (generation 0, 1, 2) thresholds: generation 0 collects after this many net container allocations.
DEFAULT_THRESHOLDS = (20_000, 20, 20)
#: Seconds after start-up before the collection and freeze, on a running event loop.
FREEZE_DELAY = 2.0


def thresholds_from_env(value: str | None) -> tuple[int, int, int] | None:
    """The thresholds to use: the default, the ones named, or None (leave CPython's alone)."""
    if value is None or not value.strip():
        return DEFAULT_THRESHOLDS
    if value.strip() == "0":
        return None
    parts = [int(p) for p in value.split(",")]
    if len(parts) != 3 or any(p < 0 for p in parts):
        raise ValueError(f"KUBECHAIN_GC_THRESHOLD must be three non-negative integers or 0, not {value!r}")
    return parts[0], parts[1], parts[2]


def tune_after_start(delay: float = FREEZE_DELAY) -> asyncio.TimerHandle | None:
    """Raise the thresholds and freeze what start-up built (see the module docstring): at once
    without a running event loop, else ``delay`` seconds later (the timer is returned)."""
    thresholds = thresholds_from_env(os.environ.get("KUBECHAIN_GC_THRESHOLD"))
    if thresholds is None:
        return None
    gc.set_threshold(*thresholds)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        _collect_and_freeze()
        return None
    return loop.call_later(delay, _collect_and_freeze)


def _collect_and_freeze() -> None:
    gc.collect()
    gc.freeze()
    log.debug("gc: %d objects frozen, thresholds %s", gc.get_freeze_count(), gc.get_threshold())


def import_server(module: str) -> ModuleType:
    """Import a service's server module with the cyclic collector off (each service's ``__main__``).

    Importing a server leaves ~95,000 long-lived containers and, at CPython's default thresholds,
    the collector ran ~230 times over them while they loaded (~7% of start-up CPU, issue 15). It is
    back on before anything is served; ``tune_after_start()`` freezes what start-up built."""
    gc.disable()
    try:
        return importlib.import_module(module)
    finally:
        gc.enable()
