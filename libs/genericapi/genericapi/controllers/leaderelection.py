"""``LeaderElector``: one active replica, by a ``coordination.k8s.io/v1`` Lease, as client-go does.

A candidate reads the Lease; it takes it when nobody holds it, when it already holds it, or
when the holder has not renewed it for ``leaseDurationSeconds`` as seen by *this* candidate's
clock (the time the record last changed is observed locally, so clocks need not agree). Writes
are optimistic (resourceVersion), so two candidates racing for a free lease cannot both win.
The leader renews every ``retry_period``; if it cannot renew within ``renew_deadline`` it stops
leading. On a clean stop it releases the lease (empty holder) so another replica takes over at
once instead of after the lease duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from genericapi.apimachinery.errors import APIError

from .types import ResourceClient

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-system"


def new_identity() -> str:
    """``<hostname>_<uuid>``, as kube-controller-manager names its candidates."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def micro_time(when: datetime | None = None) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds, UTC."""
    return (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: The first wait after an attempt that failed with an error, before the lease was ever held.
FIRST_RETRY = 0.05


class LeaderElector:
    """Acquire, renew every retry period, lose on renew deadline (client-go's leaderelection)."""

    def __init__(self, leases: ResourceClient, name: str, identity: str, lease_duration: float = 15,
                 renew_deadline: float = 10, retry_period: float = 2, namespace: str = LEASE_NAMESPACE,
                 release_on_cancel: bool = True) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self.leases = leases
        self.name = name
        self.identity = identity
        self.namespace = namespace
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._lease: dict[str, Any] | None = None
        self.leading = False
        #: Whether the last attempt failed with an error (not: the lease is someone else's).
        self._failed = False

    @property
    def observed_holder(self) -> str:
        return str((self._observed_spec or {}).get("holderIdentity") or "")

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the lease afterwards."""
        now = micro_time()
        try:
            lease = await self.leases.get(self.namespace, self.name)
        except APIError as err:
            if err.code != 404:
                raise
            spec = {"holderIdentity": self.identity, "leaseDurationSeconds": _seconds(self.lease_duration),
                    "acquireTime": now, "renewTime": now, "leaseTransitions": 0}
            try:
                self._lease = await self.leases.create(self.namespace, {
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec})
            except APIError as create_err:
                if create_err.code == 409:
                    return False  # another candidate created it first
                raise
            self._observe(spec)
            return True
        spec = dict(lease.get("spec") or {})
        if spec != self._observed_spec:
            self._observe(spec)
        holder = str(spec.get("holderIdentity") or "")
        duration = float(_number(spec.get("leaseDurationSeconds")))
        if holder and holder != self.identity and self._observed_at + duration > self._now():
            return False  # held by someone else, and not expired as far as we have seen
        new_spec = dict(spec)
        if holder == self.identity:
            new_spec["renewTime"] = now
        else:
            new_spec.update(holderIdentity=self.identity, acquireTime=now, renewTime=now,
                            leaseTransitions=int(_number(spec.get("leaseTransitions"))) + 1)
        new_spec["leaseDurationSeconds"] = _seconds(self.lease_duration)
        body = {**lease, "spec": new_spec}
        try:
            self._lease = await self.leases.update(self.namespace, self.name, body)
        except APIError as err:
            if err.code == 409:
                return False
            raise
        self._observe(new_spec)
        return True

    def _observe(self, spec: dict[str, Any]) -> None:
        self._observed_spec = spec
        self._observed_at = self._now()

    async def _attempt(self) -> bool:
        self._failed = False
        try:
            return await self.try_acquire_or_renew()
        except APIError as err:
            log.warning("lease %s/%s: %s", self.namespace, self.name, err.message)
        except Exception:
            log.exception("lease %s/%s: attempt failed", self.namespace, self.name)
        self._failed = True
        return False

    async def acquire(self) -> None:
        """Wait until this candidate holds the lease.

        An attempt the API server could not answer (a gateway starting beside a core-api that is
        not serving yet: 503) is retried after ``FIRST_RETRY`` seconds, doubling up to the retry
        period; a lease another candidate holds waits the retry period, as client-go does (a chain's
        cold start waited a whole retry period here for the gateway's first lease)."""
        soon = FIRST_RETRY
        while True:
            if await self._attempt():
                break
            if self._failed and soon < self.retry_period:
                await asyncio.sleep(soon)
                soon *= 2
                continue
            await asyncio.sleep(self.retry_period * (1 + random.random() * 0.2))
        log.info("%s acquired lease %s/%s", self.identity, self.namespace, self.name)

    async def renew_until_lost(self) -> None:
        """Renew every retry period; return when a renewal does not succeed within the deadline."""
        while True:
            await asyncio.sleep(self.retry_period)
            deadline = self._now() + self.renew_deadline
            while True:
                try:
                    async with asyncio.timeout(max(deadline - self._now(), 0.001)):
                        renewed = await self._attempt()
                except TimeoutError:
                    renewed = False
                if renewed:
                    break
                if self._now() >= deadline:
                    log.warning("%s failed to renew lease %s/%s within %.1fs", self.identity,
                                self.namespace, self.name, self.renew_deadline)
                    return
                await asyncio.sleep(min(self.retry_period / 2, max(deadline - self._now(), 0)))

    async def release(self) -> None:
        """Give the lease up (only if still ours) so another candidate need not wait it out."""
        if self._lease is None or (self._lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        for attempt in range(2):
            now = micro_time()
            spec = dict(self._lease.get("spec") or {})
            spec.update(holderIdentity="", leaseDurationSeconds=1, acquireTime=now, renewTime=now)
            try:
                self._lease = await self.leases.update(self.namespace, self.name, {**self._lease, "spec": spec})
                return
            except APIError as err:
                if err.code != 409 or attempt:
                    log.info("lease %s/%s: release failed: %s", self.namespace, self.name, err.message)
                    return
            # A renew cancelled in flight may have landed after all: read the lease again (kube's
            # release reads before it writes) and give it up if it is still ours.
            try:
                self._lease = await self.leases.get(self.namespace, self.name)
            except APIError:
                return
            if (self._lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return

    async def run(self, on_started_leading: Callable[[], Awaitable[None]],
                  on_stopped_leading: Callable[[], None]) -> None:
        """Acquire, run ``on_started_leading`` as a task while renewing; return once leadership is lost.

        Cancelling ``run`` stops the leading task, releases the lease (``release_on_cancel``)
        and calls ``on_stopped_leading``.
        """
        await self.acquire()
        self.leading = True
        task: asyncio.Future[None] = asyncio.ensure_future(on_started_leading())
        try:
            await self.renew_until_lost()
        finally:
            self.leading = False
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            try:
                if self.release_on_cancel:
                    await asyncio.shield(self.release())
            finally:
                on_stopped_leading()


def _seconds(value: float) -> int:
    return max(round(value), 1)


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0
