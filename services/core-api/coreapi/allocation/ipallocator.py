"""ClusterIPs as ``networking.k8s.io/v1`` IPAddress objects: kube-apiserver 1.33's allocator.

With ``MultiCIDRServiceAllocator`` GA and on by default in 1.33, kube-apiserver records every
allocated ClusterIP as one cluster-scoped IPAddress object named after the address (canonical
form), with a ``parentRef`` to its Service, and hands out addresses from the ranges of the
ServiceCIDR objects (the ``kubernetes`` ServiceCIDR holds ``--service-cluster-ip-range``).

Atomicity is etcd's: allocating is creating the IPAddress object, a transaction that succeeds
only if the key does not exist yet, so two replicas of core-api can never both hold an address;
the loser sees AlreadyExists, which means "taken". Releasing is deleting the object. The watch
cache of ipaddresses only guides the search for a free address (a stale view costs a retry,
never a duplicate). kube 1.33 also dual-writes the old bitmap (``/registry/ranges/serviceips``)
for skewed apiservers; kubechain has none, so the IPAddress objects are the only record.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from genericapi.apimachinery.errors import APIError
from genericapi.registry.options import DeleteOptions
from genericapi.registry.store import Store

from .errors import IPAlreadyAllocated, MismatchedNetwork, RangeFull
from .ranges import ServiceIPRange, parse_ip

log = logging.getLogger(__name__)

#: The IPAddress labels and manager name kube's allocator writes.
LABEL_IP_FAMILY = "ipaddress.kubernetes.io/ip-family"
LABEL_MANAGED_BY = "ipaddress.kubernetes.io/managed-by"
MANAGER = "ipallocator.k8s.io"


def _ready(cidr: dict[str, Any]) -> bool:
    """A ServiceCIDR allocates unless being deleted or its Ready condition says otherwise."""
    if (cidr.get("metadata") or {}).get("deletionTimestamp"):
        return False
    for cond in (cidr.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return True  # no condition yet: usable (as kube, so it works without a controller manager)


class ClusterIPAllocator:
    """Allocates and releases ClusterIPs of one IP family as IPAddress objects."""

    def __init__(self, primary: ServiceIPRange, ipaddresses: Store, servicecidrs: Store | None = None,
                 rng: random.Random | None = None) -> None:
        self.primary = primary
        self.family = primary.family
        self._ipaddresses = ipaddresses
        self._servicecidrs = servicecidrs
        self._rng = rng or random.Random()

    @property
    def store(self) -> Store:
        """The IPAddress objects (the repair loop reads and deletes them directly)."""
        return self._ipaddresses

    def ranges(self) -> list[ServiceIPRange]:
        """The ranges to allocate from: the flag's, then those of other ready ServiceCIDRs."""
        out = [self.primary]
        cidrs = self._servicecidrs
        if cidrs is None or not cidrs.cache.ready:
            return out
        items, _ = cidrs.cache.list(cidrs.scope_prefix(""))
        for item in items:
            if not _ready(item.obj):
                continue
            for text in (item.obj.get("spec") or {}).get("cidrs") or []:
                try:
                    rng = ServiceIPRange.parse(str(text))
                except ValueError:
                    continue
                if rng.family == self.family and rng not in out:
                    out.append(rng)
        return out

    def _taken(self, ip: str) -> bool:
        cache = self._ipaddresses.cache
        return cache.ready and cache.get(self._ipaddresses.key("", ip)) is not None

    def check(self, ip: str) -> None:
        """Dry-run of ``allocate``: only whether a range holds the address (kube checks no more)."""
        addr = parse_ip(ip)
        if addr is None or not any(r.contains(addr) for r in self.ranges()):
            raise MismatchedNetwork()

    def dry_run_next(self) -> str:
        """What a dry-run dynamic allocation answers: kube returns the range's network address."""
        return str(self.primary.network.network_address)

    async def allocate(self, ip: str, parent: dict[str, Any]) -> str:
        """Take ``ip`` for the Service ``parent``; its canonical form is returned."""
        addr = parse_ip(ip)
        if addr is None or not any(r.contains(addr) for r in self.ranges()):
            raise MismatchedNetwork()
        name = str(addr)
        if not await self._create(name, parent):
            raise IPAlreadyAllocated()
        return name

    async def allocate_next(self, parent: dict[str, Any]) -> str:
        """Take any free address, trying each range in turn."""
        for rng in self.ranges():
            for name in rng.candidates(self._rng):
                if self._taken(name):
                    continue
                if await self._create(name, parent):
                    return name
                log.info("mid-air collision allocating IP %s, trying the next one", name)
        raise RangeFull()

    async def claim(self, ip: str, parent: dict[str, Any]) -> bool:
        """Record ``ip`` for ``parent`` if no IPAddress exists for it (repair); whether it did."""
        addr = parse_ip(ip)
        if addr is None or not any(r.contains(addr) for r in self.ranges()):
            return False
        return await self._create(str(addr), parent)

    async def release(self, ip: str) -> None:
        """Give ``ip`` back; releasing an address nobody holds is a no-op (as kube)."""
        addr = parse_ip(ip)
        if addr is None:
            return
        try:
            await self._ipaddresses.delete("", str(addr), DeleteOptions())
        except APIError as err:
            if err.code != 404:
                log.warning("releasing ClusterIP %s failed: %s", ip, err.message)

    async def _create(self, name: str, parent: dict[str, Any]) -> bool:
        """Create the IPAddress object; False when it already exists (the address is taken)."""
        meta = parent.get("metadata") or {}
        obj: dict[str, Any] = {
            "apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
            "metadata": {"name": name, "labels": {LABEL_IP_FAMILY: self.family, LABEL_MANAGED_BY: MANAGER}},
            "spec": {"parentRef": {"resource": "services", "namespace": meta.get("namespace", ""),
                                   "name": meta.get("name", "")}},
        }
        try:
            await self._ipaddresses.create("", obj)
        except APIError as err:
            if err.code == 409:
                return False
            raise
        return True
