"""The gateway end of the gRPC control channel: each backend's discovery, pushed, and its health.

For every replica of every chain member the gateway keeps one ``ReplicaClient``: a
``WatchDiscovery`` stream (the member's aggregated discovery for ``/api`` and ``/apis``, sent at
once and again whenever the member's ``publish()`` changes it) and a ``grpc.health.v1.Health``
watch (SERVING / NOT_SERVING), both on one channel. When either ends, the client marks the
replica not serving and reconnects with exponential backoff (50 ms up to 2 s), so a restarted
backend is picked up within the backoff of coming back.

How the Gateway uses it (``server.py`` wires it; see ``ControlChannel``)::

    add_control_flags(parser)       # in main(); chain.py passes them (Chain.pass_control_addresses)
    # --member-grpc lists the members in --member's order: MemberDiscovery.index and routes()
    # index RoutingTable.members. Create the channel on the event loop (in run()/Gateway.start).
    channel = ControlChannel(parse_member_targets(args.member_grpc), on_discovery=on_update,
                             on_serving=on_serving, credentials=await client_credentials(ca, crt, key))
    await channel.start()           # in Gateway.start, instead of the 10 s refresh loop
    ...
    def on_update(update: MemberDiscovery) -> None:
        # Called on the event loop for every update of every replica. Rebuild the routing table
        # whole from the latest discovery of every member (first member wins a group-version,
        # as the delegation order says) and swap it in:
        gateway.table = RoutingTable(gateway.table.members, channel.routes())
    ...
    await channel.stop()            # in Gateway.stop

``channel.latest()`` holds, per member, the last document received (``MemberDiscovery.api`` /
``.apis`` as dicts and as the raw JSON bytes), enough to serve merged aggregated discovery
without asking the members. ``channel.serving(index)`` says whether any replica of a member
reports SERVING (for ``/readyz``), and ``on_serving`` is called on each change.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import orjson
from genericapi.backoff import Backoff
from genericapi.controllers.tasks import cancel_and_wait
from genericapi.server.control import ACCEPTING_SERVICE
from genericapi.server.control_proto import pb, rpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

log = logging.getLogger(__name__)

#: Reconnect quickly (gRPC's own default backoff starts at 1 s and grows to 2 minutes) and ping
#: every 10 s so a backend that vanished or hangs without closing its connection is noticed. The
#: streams are idle between updates: gRPC stops pinging after 2 pings without data unless
#: ``max_pings_without_data`` is 0, and waits a minute for an ack unless ``ping_timeout_ms`` says
#: otherwise (measured: a SIGSTOPped backend stayed SERVING for minutes; with both, 10-15 s).
#: Reconnects are capped at 250 ms: a member is usually only starting (its socket not there yet),
#: and a 2 s cap cost a cold start up to 2 s after core-api served (issue 15; an attempt on a Unix
#: socket or to a local port costs microseconds).
CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 250),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.http2.ping_timeout_ms", 5_000),
]


#: The longest wait between tries before a member has answered for the first time (it is starting).
STARTING_BACKOFF_CAP = 0.25


@dataclass(frozen=True)
class MemberTargets:
    """One chain member as configured: its name and the control addresses of its replicas."""

    name: str
    addresses: tuple[str, ...]


def add_control_flags(parser: argparse.ArgumentParser) -> None:
    """``--member-grpc NAME=ADDRESS[,ADDRESS...]``, repeated in chain order (as ``--member``)."""
    parser.add_argument("--member-grpc", action="append", default=[],
                        help="a chain member's gRPC control address(es), in chain order, as NAME=ADDRESS[,ADDRESS] "
                             "(unix:///path or host:port); streams its discovery and health to the gateway")


def parse_member_targets(values: Sequence[str]) -> list[MemberTargets]:
    """``NAME=ADDRESS[,ADDRESS...]`` per member, in chain order (core-api first). An address is
    ``unix:///absolute/path`` or ``host:port``. Raises ValueError on a malformed value."""
    out: list[MemberTargets] = []
    for value in values:
        name, sep, rest = value.partition("=")
        name = name.strip()
        addresses = tuple(a.strip() for a in rest.split(",") if a.strip())
        if not sep or not name or not addresses:
            raise ValueError(f"member control address {value!r}: expected NAME=ADDRESS[,ADDRESS...]")
        for address in addresses:
            if address.startswith("unix:"):
                if not address.removeprefix("unix://").removeprefix("unix:").startswith("/"):
                    raise ValueError(f"member control address {address!r}: a Unix socket path must be absolute")
            elif not address.rpartition(":")[2].isdigit():
                raise ValueError(f"member control address {address!r}: expected host:port or unix:///path")
        if any(m.name == name for m in out):
            raise ValueError(f"member {name!r} is given twice")
        out.append(MemberTargets(name, addresses))
    return out


async def client_credentials(ca_file: str, cert_file: str = "", key_file: str = "") -> grpc.ChannelCredentials:
    """TLS to TCP backends: verify them with the CA, present the gateway's proxy client cert."""
    def read(path: str) -> bytes | None:
        return Path(path).read_bytes() if path else None

    ca, cert, key = await asyncio.gather(*(asyncio.to_thread(read, p) for p in (ca_file, cert_file, key_file)))
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


@dataclass(frozen=True)
class MemberDiscovery:
    """One discovery update from one replica of a chain member."""

    member: str
    #: Position of the member in the chain (0: the first, core-api).
    index: int
    #: The replica's control address.
    address: str
    #: The backend process run that sent it; ``generation`` counts from 1 within one instance.
    instance: str
    generation: int
    #: apidiscovery.k8s.io/v2 APIGroupDiscoveryList of ``/api`` and of ``/apis``, decoded and raw.
    api: dict[str, Any]
    apis: dict[str, Any]
    api_json: bytes
    apis_json: bytes
    #: ``time.monotonic()`` when it arrived.
    received: float = field(default=0.0, compare=False)

    def group_versions(self) -> list[tuple[str, str]]:
        """(group, version) pairs served by the member, legacy group first, in the document's order."""
        out: list[tuple[str, str]] = []
        for doc in (self.api, self.apis):
            for item in doc.get("items") or []:
                group = (item.get("metadata") or {}).get("name") or ""
                out.extend((group, v["version"]) for v in item.get("versions") or [] if v.get("version"))
        return out


OnDiscovery = Callable[[MemberDiscovery], None]
#: (member name, replica address, serving)
OnServing = Callable[[str, str, bool], None]
#: (member name, replica address): the replica's HTTP socket accepts requests (its post-start hooks
#: may still run; SERVING follows once they are done).
OnAccepting = Callable[[str, str], None]


def _decode(member: MemberTargets, index: int, address: str, update: Any) -> MemberDiscovery:
    api: dict[str, Any] = orjson.loads(update.api) if update.api else {}
    apis: dict[str, Any] = orjson.loads(update.apis) if update.apis else {}
    return MemberDiscovery(update.member or member.name, index, address, update.instance, update.generation,
                           api, apis, bytes(update.api), bytes(update.apis), time.monotonic())


class ReplicaClient:
    """Keeps the discovery stream and health watch of one backend replica open."""

    def __init__(self, member: MemberTargets, index: int, address: str, on_discovery: OnDiscovery,
                 on_serving: OnServing | None = None, credentials: grpc.ChannelCredentials | None = None,
                 min_backoff: float = 0.05, max_backoff: float = 2.0, on_accepting: OnAccepting | None = None) -> None:
        self.member = member
        self.index = index
        self.address = address
        self.latest: MemberDiscovery | None = None
        self.serving = False
        #: Why the last session ended ("" while connected or before the first attempt).
        self.last_error = ""
        self._on_discovery = on_discovery
        self._on_serving = on_serving
        self._on_accepting = on_accepting
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        if address.startswith("unix:") or credentials is None:
            self._channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        else:
            self._channel = grpc.aio.secure_channel(address, credentials, options=CHANNEL_OPTIONS)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"control {self.member.name} {self.address}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await self._channel.close(grace=None)
        self._set_serving(False)

    async def _run(self) -> None:
        # Until the member has answered once it is most likely starting: retry at most every
        # STARTING_BACKOFF_CAP so the gateway sees it serve at once (a cold start waited up to 2 s).
        backoff = Backoff(self._min_backoff, min(self._max_backoff, STARTING_BACKOFF_CAP), jitter=0.2)
        answered = False
        while True:
            received = False
            try:
                received = await self._session()
                self.last_error = "stream ended"
            except grpc.aio.AioRpcError as err:
                self.last_error = f"{err.code().name}: {err.details()}"
                if err.code() == grpc.StatusCode.NOT_FOUND:
                    log.error("control channel %s: %s", self.address, self.last_error)
            self._set_serving(False)
            if received:
                if not answered:
                    answered = True
                    backoff = Backoff(self._min_backoff, self._max_backoff, jitter=0.2)
                backoff.reset()
            await asyncio.sleep(backoff.next())

    async def _session(self) -> bool:
        """Read both streams until one ends; True when a discovery message arrived."""
        received = False

        async def discovery() -> None:
            nonlocal received
            call = rpc.ControlStub(self._channel).WatchDiscovery(pb.WatchDiscoveryRequest(member=self.member.name))
            async for update in call:
                received = True
                self.last_error = ""
                self.latest = _decode(self.member, self.index, self.address, update)
                try:
                    self._on_discovery(self.latest)
                except Exception:
                    log.exception("discovery callback failed")

        async def health() -> None:
            call = health_pb2_grpc.HealthStub(self._channel).Watch(health_pb2.HealthCheckRequest(service=""))
            async for answer in call:
                self._set_serving(answer.status == health_pb2.HealthCheckResponse.SERVING)

        async def accepting() -> None:
            # A member without the service answers SERVICE_UNKNOWN and keeps the watch open: SERVING
            # on "" is then the first sign (on_serving), as before.
            call = health_pb2_grpc.HealthStub(self._channel).Watch(
                health_pb2.HealthCheckRequest(service=ACCEPTING_SERVICE))
            async for answer in call:
                if answer.status == health_pb2.HealthCheckResponse.SERVING and self._on_accepting is not None:
                    try:
                        self._on_accepting(self.member.name, self.address)
                    except Exception:
                        log.exception("accepting callback failed")
            await asyncio.Future()  # the stream ended: the other two decide when the session ends

        tasks = [asyncio.create_task(discovery()), asyncio.create_task(health())]
        if self._on_accepting is not None:
            tasks.append(asyncio.create_task(accepting()))
        try:
            done, _pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in done:
            error = task.exception()
            if error is not None:
                raise error
        return received

    def _set_serving(self, serving: bool) -> None:
        if serving == self.serving:
            return
        self.serving = serving
        if self._on_serving is not None:
            try:
                self._on_serving(self.member.name, self.address, serving)
            except Exception:
                log.exception("serving callback failed")


class ControlChannel:
    """Control clients for every replica of every chain member, in chain order."""

    def __init__(self, members: Sequence[MemberTargets], on_discovery: OnDiscovery,
                 on_serving: OnServing | None = None, credentials: grpc.ChannelCredentials | None = None,
                 min_backoff: float = 0.05, max_backoff: float = 2.0, on_accepting: OnAccepting | None = None) -> None:
        self.members = list(members)
        self.replicas: list[list[ReplicaClient]] = [
            [ReplicaClient(member, index, address, on_discovery, on_serving, credentials, min_backoff, max_backoff,
                           on_accepting)
             for address in member.addresses]
            for index, member in enumerate(self.members)]

    async def start(self) -> None:
        for replicas in self.replicas:
            for client in replicas:
                client.start()

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for replicas in self.replicas for c in replicas))

    def latest(self) -> list[MemberDiscovery | None]:
        """Per member, the most recently received discovery of any of its replicas."""
        out: list[MemberDiscovery | None] = []
        for replicas in self.replicas:
            known = [c.latest for c in replicas if c.latest is not None]
            out.append(max(known, key=lambda d: d.received) if known else None)
        return out

    def routes(self) -> dict[tuple[str, str], int]:
        """group-version -> index of the first member serving it (the RoutingTable's map). A
        member that is down keeps its last known group-versions, so its requests fail with its
        own 503 instead of falling through to another member."""
        by_gv: dict[tuple[str, str], int] = {}
        for index, update in enumerate(self.latest()):
            if update is None:
                continue
            for gv in update.group_versions():
                by_gv.setdefault(gv, index)
        return by_gv

    def serving(self, index: int) -> bool:
        """Whether any replica of member ``index`` reports SERVING."""
        return any(c.serving for c in self.replicas[index])

    def split_serving(self, index: int, urls: Sequence[str]) -> tuple[list[str], list[str]]:
        """Member ``index``'s replica ``urls`` (its ``--member`` list, in ``--member-grpc``'s
        order) split into those whose health says SERVING and the others. Requests go to the
        first kind: a replica that hangs (its stream's keepalive fails), is starting or has begun
        to drain gets none while another serves, where connection errors alone would only skip
        one that refuses connections. The others stay a fallback (what this gateway knows may
        lag: a replica just killed can still look serving, one just back not yet). Lists that
        do not line up: all ``urls`` count as serving (nothing better known)."""
        replicas = self.replicas[index] if index < len(self.replicas) else []
        if len(replicas) != len(urls):
            return list(urls), []
        serving = [url for url, client in zip(urls, replicas, strict=True) if client.serving]
        return serving, [url for url, client in zip(urls, replicas, strict=True) if not client.serving]
