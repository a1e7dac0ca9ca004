"""The backend end of the gRPC control channel: streams this member's discovery to the gateway.

A backend (core-api, extensions-api) serves ``kubechain.control.v1.Control/WatchDiscovery`` and
the standard ``grpc.health.v1.Health`` on its own socket, next to the HTTP API. The gateway keeps
one stream open per backend and learns each change of the served set (a CRD established, a
version gone) the moment ``GenericAPIServer.publish()`` makes it, instead of polling ``/apis``.

``DiscoveryFeed.update`` is the publish hook: it encodes the two aggregated documents, and when
they differ from the last ones bumps the generation and wakes every open stream. A stream sends
the latest document, so a slow reader skips intermediate ones but never misses the last.
Health is NOT_SERVING until ``start()`` completes and again from ``drain()`` (graceful stop);
``ACCEPTING_SERVICE`` turns SERVING earlier, once the HTTP socket accepts (``accepting()``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import orjson
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from .control_proto import SERVICE_NAME, pb, rpc
from .discovery import DiscoveryDocuments

log = logging.getLogger(__name__)

#: Let the gateway's keepalive pings through (gRPC's default answers pings more often than every
#: 5 minutes with GOAWAY); the gateway pings every 10 s to notice a backend that vanished silently.
#: The key is ``min_ping_interval_without_data_ms`` (the C macro's name says RECV, its string does
#: not; the RECV spelling is ignored, and the gateway's streams were cut with GOAWAY "too_many_pings"
#: every minute or two). No SO_REUSEPORT (gRPC's default): a second server on a taken port must
#: fail, not share it.
SERVER_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.so_reuseport", 0),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
]


#: The health service name a member reports SERVING under once its HTTP socket accepts requests,
#: before its post-start hooks are done ("" and ``SERVICE_NAME``: ready, the hooks done too).
ACCEPTING_SERVICE = "kubechain.control.v1.Control/accepting"


@dataclass(frozen=True)
class Snapshot:
    """One discovery state as sent: generation 0 means nothing was published yet."""

    generation: int
    api: bytes
    apis: bytes


class DiscoveryFeed:
    """The latest discovery of this member, and a wake-up for streams waiting on a change.

    Call ``update`` on the event loop's thread (``publish()`` runs there).
    """

    def __init__(self, member: str) -> None:
        self.member = member
        self.instance = uuid.uuid4().hex
        self.current = Snapshot(0, b"", b"")
        self._changed = asyncio.Event()
        self._closed = False

    def update(self, discovery: DiscoveryDocuments) -> None:
        """Record ``discovery``; wake the streams when it differs from the last one."""
        api = orjson.dumps(discovery.aggregated_api)
        apis = orjson.dumps(discovery.aggregated_apis)
        if api == self.current.api and apis == self.current.apis:
            return
        self.current = Snapshot(self.current.generation + 1, api, apis)
        self._wake()

    def close(self) -> None:
        """End every stream (graceful stop); later ``updates()`` end at once."""
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def message(self, snapshot: Snapshot) -> Any:
        return pb.DiscoveryUpdate(member=self.member, instance=self.instance, generation=snapshot.generation,
                                  api=snapshot.api, apis=snapshot.apis)

    async def updates(self) -> AsyncIterator[Any]:
        """The current document at once (once there is one), then each newer one."""
        sent = 0
        while not self._closed:
            # Take the event before reading the snapshot: a change between the two cannot be lost.
            changed = self._changed
            snapshot = self.current
            if snapshot.generation != sent:
                sent = snapshot.generation
                yield self.message(snapshot)
            if self._changed is changed and not self._closed:
                await changed.wait()


_ServicerBase: Any = rpc.ControlServicer


class _ControlServicer(_ServicerBase):
    def __init__(self, feed: DiscoveryFeed) -> None:
        self._feed = feed

    async def WatchDiscovery(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        if request.member and request.member != self._feed.member:
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f'this is chain member "{self._feed.member}", not "{request.member}"')
        async for update in self._feed.updates():
            yield update


@dataclass(frozen=True)
class ControlListen:
    """Where the control server listens: a Unix socket, or TCP (with TLS when a cert is given)."""

    unix_socket: str = ""
    bind_address: str = "127.0.0.1"
    port: int = 0
    tls_cert_file: str = ""
    tls_key_file: str = ""
    #: Require client certificates signed by this CA (the gateway's proxy client certificate).
    client_ca_file: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.unix_socket) or self.port > 0


class ControlServer:
    """gRPC server of one backend: ``Control`` and ``grpc.health.v1.Health``."""

    def __init__(self, member: str, listen: ControlListen) -> None:
        if not listen.enabled:
            raise ValueError("the control server needs a Unix socket or a TCP port")
        self.listen = listen
        self._unix_target = f"unix://{os.path.abspath(listen.unix_socket)}" if listen.unix_socket else ""
        self.feed = DiscoveryFeed(member)
        self.health = health.aio.HealthServicer()
        self._server: grpc.aio.Server | None = None
        self.address = ""
        self._draining = False

    async def start(self) -> None:
        """Listen, then report SERVING (call once the API server itself is started)."""
        await self.bind()
        await self.serve()

    async def bind(self) -> None:
        """Listen, reporting NOT_SERVING (again: nothing): the gateway connects and gets the discovery
        stream while the API server still starts, and hears SERVING the moment ``serve`` is called."""
        if self._server is not None:
            return
        for service in ("", SERVICE_NAME, ACCEPTING_SERVICE):
            await self.health.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)
        server = grpc.aio.server(options=SERVER_OPTIONS)
        rpc.add_ControlServicer_to_server(_ControlServicer(self.feed), server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        if self.listen.unix_socket:
            self.address = self._unix_target
            server.add_insecure_port(self.address)
        else:
            target = f"{self.listen.bind_address}:{self.listen.port}"
            if self.listen.tls_cert_file:
                server.add_secure_port(target, await self._credentials())
            else:
                server.add_insecure_port(target)
            self.address = target
        await server.start()
        self._server = server
        log.info("control channel of %s on %s", self.feed.member, self.address)

    async def accepting(self) -> None:
        """Report the HTTP socket accepting requests (``ACCEPTING_SERVICE`` SERVING) while the
        post-start hooks may still run: the gateway's own controllers may use this member now
        (kube's loopback client works from the moment the server listens); readiness waits for ``serve``."""
        if not self._draining:
            await self.health.set(ACCEPTING_SERVICE, health_pb2.HealthCheckResponse.SERVING)

    async def serve(self) -> None:
        """Report SERVING (the API server is started)."""
        await self.accepting()
        for service in ("", SERVICE_NAME):
            await self.health.set(service, health_pb2.HealthCheckResponse.SERVING)

    async def _credentials(self) -> grpc.ServerCredentials:
        listen = self.listen
        cert, key = await asyncio.gather(asyncio.to_thread(Path(listen.tls_cert_file).read_bytes),
                                         asyncio.to_thread(Path(listen.tls_key_file).read_bytes))
        ca = await asyncio.to_thread(Path(listen.client_ca_file).read_bytes) if listen.client_ca_file else None
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=ca is not None)

    async def drain(self) -> None:
        """Graceful stop begins: health turns NOT_SERVING for good; discovery streams stay open."""
        self._draining = True
        await self.health.enter_graceful_shutdown()

    async def stop(self, grace: float = 0.2) -> None:
        """End the discovery streams, then stop (health watches get ``grace`` seconds to read
        NOT_SERVING before they are cancelled)."""
        if not self._draining:
            await self.drain()
        self.feed.close()
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace)
