"""Allocation repair: the records of ClusterIPs and NodePorts kept true to the stored Services.

A Service's addresses are recorded by one write and the Service by another, in both orders
(allocate, then store; delete, then release), as in kube-apiserver. A crash between two such
writes leaves a record without a Service (a leak: the address can never be handed out again) or,
with data from elsewhere, a Service without a record. kube-apiserver runs two repair loops in
every replica for this; so does core-api, with their rules:

* ClusterIPs (kube's ``RepairIPAddress``): every Service's ClusterIPs get their IPAddress object
  if it is missing (or points elsewhere at a Service that does not exist); an IPAddress written
  by the allocator whose Service is gone, or no longer holds the address, is deleted once it is
  older than a grace period (60 s, kube's: a Service being created holds its address before it
  is stored, and no request lasts longer). kube deletes a wrong reference to a live Service at
  once; here it waits out the same grace, so an update that is allocating cannot lose its IP.
* NodePorts (kube's node-port ``Repair``): the bitmap is read first, then the Services; the
  ports they use are the new bitmap; a port set in the old bitmap that no Service uses is kept
  for two more passes and freed on the third (a Service being created holds its port before it is
  stored). The new bitmap is written with compare-and-swap on the one read; a lost race reruns.

One pass runs at start-up (so nothing a Service holds can be handed out twice), then one every
``interval`` (kube: 3 minutes), sooner when an orphaned IPAddress comes of age.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from genericapi.apimachinery.errors import APIError
from genericapi.registry.options import DeleteOptions, ListOptions
from genericapi.registry.store import Store
from genericapi.storage.errors import StorageError

from .ipallocator import LABEL_MANAGED_BY, MANAGER
from .portallocator import PortBitmap
from .ranges import parse_ip
from .service import ServiceAllocator
from .servicefields import cluster_ips, health_check_port, is_headless, needs_cluster_ip, needs_health_check, node_ports

log = logging.getLogger(__name__)

#: kube's RepairServicesInterval.
DEFAULT_INTERVAL = 180.0
#: How old an orphaned IPAddress must be before it is deleted (kube's gracePeriod).
DEFAULT_IP_GRACE = 60.0
#: Passes that find a port unused before it is freed (kube's numRepairsBeforeLeakCleanup).
PORT_LEAK_PASSES = 3
_CAS_TRIES = 10

ServiceKey = tuple[str, str]


def _created_at(obj: dict[str, Any]) -> float | None:
    text = (obj.get("metadata") or {}).get("creationTimestamp")
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _canonical_ips(svc: dict[str, Any]) -> list[str]:
    if not needs_cluster_ip(svc) or is_headless(svc):
        return []
    return [str(addr) for addr in (parse_ip(ip) for ip in cluster_ips(svc)) if addr is not None]


def _used_ports(svc: dict[str, Any]) -> list[int]:
    ports = list(node_ports(svc))
    if needs_health_check(svc) and health_check_port(svc):
        ports.append(health_check_port(svc))
    return ports


class AllocationRepair:
    """Both repair loops of one core-api replica."""

    def __init__(self, services: Store, allocator: ServiceAllocator, *, interval: float = DEFAULT_INTERVAL,
                 ip_grace: float = DEFAULT_IP_GRACE, clock: Callable[[], float] = time.time) -> None:
        self.services = services
        self.allocator = allocator
        self.interval = interval
        self.ip_grace = ip_grace
        self.clock = clock
        #: Port -> passes left before it is freed (kube's ``leaks``).
        self.port_leaks: dict[int, int] = {}

    async def run(self, delay: float) -> None:
        """Pass after pass until cancelled, the first after ``delay``; a failed pass is logged
        and retried at the next."""
        while True:
            await asyncio.sleep(delay)
            try:
                delay = await self.run_once()
            except (APIError, StorageError) as err:
                log.warning("allocation repair failed (retrying in %.0fs): %s", self.interval, err)
                delay = self.interval

    async def run_once(self) -> float:
        """One pass over both, on one listing of the Services; the seconds until the next is due."""
        services = await self.repair_ports()
        return await self.repair_ips(services)

    async def _services(self) -> dict[ServiceKey, dict[str, Any]]:
        listed = await self.services.list("", ListOptions())
        return {(str(svc["metadata"].get("namespace", "")), str(svc["metadata"].get("name", ""))): svc
                for svc, _raw in listed.items}

    # -- ClusterIPs ------------------------------------------------------------------------
    async def repair_ips(self, services: dict[ServiceKey, dict[str, Any]]) -> float:
        """Records for the Services' ClusterIPs, leaked records freed (listed after ``services``,
        so a record newer than that listing is young and kept)."""
        listed = await self.allocator.ips.store.list("", ListOptions())
        records = {str(obj["metadata"].get("name", "")): obj for obj, _raw in listed.items}
        claimed = 0
        for svc in services.values():
            for ip in _canonical_ips(svc):
                claimed += await self._ensure_ip(ip, svc, services, records)
        now = self.clock()
        next_due = self.interval
        freed = 0
        for name, obj in records.items():
            meta = obj.get("metadata") or {}
            if (meta.get("labels") or {}).get(LABEL_MANAGED_BY) != MANAGER:
                continue  # not the allocator's: another controller's business
            ref = (obj.get("spec") or {}).get("parentRef") or {}
            if ref.get("group", "") == "" and ref.get("resource") == "services":
                parent = services.get((str(ref.get("namespace", "")), str(ref.get("name", ""))))
                if parent is not None and name in _canonical_ips(parent):
                    continue
                age = now - (_created_at(obj) or now)
                if age <= self.ip_grace:
                    next_due = min(next_due, self.ip_grace - age + 0.5)
                    continue
                log.warning("IPAddress %s for Service %s/%s appears to have leaked: cleaning up",
                            name, ref.get("namespace", ""), ref.get("name", ""))
            else:
                log.warning("IPAddress %s appears to have been modified, not referencing a Service %s: cleaning up",
                            name, ref)
            freed += await self._delete_ip(name, str(meta.get("uid", "")))
        if claimed or freed:
            log.info("ClusterIP repair: %d recorded, %d leaked ones freed", claimed, freed)
        return max(next_due, 0.5)

    async def _ensure_ip(self, ip: str, svc: dict[str, Any], services: dict[ServiceKey, dict[str, Any]],
                         records: dict[str, dict[str, Any]]) -> int:
        """Record ``ip`` for ``svc`` unless ``records`` has it; repoint a record whose Service is
        gone (dropping it from ``records``, which then hold only what the leak check should see)."""
        ips = self.allocator.ips
        namespace, name = svc["metadata"].get("namespace", ""), svc["metadata"].get("name", "")
        addr = parse_ip(ip)
        if addr is None or not any(r.contains(addr) for r in ips.ranges()):
            log.warning("ClusterIP %s of Service %s/%s is not within any service CIDR; please recreate",
                        ip, namespace, name)
            return 0
        current = records.get(ip)
        if current is None:
            if not await ips.claim(ip, svc):
                return 0  # recorded meanwhile (a create racing with this pass): the next pass looks again
            log.warning("ClusterIP %s of Service %s/%s was not allocated; repaired", ip, namespace, name)
            return 1
        ref = (current.get("spec") or {}).get("parentRef") or {}
        key = (str(ref.get("namespace", "")), str(ref.get("name", "")))
        if key == (namespace, name):
            return 0
        if ref.get("resource") == "services" and key in services:
            log.warning("ClusterIP %s was assigned to Services %s/%s and %s/%s; please recreate one",
                        ip, *key, namespace, name)
            return 0
        records.pop(ip)
        await self._delete_ip(ip, str((current.get("metadata") or {}).get("uid", "")))
        return int(await ips.claim(ip, svc))

    async def _delete_ip(self, name: str, uid: str) -> int:
        try:
            await self.allocator.ips.store.delete("", name, DeleteOptions(precondition_uid=uid or None))
        except APIError as err:
            if err.code in (404, 409):
                return 0  # gone already, or replaced by a fresh allocation
            raise
        return 1

    # -- NodePorts -------------------------------------------------------------------------
    async def repair_ports(self) -> dict[ServiceKey, dict[str, Any]]:
        """Rebuild the bitmap from the Services; the Services it was rebuilt from."""
        ports = self.allocator.ports
        for _ in range(_CAS_TRIES):
            stored, kv = await ports.snapshot()  # before the Services: see the module docstring
            services = await self._services()
            rebuilt, leaks = self._rebuild_ports(stored, services)
            if rebuilt.bits == stored.bits or await ports.restore(rebuilt, kv):
                self.port_leaks = leaks
                return services
        log.warning("node port repair: the bitmap kept changing; trying again next pass")
        return services

    def _rebuild_ports(self, stored: PortBitmap,
                       services: dict[ServiceKey, dict[str, Any]]) -> tuple[PortBitmap, dict[int, int]]:
        rebuilt = PortBitmap(stored.range)
        leaks = dict(self.port_leaks)
        for (namespace, name), svc in sorted(services.items()):
            for port in _used_ports(svc):
                if not stored.range.contains(port):
                    log.warning("node port %d of Service %s/%s is not within the port range %s; please recreate",
                                port, namespace, name, stored.range)
                elif rebuilt.has(port):
                    log.warning("node port %d of Service %s/%s was assigned to several Services; please recreate",
                                port, namespace, name)
                else:
                    rebuilt.set(port)
                    if not stored.has(port):
                        log.warning("node port %d of Service %s/%s was not allocated; repairing", port, namespace, name)
                    leaks.pop(port, None)
        for port in stored.taken():
            if rebuilt.has(port):
                continue
            left = leaks.get(port)
            left = PORT_LEAK_PASSES - 1 if left is None else left - 1
            if left > 0:
                if port not in leaks:
                    log.info("node port %d may have leaked: flagging it for clean-up", port)
                leaks[port] = left
                rebuilt.set(port)  # still taken until the count runs out
            else:
                leaks.pop(port, None)
                log.warning("node port %d appears to have leaked: cleaning up", port)
        for port in [p for p in leaks if not stored.has(p)]:
            del leaks[port]  # released meanwhile
        return rebuilt, leaks
