"""The supervisor's rules: restart after a backoff that doubles and resets, log and count each."""

from __future__ import annotations

import io
from typing import Any

from kubechain_cli.supervisor import Supervisor


class FakeProc:
    def __init__(self, code: int | None = None) -> None:
        self.returncode = code

    def poll(self) -> int | None:
        return self.returncode


class FakeChain:
    def __init__(self, names: list[str]) -> None:
        self.processes: dict[str, Any] = {name: FakeProc() for name in names}
        self.respawned: list[str] = []

    def respawn(self, name: str) -> None:
        self.respawned.append(name)
        self.processes[name] = FakeProc()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_dead_child_is_restarted_after_a_doubling_backoff() -> None:
    chain, clock, out = FakeChain(["etcd", "core-api"]), Clock(), io.StringIO()
    sup = Supervisor(chain, initial=0.5, cap=4.0, stable_after=30.0, out=out, clock=clock)  # type: ignore[arg-type]
    delays = []
    for _ in range(5):
        chain.processes["core-api"].returncode = -9
        sup.poll()  # notices the exit, schedules the restart
        scheduled = sup._due["core-api"] - clock.now
        delays.append(round(scheduled, 2))
        clock.now += scheduled * 0.5
        sup.poll()
        assert chain.respawned.count("core-api") == len(delays) - 1  # not before it is due
        clock.now += scheduled
        sup.poll()
        assert chain.respawned.count("core-api") == len(delays)
    # 0.5, 1, 2, 4, 4 (each up to 10% more: jitter)
    for delay, base in zip(delays, [0.5, 1.0, 2.0, 4.0, 4.0], strict=True):
        assert base <= delay <= base * 1.1
    assert sup.restarts == {"core-api": 5}
    assert "etcd" not in chain.respawned
    text = out.getvalue()
    assert "kubechain: core-api exited with -9; restarting in" in text
    assert "kubechain: core-api restarted (restart 5)" in text


def test_the_backoff_resets_once_a_child_stayed_up() -> None:
    chain, clock = FakeChain(["aggregator"]), Clock()
    sup = Supervisor(chain, initial=0.5, cap=30.0, stable_after=30.0, out=io.StringIO(), clock=clock)  # type: ignore[arg-type]
    for _ in range(3):
        chain.processes["aggregator"].returncode = 1
        sup.poll()
        clock.now = sup._due["aggregator"]
        sup.poll()
    clock.now += 31  # stayed up
    sup.poll()
    chain.processes["aggregator"].returncode = 1
    sup.poll()
    assert 0.5 <= sup._due["aggregator"] - clock.now <= 0.55
