"""``WorkQueue``: the rate-limited, deduplicating queue between informers and workers.

As client-go's workqueue: a key added many times before a worker takes it is processed once;
a key being processed is never handed to a second worker, and if it is added meanwhile it is
queued again when the first worker calls ``done``. Failed keys come back after a per-key
exponential backoff (``retry``) until ``forget`` resets it; a key waiting to come back
is queued once, at the earliest time asked for.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable


class ShutDown(Exception):
    """``get`` on a queue that was shut down and is empty."""


class WorkQueue:
    def __init__(self, base_delay: float = 0.005, max_delay: float = 60.0) -> None:
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._failures: dict[Hashable, int] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}
        self._base = base_delay
        self._max = max_delay
        self._shutdown = False

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutdown

    def add(self, key: Hashable) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # queued again by done()
        self._queue.append(key)
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def add_after(self, key: Hashable, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds; a key already waiting keeps the earlier time."""
        if self._shutdown:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        waiting = self._timers.get(key)
        if waiting is not None:
            if waiting.when() <= when:
                return
            waiting.cancel()

        def fire() -> None:
            self._timers.pop(key, None)
            self.add(key)

        self._timers[key] = loop.call_at(when, fire)

    async def get(self) -> Hashable:
        """The next key (waits for one); raises ``ShutDown`` once shut down and drained."""
        while not self._queue:
            if self._shutdown:
                raise ShutDown
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            finally:
                if not fut.done():
                    fut.cancel()
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: Hashable) -> None:
        self._processing.discard(key)
        if key in self._dirty and not self._shutdown:
            self._queue.append(key)
            self._wake()

    def retry(self, key: Hashable) -> None:
        """Queue ``key`` again after its next backoff delay (base * 2^failures, capped)."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        self.add_after(key, min(self._base * (2 ** n), self._max))

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def failures(self, key: Hashable) -> int:
        return self._failures.get(key, 0)

    def shut_down(self) -> None:
        """Stop accepting keys; waiting ``get`` calls raise ``ShutDown``."""
        self._shutdown = True
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self._queue.clear()
        self._dirty.clear()
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
