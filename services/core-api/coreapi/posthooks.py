"""Post-start hooks that run together and are retried until they succeed, as kube-apiserver runs them.

kube-apiserver starts every post-start hook in its own goroutine at once; the system namespaces,
``rbac/bootstrap-roles`` and APF's ``priority-and-fairness-config-producer`` each poll until their
work is done (an etcd error, a watch cache behind under load, a conflict: logged, tried again),
and each hook's ``/readyz/poststarthook/<name>`` check fails until then. ``GenericAPIServer`` runs
its hooks one after another; core-api's bootstrap hooks spend much of their time waiting for etcd
(one write per default object: about 180 on an empty etcd), so running them one after another made
the start wait for each one's round trips in turn (issue 15, cold start). ``HookGroup`` takes one
place in the server's sequence and runs its hooks concurrently there, each finishing its own named
checks when it succeeds; the server reports ready only once all of them have.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from genericapi.server.apiserver import GenericAPIServer
from genericapi.server.health import PostStartHookStatus

log = logging.getLogger(__name__)

Hook = Callable[[GenericAPIServer], Awaitable[None]]

#: Seconds before the first retry of a failed hook (kube's RBAC hook polls every 100 ms), doubling
#: up to ``MAX_RETRY_DELAY``.
FIRST_RETRY_DELAY = 0.1
MAX_RETRY_DELAY = 2.0


@dataclass
class _Member:
    hook: Hook
    label: str
    statuses: list[PostStartHookStatus]


class HookGroup:
    """Hooks run concurrently at the place this group was made in ``server.post_start``."""

    def __init__(self, server: GenericAPIServer, first_delay: float = FIRST_RETRY_DELAY,
                 max_delay: float = MAX_RETRY_DELAY) -> None:
        self._members: list[_Member] = []
        self.first_delay, self.max_delay = first_delay, max_delay
        self._server = server
        server.post_start.append(self._run)

    def add(self, hook: Hook, *names: str) -> None:
        """Run ``hook`` with the group; kube's ``poststarthook/<name>`` checks fail until it succeeded."""
        label = names[0] if names else getattr(hook, "__qualname__", repr(hook))
        self._members.append(_Member(hook, label, [self._server.health.post_start_hook(n) for n in names]))

    async def _run(self, server: GenericAPIServer) -> None:
        await asyncio.gather(*(self._until_done(m, server) for m in self._members))

    async def _until_done(self, member: _Member, server: GenericAPIServer) -> None:
        delay = self.first_delay
        attempt = 1
        started = time.monotonic()
        while True:
            try:
                await member.hook(server)
                break
            except Exception as err:  # kube: HandleError, then poll again
                log.warning("post-start hook %s failed (attempt %d), again in %.2fs: %s",
                            member.label, attempt, delay, err)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.max_delay)
            attempt += 1
        for status in member.statuses:
            status.finish()
        log.debug("post-start hook %s done in %.3fs", member.label, time.monotonic() - started)
