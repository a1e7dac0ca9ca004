"""``ControllerManager``: runs its controllers only while this replica leads (kube-controller-manager).

Every replica of a service runs a manager; they compete for one Lease, and only the holder runs
the controllers. When the holder loses the lease (it could not renew in time) its controllers
are cancelled and it becomes a candidate again; when it stops, it releases the lease so another
replica takes over at once. Controllers are level-triggered, so a new leader simply reconciles
everything from its informers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from .controller import Controller
from .leaderelection import LEASE_NAMESPACE, LeaderElector, new_identity
from .tasks import cancel_and_wait
from .types import ResourceClient

log = logging.getLogger(__name__)


class ControllerManager:
    """Starts registered controllers only while this replica holds the lease; stops them when it loses it."""

    def __init__(self, leases: ResourceClient, lease_name: str = "kube-controller-manager", *,
                 identity: str = "", namespace: str = LEASE_NAMESPACE, lease_duration: float = 15,
                 renew_deadline: float = 10, retry_period: float = 2) -> None:
        self.elector = LeaderElector(leases, lease_name, identity or new_identity(), lease_duration,
                                     renew_deadline, retry_period, namespace=namespace)
        self._controllers: list[tuple[Controller, int]] = []
        self._task: asyncio.Task[None] | None = None
        self._running: list[asyncio.Task[None]] = []

    @property
    def identity(self) -> str:
        return self.elector.identity

    @property
    def leading(self) -> bool:
        return self.elector.leading

    @property
    def controllers(self) -> list[Controller]:
        return [c for c, _w in self._controllers]

    def add(self, controller: Controller, workers: int = 1) -> None:
        self._controllers.append((controller, workers))

    async def _lead(self) -> None:
        log.info("%s is leading: starting %d controller(s)", self.identity, len(self._controllers))
        self._running = [asyncio.create_task(c.run(w), name=f"controller:{c.name}") for c, w in self._controllers]
        try:
            results = await asyncio.gather(*self._running, return_exceptions=True)
            for (controller, _w), result in zip(self._controllers, results, strict=True):
                if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                    log.error("controller %s ended: %r", controller.name, result)
        finally:
            for task in self._running:
                task.cancel()
            for task in self._running:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self._running = []

    def _stopped(self) -> None:
        log.info("%s stopped leading", self.identity)

    async def _run(self) -> None:
        while True:
            await self.elector.run(self._lead, self._stopped)

    async def start(self) -> None:
        """Begin competing for the lease (in the background)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"controller-manager:{self.elector.name}")

    async def stop(self) -> None:
        """Stop the controllers and release the lease."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
