"""A member reports SERVING on its control channel only once its HTTP socket accepts connections.

The gateway sends requests to a member the moment its health watch says SERVING; before issue 15's
split of ``ControlServer.start`` into ``bind`` and ``serve`` the member said so at the end of its
lifespan start-up, before uvicorn bound the HTTP socket, so the gateway's first requests could meet
a refused connection. The control server now listens (NOT_SERVING, discovery already published)
from the start of ``GenericAPIServer.start``, so the gateway connects while the stores and hooks
start, and hears SERVING from uvicorn's bind. Real etcd, a real GenericAPIServer run in-process
with its real uvicorn server, a real gRPC health watch.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import grpc
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.server.apiserver import GenericAPIServer, ServerConfig
from grpc_health.v1 import health_pb2, health_pb2_grpc

CONFIGMAPS = ResourceInfo("", "v1", "ConfigMap", "configmaps", "configmap", True)
#: How long the test holds the lifespan start-up open after ``start`` returned: the window in which a
#: SERVING sent from ``start`` would reach the watcher while the HTTP socket does not exist yet.
HOLD = 1.0


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


async def test_serving_is_reported_only_once_the_http_socket_accepts(tmp_path: Path, etcd_server: Any) -> None:
    http_sock = str(tmp_path / "core-api.sock")
    grpc_sock = str(tmp_path / "core-api.grpc.sock")
    config = ServerConfig(name="core-api", etcd_endpoints=[etcd_server.endpoint],
                          etcd_prefix=f"/order-{time.time_ns()}", unix_socket=http_sock,
                          grpc_unix_socket=grpc_sock, shutdown_delay=0.0)
    api = GenericAPIServer(config, order)
    api.add_store(Store(CONFIGMAPS, Strategy(CONFIGMAPS), api.etcd, f"{config.etcd_prefix}/configmaps"))
    started = asyncio.Event()
    original_start = api.start

    async def slow_start() -> None:
        # The lifespan's start-up lasts HOLD longer than ``start``: uvicorn binds only after it.
        await original_start()
        started.set()
        await asyncio.sleep(HOLD)

    api.start = slow_start  # type: ignore[method-assign]  # build_app takes on_start=self.start in run()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    run = asyncio.create_task(api.run(stop))
    channel = grpc.aio.insecure_channel(f"unix://{grpc_sock}")
    seen: list[tuple[float, int]] = []
    try:
        # The control channel is up (NOT_SERVING) while the server still starts: the gateway's
        # watch connects before the stores and post-start hooks are done.
        watch = None
        deadline = time.monotonic() + 20
        while watch is None:
            assert time.monotonic() < deadline, "control channel never listened"
            if await asyncio.to_thread(Path(grpc_sock).exists):
                watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""))
            else:
                await asyncio.sleep(0.005)
        async for answer in watch:
            seen.append((time.monotonic(), answer.status))
            if answer.status == health_pb2.HealthCheckResponse.SERVING:
                # The moment the gateway would send its first request, it is accepted and answered.
                reply = await _http_get(http_sock, "/readyz")
                assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
                break
        assert seen[0][1] == health_pb2.HealthCheckResponse.NOT_SERVING
        assert seen[-1][1] == health_pb2.HealthCheckResponse.SERVING
        assert started.is_set()
        watch.cancel()
    finally:
        await channel.close()
        stop.set()
        try:
            await asyncio.wait_for(run, 15)
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
                loop.remove_signal_handler(sig)


async def test_start_alone_reports_serving_at_its_end(tmp_path: Path, etcd_server: Any) -> None:
    """Without ``run`` (a server embedded without uvicorn) ``start`` still ends SERVING."""
    grpc_sock = str(tmp_path / "alone.grpc.sock")
    config = ServerConfig(name="core-api", etcd_endpoints=[etcd_server.endpoint],
                          etcd_prefix=f"/alone-{time.time_ns()}", grpc_unix_socket=grpc_sock)
    api = GenericAPIServer(config, order)
    await api.start()
    channel = grpc.aio.insecure_channel(f"unix://{grpc_sock}")
    try:
        answer = await asyncio.wait_for(health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service="")), 5)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await channel.close()
        await api.stop()
