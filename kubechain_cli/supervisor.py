"""``kubechain up`` keeps its chain running: a child that dies is started again.

Like a process manager (or the kubelet for kube-apiserver's static pod), every child (etcd,
each backend replica, each gateway) that exits while the chain is up is restarted with the
same command line after an exponential backoff (0.5 s doubling to 30 s, reset once the child
has stayed up for 30 s), and each exit and restart is logged with its count. The chain stops
only when asked (Ctrl-C or SIGTERM), never because a child died.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from genericapi.backoff import Backoff

from .chain import Chain

__all__ = ["Supervisor"]


class Supervisor:
    def __init__(self, chain: Chain, *, initial: float = 0.5, cap: float = 30.0, stable_after: float = 30.0,
                 out: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.chain = chain
        self.initial = initial
        self.cap = cap
        self.stable_after = stable_after
        self.out = out or sys.stderr
        self.clock = clock
        #: Restarts so far, per child.
        self.restarts: dict[str, int] = {}
        self._backoff: dict[str, Backoff] = {}
        self._due: dict[str, float] = {}
        self._started: dict[str, float] = {name: clock() for name in chain.processes}

    def poll(self) -> None:
        """Look at every child once: schedule a restart for a new exit, restart those now due."""
        now = self.clock()
        for name, proc in list(self.chain.processes.items()):
            if proc.poll() is None:
                if now - self._started.get(name, now) >= self.stable_after and name in self._backoff:
                    self._backoff[name].reset()
                continue
            due = self._due.get(name)
            if due is None:
                delay = self._backoff.setdefault(name, Backoff(self.initial, self.cap, jitter=0.1)).next()
                self._due[name] = now + delay
                self._say(f"{name} exited with {proc.returncode}; restarting in {delay:.1f}s")
            elif now >= due:
                del self._due[name]
                self.chain.respawn(name)
                self._started[name] = now
                self.restarts[name] = self.restarts.get(name, 0) + 1
                self._say(f"{name} restarted (restart {self.restarts[name]})")

    def _say(self, text: str) -> None:
        print(f"kubechain: {text}", file=self.out, flush=True)
