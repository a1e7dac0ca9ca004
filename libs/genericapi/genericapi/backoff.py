"""The project's one exponential backoff: how long to wait before the next try.

Reconnect loops (watch caches, informers, the gateway's control streams) and the process
supervisor of ``kubechain up`` all wait the same way: start small, double, stop growing at a cap,
start small again once things work. Jitter (a random share of each delay) keeps many clients
that failed together from coming back together, as client-go's ``wait.Backoff`` does.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass
class Backoff:
    """``initial * factor**n`` seconds for the n-th consecutive failure, at most ``cap``."""

    initial: float
    cap: float
    factor: float = 2.0
    #: Up to this share of each delay is added at random (0: the exact sequence).
    jitter: float = 0.0
    failures: int = field(default=0, init=False)

    def next(self) -> float:
        """The delay before the next try, counting this failure."""
        delay = min(self.cap, self.initial * self.factor ** self.failures)
        if delay < self.cap:
            self.failures += 1
        if self.jitter:
            delay += delay * self.jitter * random.random()
        return delay

    def reset(self) -> None:
        """It worked: the next failure waits ``initial`` again."""
        self.failures = 0
