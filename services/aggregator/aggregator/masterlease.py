"""This gateway's master lease (see ``genericapi.apimachinery.masterleases``).

As each kube-apiserver keeps its own lease under ``/registry/masterleases/``, each gateway
writes one naming its address and secure port, renewed before its TTL runs out and deleted on
a graceful stop, so core-api can keep the ``default/kubernetes`` Endpoints listing every
gateway that is running. The address is the bind address, or for a wildcard bind the host's
primary address (what kube's ``ChooseHostInterface`` would advertise).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket

from genericapi.apimachinery.masterleases import (
    LEASE_TTL_SECONDS,
    RENEW_INTERVAL_SECONDS,
    lease_key,
    lease_value,
)
from genericapi.controllers.tasks import cancel_and_wait
from genericapi.storage.errors import StorageError
from genericapi.storage.etcd import EtcdClient, EtcdTLS

log = logging.getLogger(__name__)


def advertised_ip(bind_address: str) -> str:
    """The address clients reach this gateway at."""
    if bind_address not in ("", "0.0.0.0", "::"):
        return bind_address
    # Bound to every address: the host name's address (a container's own IP), else loopback.
    with contextlib.suppress(OSError):
        address = socket.gethostbyname(socket.gethostname())
        if address and not address.startswith("127."):
            return address
    return "127.0.0.1"


class MasterLease:
    """Keeps ``<prefix>/masterleases/<ip>:<port>`` alive while the gateway runs."""

    def __init__(self, etcd_servers: list[str], etcd_prefix: str, ip: str, port: int,
                 interval: float = RENEW_INTERVAL_SECONDS, ttl: int = LEASE_TTL_SECONDS,
                 etcd_tls: EtcdTLS | None = None) -> None:
        self.etcd = EtcdClient(etcd_servers, tls=etcd_tls)
        self.key = lease_key(etcd_prefix, ip, port)
        self.value = lease_value(ip, port)
        self.interval, self.ttl = interval, ttl
        self._task: asyncio.Task[None] | None = None

    async def renew(self) -> None:
        await self.etcd.put_with_ttl(self.key, self.value, self.ttl)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.renew()
            except StorageError as err:
                log.warning("renewing master lease %s: %s", self.key.decode(), err)

    async def start(self) -> None:
        try:
            await self.renew()
        except StorageError as err:
            log.warning("writing master lease %s: %s", self.key.decode(), err)
        self._task = asyncio.create_task(self._loop(), name="master-lease")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        try:
            kv, _rev = await self.etcd.get(self.key)
            if kv is not None:
                await self.etcd.delete(self.key, kv.mod_revision)
        except StorageError as err:
            log.warning("removing master lease %s: %s", self.key.decode(), err)
        await self.etcd.close()


def for_gateway(etcd_servers: str, etcd_prefix: str, bind_address: str, port: int,
                etcd_tls: EtcdTLS | None = None) -> MasterLease | None:
    """The lease of a gateway with this configuration (none without etcd)."""
    servers = [e.strip() for e in etcd_servers.split(",") if e.strip()]
    if not servers:
        return None
    return MasterLease(servers, etcd_prefix, advertised_ip(bind_address), port, etcd_tls=etcd_tls)
