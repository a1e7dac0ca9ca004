"""``Controller``: the worker loop every controller shares (queue -> reconcile, retry on error).

A controller registers its informers (``self.informers``) and handlers that turn events into
keys in ``self.queue``; ``run`` starts the informers, waits until they are synced, calls
``on_synced`` (a controller enqueues every object there, so a restart reconciles everything:
level-triggered, not edge-triggered), then runs ``workers`` workers until cancelled. A key whose
``reconcile`` raises comes back after a per-key backoff; a key that succeeds is forgotten.
``run`` can be called again after it ends (a new leader term): it starts with a fresh queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Hashable

from genericapi.apimachinery.errors import APIError

from .informer import Informer
from .workqueue import ShutDown, WorkQueue

log = logging.getLogger(__name__)


class Controller(ABC):
    name: str = "controller"

    def __init__(self) -> None:
        self.queue = WorkQueue()
        self.informers: list[Informer] = []

    @abstractmethod
    async def reconcile(self, key: Hashable) -> None:
        """Make the world match the desired state for ``key``; raise to retry later."""

    async def on_synced(self) -> None:  # noqa: B027 - optional hook
        """Called once the informers are synced, before the workers start (enqueue everything)."""

    async def run(self, workers: int = 1) -> None:
        """Run until cancelled."""
        self.queue = WorkQueue()
        try:
            for informer in self.informers:
                await informer.start()
            for informer in self.informers:
                await informer.wait_synced()
            await self.on_synced()
            log.info("controller %s: synced, %d worker(s)", self.name, workers)
            async with asyncio.TaskGroup() as group:
                for i in range(max(workers, 1)):
                    group.create_task(self._worker(), name=f"{self.name}-worker-{i}")
        finally:
            self.queue.shut_down()
            for informer in self.informers:
                with contextlib.suppress(Exception):
                    await informer.stop()

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                self.queue.done(key)
                raise
            except APIError as err:
                level = logging.DEBUG if err.code == 409 else logging.WARNING
                log.log(level, "controller %s: %r: %s (retrying)", self.name, key, err.message)
                self.queue.retry(key)
            except Exception:
                log.exception("controller %s: %r failed (retrying)", self.name, key)
                self.queue.retry(key)
            else:
                self.queue.forget(key)
            self.queue.done(key)
