"""Under ``run`` a member listens once its stores are up and runs its post-start hooks while it
serves, as kube-apiserver does (issue 15, cold start): the gateway's APIService controllers take their
lease and read CRDs through core-api while core-api's bootstrap hooks still write.

Checked here with a real etcd, a real GenericAPIServer run in-process with its real uvicorn server
and real gRPC health watches: while a post-start hook is held open the HTTP socket answers, its
``/readyz`` is 500 naming the hook, the control channel says ``ACCEPTING_SERVICE`` SERVING but ""
NOT_SERVING; once the hook returns, "" turns SERVING and ``/readyz`` 200. The gateway's
``ControlChannel`` calls ``on_accepting`` before ``on_serving``. A hook that fails ends ``run``
with exit status 255 (kube-apiserver's ``Fatalf`` on a failed post-start hook).
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from aggregator.control import ControlChannel, MemberTargets
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.server.apiserver import GenericAPIServer, ServerConfig
from genericapi.server.control import ACCEPTING_SERVICE
from grpc_health.v1 import health_pb2, health_pb2_grpc

CONFIGMAPS = ResourceInfo("", "v1", "ConfigMap", "configmaps", "configmap", True)
SERVING = health_pb2.HealthCheckResponse.SERVING


def order(group: str, version: str) -> tuple[Any, ...]:
    return (group != "", group, version)


async def _http_get(path: str, url_path: str) -> bytes:
    reader, writer = await asyncio.open_unix_connection(path)
    try:
        writer.write(f"GET {url_path} HTTP/1.1\r\nHost: core-api\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


def _server(tmp_path: Path, etcd_server: Any, name: str) -> tuple[GenericAPIServer, str, str]:
    http_sock = str(tmp_path / f"{name}.sock")
    grpc_sock = str(tmp_path / f"{name}.grpc.sock")
    config = ServerConfig(name="core-api", etcd_endpoints=[etcd_server.endpoint],
                          etcd_prefix=f"/{name}-{time.time_ns()}", unix_socket=http_sock,
                          grpc_unix_socket=grpc_sock, shutdown_delay=0.0)
    api = GenericAPIServer(config, order)
    api.add_store(Store(CONFIGMAPS, Strategy(CONFIGMAPS), api.etcd, f"{config.etcd_prefix}/configmaps"))
    return api, http_sock, grpc_sock


async def _wait_until(predicate: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def _stop(run: asyncio.Task[None], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    stop.set()
    try:
        await asyncio.wait_for(run, 15)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            loop.remove_signal_handler(sig)


async def test_hooks_run_while_the_socket_serves_and_serving_waits_for_them(tmp_path: Path,
                                                                            etcd_server: Any) -> None:
    api, http_sock, grpc_sock = _server(tmp_path, etcd_server, "hooks")
    release = asyncio.Event()
    hook_running = asyncio.Event()

    async def slow_hook(_server: GenericAPIServer) -> None:
        hook_running.set()
        await release.wait()

    api.add_post_start_hook(slow_hook, "slow-bootstrap")
    events: list[str] = []
    channel = ControlChannel(
        [MemberTargets("core-api", (f"unix://{grpc_sock}",))], on_discovery=lambda _u: None,
        on_serving=lambda _m, _a, serving: events.append(f"serving={serving}"),
        on_accepting=lambda member, _a: events.append(f"accepting {member}"))
    stop = asyncio.Event()
    run = asyncio.create_task(api.run(stop))
    await channel.start()
    grpc_channel = grpc.aio.insecure_channel(f"unix://{grpc_sock}")
    try:
        await _wait_until(lambda: "accepting core-api" in events, 30, "the member to say it accepts")
        assert hook_running.is_set() and not release.is_set()
        # The socket serves while the hook runs; readiness names the hook that is not done.
        reply = await _http_get(http_sock, "/readyz?verbose")
        assert reply.startswith(b"HTTP/1.1 500"), reply[:200]
        assert b"[-]poststarthook/slow-bootstrap failed: reason withheld" in reply
        assert b"[-]informer-sync failed" in reply
        reply = await _http_get(http_sock, "/api/v1/namespaces/default/configmaps")
        assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
        health = health_pb2_grpc.HealthStub(grpc_channel)
        overall = await health.Check(health_pb2.HealthCheckRequest(service=""))
        accepting = await health.Check(health_pb2.HealthCheckRequest(service=ACCEPTING_SERVICE))
        assert overall.status == health_pb2.HealthCheckResponse.NOT_SERVING
        assert accepting.status == SERVING
        assert not channel.serving(0) and "serving=True" not in events
        release.set()
        await _wait_until(lambda: channel.serving(0), 15, "SERVING once the hook returned")
        assert events.index("accepting core-api") < events.index("serving=True")
        reply = await _http_get(http_sock, "/readyz")
        assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    finally:
        release.set()
        await grpc_channel.close()
        await channel.stop()
        await _stop(run, stop)


async def test_start_alone_still_runs_the_hooks_before_it_returns(tmp_path: Path, etcd_server: Any) -> None:
    """Without ``run`` (a server embedded without uvicorn, tests) ``start`` returns with its hooks done."""
    api, _http, _grpc = _server(tmp_path, etcd_server, "alone")
    ran: list[str] = []

    async def hook(_server: GenericAPIServer) -> None:
        await asyncio.sleep(0.05)
        ran.append("hook")

    api.add_post_start_hook(hook, "alone-hook")
    await api.start()
    try:
        assert ran == ["hook"]
        assert await api.health.single("readyz", "poststarthook/alone-hook") == (200, "ok")
    finally:
        await api.stop()


async def test_a_failing_hook_ends_run_with_status_255(tmp_path: Path, etcd_server: Any) -> None:
    api, _http, _grpc = _server(tmp_path, etcd_server, "fails")

    async def broken(_server: GenericAPIServer) -> None:
        raise RuntimeError("cannot bootstrap")

    api.add_post_start_hook(broken, "broken-hook")
    loop = asyncio.get_running_loop()
    try:
        with pytest.raises(SystemExit) as exited:
            async with asyncio.timeout(30):  # in this task: SystemExit from another would end the loop
                await api.run()
        assert exited.value.code == 255
        assert "cannot bootstrap" in api.post_start_failure
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            loop.remove_signal_handler(sig)
