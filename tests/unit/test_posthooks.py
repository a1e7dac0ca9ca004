"""core-api's bootstrap hooks run together and are retried as kube-apiserver runs its post-start hooks
(coreapi.posthooks): each hook's ``poststarthook/<name>`` readiness check fails until that hook
succeeded, whatever the others do."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from coreapi.posthooks import HookGroup
from genericapi.server.health import HealthCheckError, HealthChecks


class Server:
    """What HookGroup uses of a GenericAPIServer: its post-start sequence and its real health checks."""

    def __init__(self) -> None:
        self.post_start: list[Any] = []
        self.health = HealthChecks()

    async def start(self) -> None:
        for hook in self.post_start:
            await hook(self)


async def _check(server: Server, name: str) -> str:
    try:
        await server.health.checks("readyz")[f"poststarthook/{name}"]()
    except HealthCheckError as err:
        return str(err)
    return "ok"


async def test_hooks_of_a_group_run_at_once() -> None:
    """Each hook waits for something the other does: one after the other, neither would end."""
    server = Server()
    group = HookGroup(server)  # type: ignore[arg-type]
    first, second = asyncio.Event(), asyncio.Event()

    async def a(_s: Any) -> None:
        first.set()
        await second.wait()

    async def b(_s: Any) -> None:
        await first.wait()
        second.set()

    group.add(a, "a")
    group.add(b, "b", "b-too")
    await asyncio.wait_for(server.start(), 5)
    assert [await _check(server, n) for n in ("a", "b", "b-too")] == ["ok", "ok", "ok"]


async def test_a_failing_hook_is_retried_and_its_check_fails_until_it_succeeds() -> None:
    server = Server()
    group = HookGroup(server, first_delay=0.01, max_delay=0.02)  # type: ignore[arg-type]
    calls = {"flaky": 0, "steady": 0}
    may_succeed = asyncio.Event()

    async def flaky(_s: Any) -> None:
        calls["flaky"] += 1
        if not may_succeed.is_set():
            raise RuntimeError("etcd said no")

    async def steady(_s: Any) -> None:
        calls["steady"] += 1

    group.add(flaky, "flaky")
    group.add(steady, "steady")
    start = asyncio.create_task(server.start())
    for _ in range(500):
        if calls["flaky"] >= 3:
            break
        await asyncio.sleep(0.01)
    assert calls["flaky"] >= 3, "the failing hook is tried again"
    assert await _check(server, "flaky") == "not finished"
    assert await _check(server, "steady") == "ok"  # its own check does not wait for the other hook
    assert calls["steady"] == 1
    assert not start.done()  # the server is not started while a hook has not succeeded
    may_succeed.set()
    await asyncio.wait_for(start, 5)
    assert await _check(server, "flaky") == "ok"


async def test_the_retry_delay_doubles_up_to_its_cap(caplog: pytest.LogCaptureFixture) -> None:
    server = Server()
    group = HookGroup(server, first_delay=0.01, max_delay=0.04)  # type: ignore[arg-type]
    tries = 0

    async def hook(_s: Any) -> None:
        nonlocal tries
        tries += 1
        if tries < 5:
            raise ValueError(f"bad {tries}")

    group.add(hook, "slow")
    with caplog.at_level("WARNING", logger="coreapi.posthooks"):
        await asyncio.wait_for(server.start(), 5)
    delays = [r.getMessage().rsplit("again in ", 1)[1].split("s:")[0] for r in caplog.records]
    assert delays == ["0.01", "0.02", "0.04", "0.04"]  # one warning per failure
    assert "bad 1" in caplog.records[0].getMessage() and "attempt 1" in caplog.records[0].getMessage()
    assert tries == 5


async def test_a_stop_during_the_retries_ends_the_start_and_leaves_the_check_failing() -> None:
    server = Server()
    group = HookGroup(server, first_delay=0.01, max_delay=0.01)  # type: ignore[arg-type]

    async def never(_s: Any) -> None:
        raise RuntimeError("still broken")

    group.add(never, "never")
    start = asyncio.create_task(server.start())
    await asyncio.sleep(0.05)
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await start
    assert await _check(server, "never") == "not finished"


async def test_a_group_takes_its_place_in_the_servers_sequence() -> None:
    server = Server()
    order: list[str] = []

    async def before(_s: Any) -> None:
        order.append("before")

    async def inside(_s: Any) -> None:
        order.append("inside")

    async def after(_s: Any) -> None:
        order.append("after")

    server.post_start.append(before)
    HookGroup(server).add(inside, "inside")  # type: ignore[arg-type]
    server.post_start.append(after)
    await server.start()
    assert order == ["before", "inside", "after"]
