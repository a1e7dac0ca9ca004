"""The ``Retry-After`` of a 429, per priority level, as kube's droppedRequestsTracker sets it.

It starts at 1 second; when a level dropped at least 3 x retryAfter requests over the last
retryAfter seconds (and retryAfter seconds have passed since the last raise) it doubles, up to 32;
when it dropped fewer than retryAfter, it goes down by one. Decisions are made once per second.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

MAX_RETRY_AFTER = 32


@dataclass
class _Level:
    retry_after: int = 1
    raised_at: int = 0
    current_second: int = 0
    current_count: int = 0
    history: list[tuple[int, int]] = field(default_factory=list)

    def record(self, now: int) -> None:
        if now == self.current_second:
            self.current_count += 1
            return
        self.history.append((self.current_second, self.current_count))
        keep = min(2 * self.retry_after, MAX_RETRY_AFTER)
        self.history = [(t, n) for t, n in self.history if now - t <= keep]
        self.current_second, self.current_count = now, 1
        dropped = sum(n for t, n in self.history if now - t <= self.retry_after and t < now)
        if now - self.raised_at >= self.retry_after and dropped >= 3 * self.retry_after:
            self.retry_after = min(self.retry_after * 2, MAX_RETRY_AFTER)
            self.raised_at = now
        elif dropped < self.retry_after and self.retry_after > 1:
            self.retry_after -= 1


class DroppedRequests:
    def __init__(self) -> None:
        self._levels: dict[str, _Level] = {}

    def record(self, level: str) -> None:
        self._levels.setdefault(level, _Level()).record(int(time.time()))

    def retry_after(self, level: str) -> int:
        state = self._levels.get(level)
        return state.retry_after if state is not None else 1
