"""In which order the gateway tries a chain member's replicas (``Gateway._pick``).

The replicas whose gRPC health says SERVING take turns; the others come after them, only as a
fallback (the proxy tries the next upstream when one refuses or dies), so one that hangs, is
starting or drains gets no requests while another serves. None serving, or replica lists that
do not line up: all of them take turns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aggregator.auth import Authenticator
from aggregator.control import ControlChannel, MemberTargets
from aggregator.routing import RoutingTable
from aggregator.server import Gateway, GatewayConfig
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.server.control import ControlListen, ControlServer
from genericapi.server.discovery import DiscoveryDocuments

CORE = ("unix:///run/core-api.sock", "unix:///run/core-api-1.sock")
EXT = ("unix:///run/extensions-api.sock", "unix:///run/extensions-api-1.sock")
PODS = ResourceInfo("", "v1", "Pod", "pods", "pod", True)
WIDGETS = ResourceInfo("example.com", "v1", "Widget", "widgets", "widget", True)


async def eventually(check: Callable[[], bool], within: float = 3.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[list[ControlServer]]:
    started = []
    for i, info in enumerate((PODS, PODS)):
        server = ControlServer("core-api", ControlListen(unix_socket=str(tmp_path / f"core-{i}.grpc.sock")))
        server.feed.update(DiscoveryDocuments([info], lambda g, v: (g, v)))
        await server.start()
        started.append(server)
    yield started
    for server in started:
        await server.stop()


@pytest.fixture
async def gateway(servers: list[ControlServer], tmp_path: Path) -> AsyncIterator[Gateway]:
    gw = Gateway(GatewayConfig(members=[list(CORE), list(EXT)]), Authenticator({}), None)
    ext_sock = str(tmp_path / "nobody.grpc.sock")  # extensions-api: never up in these tests
    gw.control = ControlChannel([MemberTargets("core-api", tuple(s.address for s in servers)),
                                 MemberTargets("extensions-api", (f"unix://{ext_sock}", f"unix://{ext_sock}-1"))],
                                on_discovery=lambda _u: None, min_backoff=0.02, max_backoff=0.2)
    gw.table = RoutingTable((CORE, EXT), {("", "v1"): 0, ("example.com", "v1"): 1})
    await gw.control.start()
    yield gw
    await gw.control.stop()


def pick(gw: Gateway, path: str) -> list[str]:
    return gw._pick({"type": "http", "path": path})


def firsts(gw: Gateway, path: str, times: int = 6) -> set[str]:
    """The replicas tried first over several requests."""
    return {pick(gw, path)[0] for _ in range(times)}


async def test_serving_replicas_take_turns_the_others_come_last(gateway: Gateway,
                                                                servers: list[ControlServer]) -> None:
    assert gateway.control is not None
    await eventually(lambda: all(c.serving for c in gateway.control.replicas[0]))  # type: ignore[union-attr]
    assert firsts(gateway, "/api/v1/pods") == set(CORE)
    assert sorted(pick(gateway, "/api/v1/pods")) == sorted(CORE)
    await servers[1].drain()  # NOT_SERVING, as a replica that began its graceful stop
    await eventually(lambda: firsts(gateway, "/api/v1/namespaces/a/pods") == {CORE[0]})
    assert pick(gateway, "/api/v1/pods") == [CORE[0], CORE[1]]
    assert pick(gateway, "/apis/nothing.example.com/v1/things") == [CORE[0], CORE[1]]  # unknown: first member's
    await servers[0].drain()
    # No replica serving: all take turns (a connection may still work; 503 only if none does).
    await eventually(lambda: firsts(gateway, "/api/v1/pods") == set(CORE))


async def test_member_with_no_serving_replica_gets_all_of_them_in_turn(gateway: Gateway) -> None:
    assert firsts(gateway, "/apis/example.com/v1/widgets") == set(EXT)
    assert sorted(pick(gateway, "/openapi/v3/apis/example.com/v1")) == sorted(EXT)


async def test_replica_lists_that_do_not_line_up_are_used_whole(servers: list[ControlServer]) -> None:
    channel = ControlChannel([MemberTargets("core-api", (servers[0].address,))], on_discovery=lambda _u: None)
    await channel.start()
    try:
        await eventually(lambda: channel.serving(0))
        assert channel.split_serving(0, CORE) == (list(CORE), [])  # 2 URLs, 1 control address
        assert channel.split_serving(5, CORE) == (list(CORE), [])  # no such member
        assert channel.split_serving(0, CORE[:1]) == ([CORE[0]], [])
    finally:
        await channel.stop()


def test_member_index_of_paths() -> None:
    table = RoutingTable((CORE, EXT), {("", "v1"): 0, ("example.com", "v1"): 1})
    assert table.member_index("/apis/example.com/v1/namespaces/a/widgets") == 1
    assert table.member_index("/openapi/v3/apis/example.com/v1") == 1
    assert table.member_index("/api/v1/pods") == 0
    assert table.member_index("/apis/unknown.io/v1/x") == 0
    assert table.member_index("/healthz") == 0
    assert RoutingTable(()).upstreams("/api/v1/pods") == []


def test_without_control_channel_every_replica_takes_turns() -> None:
    gw = Gateway(GatewayConfig(members=[list(CORE), list(EXT)]), Authenticator({}), None)
    gw.table = RoutingTable((CORE, EXT), {("example.com", "v1"): 1})
    assert firsts(gw, "/apis/example.com/v1/widgets") == set(EXT)
    assert sorted(pick(gw, "/api/v1/pods")) == sorted(CORE)
    gw.table = RoutingTable(())
    assert pick(gw, "/api/v1/pods") == []
