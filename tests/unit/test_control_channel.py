"""The gRPC control channel in one process: a backend's ControlServer on a Unix socket (and on
TCP with mutual TLS) and the gateway's ControlChannel reading it."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from aggregator.control import (
    ControlChannel,
    MemberDiscovery,
    MemberTargets,
    ReplicaClient,
    add_control_flags,
    client_credentials,
    parse_member_targets,
)
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.server.apiserver import GenericAPIServer, ServerConfig, add_common_flags, config_from_args
from genericapi.server.certs import ensure_certificates
from genericapi.server.control import ControlListen, ControlServer, DiscoveryFeed
from genericapi.server.control_proto import SERVICE_NAME, pb, rpc
from genericapi.server.discovery import DiscoveryDocuments
from grpc_health.v1 import health_pb2, health_pb2_grpc

from kubechain_cli.chain import free_port

PODS = ResourceInfo("", "v1", "Pod", "pods", "pod", True, subresources=("status",))
DEPLOYMENTS = ResourceInfo("apps", "v1", "Deployment", "deployments", "deployment", True)
WIDGETS = ResourceInfo("example.com", "v1", "Widget", "widgets", "widget", True)


def order(group: str, version: str) -> tuple[Any, ...]:
    return (group != "", group, version)


def docs(*infos: ResourceInfo) -> DiscoveryDocuments:
    return DiscoveryDocuments(list(infos), order)


class Recorder:
    """Callbacks of a ControlChannel, as queues the test can wait on."""

    def __init__(self) -> None:
        self.updates: asyncio.Queue[MemberDiscovery] = asyncio.Queue()
        self.serving: asyncio.Queue[tuple[str, str, bool]] = asyncio.Queue()
        self.update_times: list[float] = []

    def on_discovery(self, update: MemberDiscovery) -> None:
        self.update_times.append(time.perf_counter())
        self.updates.put_nowait(update)

    def on_serving(self, member: str, address: str, serving: bool) -> None:
        self.serving.put_nowait((member, address, serving))

    async def next_update(self, within: float = 3.0) -> MemberDiscovery:
        return await asyncio.wait_for(self.updates.get(), within)

    async def next_serving(self, within: float = 3.0) -> bool:
        return (await asyncio.wait_for(self.serving.get(), within))[2]


@pytest.fixture
def sock(tmp_path: Path) -> str:
    return str(tmp_path / "core-api.grpc.sock")


@pytest.fixture
async def backend(sock: str) -> AsyncIterator[ControlServer]:
    server = ControlServer("core-api", ControlListen(unix_socket=sock))
    server.feed.update(docs(PODS, DEPLOYMENTS))
    await server.start()
    yield server
    await server.stop()


async def channel_for(address: str, recorder: Recorder, name: str = "core-api",
                      **kwargs: Any) -> ControlChannel:
    channel = ControlChannel([MemberTargets(name, (address,))], recorder.on_discovery, recorder.on_serving,
                             min_backoff=0.02, max_backoff=0.2, **kwargs)
    await channel.start()
    return channel


async def eventually(check: Callable[[], bool], within: float = 3.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


# -- discovery stream ----------------------------------------------------------------------------

async def test_first_message_arrives_at_once_with_the_document(backend: ControlServer) -> None:
    recorder = Recorder()
    started = time.perf_counter()
    channel = await channel_for(backend.address, recorder)
    try:
        first = await recorder.next_update()
        assert time.perf_counter() - started < 1.0
        assert (first.member, first.index, first.generation) == ("core-api", 0, 1)
        assert first.instance == backend.feed.instance
        assert first.group_versions() == [("", "v1"), ("apps", "v1")]
        assert first.api["kind"] == "APIGroupDiscoveryList"
        assert first.api["apiVersion"] == "apidiscovery.k8s.io/v2"
        pods = first.api["items"][0]["versions"][0]["resources"][0]
        assert pods["resource"] == "pods" and pods["subresources"][0]["subresource"] == "status"
        assert first.apis["items"][0]["metadata"]["name"] == "apps"
        assert first.apis_json == backend.feed.current.apis
        assert channel.routes() == {("", "v1"): 0, ("apps", "v1"): 0}
        await eventually(lambda: channel.serving(0))
    finally:
        await channel.stop()
    assert not channel.serving(0)


def _server_with(sock: str, *infos: ResourceInfo) -> GenericAPIServer:
    config = ServerConfig(name="core-api", etcd_endpoints=["http://127.0.0.1:1"], grpc_unix_socket=sock)
    server = GenericAPIServer(config, order)
    for info in infos:
        server.add_store(Store(info, Strategy(info), server.etcd, f"/test/{info.plural}"))
    return server


async def test_publish_streams_only_changes_and_reaches_the_callback_in_milliseconds(sock: str) -> None:
    api = _server_with(sock, PODS, DEPLOYMENTS)
    assert api.control is not None
    api.publish()
    await api.control.start()
    recorder = Recorder()
    channel = await channel_for(api.control.address, recorder)
    try:
        assert (await recorder.next_update()).generation == 1
        # The same served set again: nothing is sent.
        api.publish()
        # A CRD becomes established: one update, generation 2, with the new group.
        latencies = []
        widgets = Store(WIDGETS, Strategy(WIDGETS), api.etcd, "/test/widgets")
        for round_ in range(20):
            if round_ % 2 == 0:
                api.add_store(widgets)
            else:
                api.remove_store(widgets)
            published = time.perf_counter()
            api.publish()
            update = await recorder.next_update()
            latencies.append(recorder.update_times[-1] - published)
            assert update.generation == round_ + 2
            assert (("example.com", "v1") in update.group_versions()) == (round_ % 2 == 0)
        latencies.sort()
        print(f"publish -> callback: median {latencies[10] * 1000:.2f} ms, max {latencies[-1] * 1000:.2f} ms")
        assert latencies[10] < 0.1
        assert recorder.updates.empty()
    finally:
        await channel.stop()
        await api.control.stop()


async def test_feed_coalesces_to_the_latest_and_ends_on_close() -> None:
    feed = DiscoveryFeed("core-api")
    stream = feed.updates()
    first = asyncio.ensure_future(stream.__anext__())
    await asyncio.sleep(0.01)
    assert not first.done()  # nothing published yet: no message
    feed.update(docs(PODS))
    assert (await asyncio.wait_for(first, 1)).generation == 1
    feed.update(docs(PODS, DEPLOYMENTS))
    feed.update(docs(PODS, DEPLOYMENTS, WIDGETS))
    latest = await asyncio.wait_for(stream.__anext__(), 1)
    assert latest.generation == 3 and b"example.com" in latest.apis
    feed.update(docs(PODS, DEPLOYMENTS, WIDGETS))  # unchanged: no new generation
    assert feed.current.generation == 3
    pending = asyncio.ensure_future(stream.__anext__())
    await asyncio.sleep(0.01)
    feed.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(pending, 1)


# -- reconnects ------------------------------------------------------------------------------------

async def test_client_reconnects_after_the_backend_restarts(sock: str) -> None:
    first = ControlServer("core-api", ControlListen(unix_socket=sock))
    first.feed.update(docs(PODS))
    await first.start()
    recorder = Recorder()
    channel = await channel_for(first.address, recorder)
    try:
        assert (await recorder.next_update()).instance == first.feed.instance
        assert await recorder.next_serving() is True
        await first.stop()
        assert await recorder.next_serving() is False
        second = ControlServer("core-api", ControlListen(unix_socket=sock))
        second.feed.update(docs(PODS, WIDGETS))
        restarted = time.perf_counter()
        await second.start()
        try:
            update = await recorder.next_update()
            print(f"reconnected in {(time.perf_counter() - restarted) * 1000:.0f} ms")
            assert update.instance == second.feed.instance != first.feed.instance
            assert update.generation == 1
            assert ("example.com", "v1") in update.group_versions()
            assert await recorder.next_serving() is True
            assert channel.routes()[("example.com", "v1")] == 0
        finally:
            await second.stop()
    finally:
        await channel.stop()


async def test_client_waits_for_a_socket_nobody_serves_yet(sock: str) -> None:
    recorder = Recorder()
    channel = await channel_for(f"unix://{sock}", recorder)
    try:
        client = channel.replicas[0][0]
        await eventually(lambda: client.last_error.startswith("UNAVAILABLE"))
        assert recorder.updates.empty() and not channel.serving(0)
        assert channel.routes() == {}
        server = ControlServer("core-api", ControlListen(unix_socket=sock))
        server.feed.update(docs(PODS))
        await server.start()
        try:
            assert (await recorder.next_update()).group_versions() == [("", "v1")]
            assert client.last_error == ""
        finally:
            await server.stop()
    finally:
        await channel.stop()


# -- health ----------------------------------------------------------------------------------------

async def test_health_serving_once_started_and_not_serving_in_graceful_stop(sock: str) -> None:
    server = ControlServer("core-api", ControlListen(unix_socket=sock))
    server.feed.update(docs(PODS))
    await server.start()
    recorder = Recorder()
    channel = await channel_for(server.address, recorder)
    try:
        async with grpc.aio.insecure_channel(server.address) as raw:
            stub = health_pb2_grpc.HealthStub(raw)
            for service in ("", SERVICE_NAME):
                answer = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2)
                assert answer.status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.aio.AioRpcError) as unknown:
                await stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=2)
            assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
            await recorder.next_update()
            assert await recorder.next_serving() is True

            await server.drain()
            assert await recorder.next_serving() is False
            answer = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=2)
            assert answer.status == health_pb2.HealthCheckResponse.NOT_SERVING
            # Draining keeps the discovery stream: a publish still reaches the gateway.
            server.feed.update(docs(PODS, WIDGETS))
            assert (await recorder.next_update()).generation == 2
            await server.stop()
            # Stopped: new calls fail instead of hanging.
            with pytest.raises(grpc.aio.AioRpcError) as gone:
                await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=2)
            assert gone.value.code() == grpc.StatusCode.UNAVAILABLE
        assert not channel.serving(0)
    finally:
        await channel.stop()
        await server.stop()


async def test_generic_api_server_reports_serving_only_after_start_and_drains_on_stop(sock: str) -> None:
    api = _server_with(sock, PODS)
    api.publish()
    assert api.control is not None and api.control.address == ""  # not listening before start
    await api.control.start()
    recorder = Recorder()
    channel = await channel_for(api.control.address, recorder)
    try:
        assert await recorder.next_serving() is True
        await api.end_watches()  # uvicorn's before_exit: the graceful stop's turn to NOT_SERVING
        assert await recorder.next_serving() is False
    finally:
        await channel.stop()
        await api.control.stop()


# -- bad inputs ------------------------------------------------------------------------------------

async def test_unknown_member_name_is_refused_with_not_found(backend: ControlServer) -> None:
    async with grpc.aio.insecure_channel(backend.address) as raw:
        call = rpc.ControlStub(raw).WatchDiscovery(pb.WatchDiscoveryRequest(member="extensions-api"), timeout=2)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            async for _ in call:
                pass
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        assert refused.value.details() == 'this is chain member "core-api", not "extensions-api"'
        # An empty name accepts whichever member answers.
        call = rpc.ControlStub(raw).WatchDiscovery(pb.WatchDiscoveryRequest(), timeout=2)
        update = await call.read()
        assert update.member == "core-api" and update.generation == 1
        call.cancel()

    recorder = Recorder()
    channel = await channel_for(backend.address, recorder, name="extensions-api")
    try:
        client = channel.replicas[0][0]
        await eventually(lambda: client.last_error.startswith("NOT_FOUND"))
        assert 'not "extensions-api"' in client.last_error
        await asyncio.sleep(0.1)
        assert recorder.updates.empty() and channel.latest() == [None]
    finally:
        await channel.stop()


async def test_closed_socket_mid_stream_marks_the_replica_down(tmp_path: Path) -> None:
    sock = str(tmp_path / "gone.sock")
    server = ControlServer("core-api", ControlListen(unix_socket=sock))
    server.feed.update(docs(PODS))
    await server.start()
    recorder = Recorder()
    channel = await channel_for(server.address, recorder)
    try:
        await recorder.next_update()
        assert await recorder.next_serving() is True
        await server.stop(grace=0)  # no drain first: the connection just goes (grpc removes the socket)
        assert await recorder.next_serving() is False
        client = channel.replicas[0][0]
        await eventually(lambda: client.last_error.startswith("UNAVAILABLE"))
        # The last known document stays, so routing still sends its group-versions to this member.
        assert channel.routes() == {("", "v1"): 0}
    finally:
        await channel.stop()


@pytest.mark.parametrize("value, message", [
    ("core-api", "expected NAME=ADDRESS"),
    ("=unix:///run/a.sock", "expected NAME=ADDRESS"),
    ("core-api=", "expected NAME=ADDRESS"),
    ("core-api=unix://relative/a.sock", "must be absolute"),
    ("core-api=localhost", "expected host:port"),
    ("core-api=localhost:http", "expected host:port"),
])
def test_member_targets_reject_malformed_values(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_member_targets([value])


def test_member_targets_parse_replicas_in_order() -> None:
    targets = parse_member_targets(["core-api=unix:///run/core.sock, unix:///run/core2.sock",
                                    "extensions-api=127.0.0.1:7001"])
    assert targets == [MemberTargets("core-api", ("unix:///run/core.sock", "unix:///run/core2.sock")),
                       MemberTargets("extensions-api", ("127.0.0.1:7001",))]
    with pytest.raises(ValueError, match="given twice"):
        parse_member_targets(["a=127.0.0.1:1", "a=127.0.0.1:2"])


def test_member_grpc_flag_feeds_the_parser() -> None:
    parser = argparse.ArgumentParser()
    add_control_flags(parser)
    args = parser.parse_args(["--member-grpc", "core-api=unix:///run/c.sock", "--member-grpc", "extensions-api=h:1"])
    assert [t.name for t in parse_member_targets(args.member_grpc)] == ["core-api", "extensions-api"]
    assert parser.parse_args([]).member_grpc == []


def test_backend_flags_configure_the_control_server(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_common_flags(parser, 0)
    config = config_from_args("core-api", parser.parse_args(["--grpc-bind-unix-socket", str(tmp_path / "g.sock")]))
    server = GenericAPIServer(config, order)
    assert server.control is not None and server.control.listen.unix_socket == str(tmp_path / "g.sock")
    assert server.control.feed.member == "core-api"
    config = config_from_args("core-api", parser.parse_args(["--grpc-port", "7443", "--tls-cert-file", "c.crt"]))
    listen = GenericAPIServer(config, order).control.listen  # type: ignore[union-attr]
    assert (listen.port, listen.tls_cert_file, listen.unix_socket) == (7443, "c.crt", "")
    assert GenericAPIServer(config_from_args("core-api", parser.parse_args([])), order).control is None


async def test_a_taken_port_or_missing_directory_fails_the_start(tmp_path: Path) -> None:
    port = free_port()
    first = ControlServer("core-api", ControlListen(port=port))
    await first.start()
    try:
        second = ControlServer("core-api", ControlListen(port=port))
        with pytest.raises(RuntimeError, match="Failed to bind"):
            await second.start()
    finally:
        await first.stop()
    nowhere = ControlServer("core-api", ControlListen(unix_socket=str(tmp_path / "missing" / "g.sock")))
    with pytest.raises(RuntimeError, match="Failed to bind"):
        await nowhere.start()


def test_control_server_needs_somewhere_to_listen() -> None:
    with pytest.raises(ValueError, match="Unix socket or a TCP port"):
        ControlServer("core-api", ControlListen())


# -- TCP with mutual TLS -------------------------------------------------------------------------

async def test_tcp_needs_a_client_certificate_signed_by_the_ca(tmp_path: Path) -> None:
    paths = ensure_certificates(tmp_path / "pki")
    crt, key = paths.pair("backend")
    port = free_port()
    server = ControlServer("extensions-api", ControlListen(port=port, tls_cert_file=crt, tls_key_file=key,
                                                           client_ca_file=paths.ca))
    server.feed.update(docs(WIDGETS))
    await server.start()
    address = f"127.0.0.1:{port}"
    try:
        recorder = Recorder()
        credentials = await client_credentials(paths.ca, *paths.pair("front-proxy-client"))
        channel = await channel_for(address, recorder, name="extensions-api", credentials=credentials)
        try:
            assert (await recorder.next_update()).group_versions() == [("example.com", "v1")]
        finally:
            await channel.stop()

        # Without a client certificate the handshake fails: no document, only errors.
        anonymous = Recorder()
        no_cert = ReplicaClient(MemberTargets("extensions-api", (address,)), 0, address, anonymous.on_discovery,
                                credentials=await client_credentials(paths.ca), min_backoff=0.02, max_backoff=0.2)
        no_cert.start()
        try:
            await eventually(lambda: no_cert.last_error.startswith("UNAVAILABLE"))
            assert anonymous.updates.empty()
        finally:
            await no_cert.stop()
    finally:
        await server.stop()
