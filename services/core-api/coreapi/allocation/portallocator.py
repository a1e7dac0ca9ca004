"""NodePorts in one etcd bitmap, as kube-apiserver keeps them.

kube stores the node-port allocations of the whole cluster in a single ``RangeAllocation``
object at ``<prefix>/ranges/servicenodeports``: ``range`` is the port range, ``data`` a bitmap
(bit i set = port base+i taken; the bytes of a big-endian integer, as Go's ``big.Int.Bytes``).
Every change is a compare-and-swap on the key's revision; a writer that lost the race re-reads
and replays its whole operation, so two replicas of core-api never hand out the same port.

An operation (``PortOperation``) gathers what one Service create or update needs: allocations
are written at once (before validation, as kube's BeginCreate), releases are deferred until
the write of the Service succeeded; a failed write gives back what was allocated.
"""

from __future__ import annotations

import asyncio
import base64
import random
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from genericapi.storage import errors as serrors
from genericapi.storage.etcd import EtcdClient, KeyValue

from .errors import PortAlreadyAllocated, PortNotInRange, RangeFull
from .ranges import PortRange

T = TypeVar("T")
_CAS_RETRIES = 100
#: Where a dry-run's invented ports start (kube's PortAllocationOperation does the same).
_DRY_RUN_FIRST = 32769


class PortBitmap:
    """Taken ports of one range, as the bitmap kube stores."""

    def __init__(self, ports: PortRange, bits: int = 0) -> None:
        self.range = ports
        self.bits = bits

    def has(self, port: int) -> bool:
        return self.range.contains(port) and bool(self.bits >> (port - self.range.base) & 1)

    def set(self, port: int) -> None:
        self.bits |= 1 << (port - self.range.base)

    def clear(self, port: int) -> None:
        if self.range.contains(port):
            self.bits &= ~(1 << (port - self.range.base))

    def taken(self) -> list[int]:
        return [self.range.base + i for i in range(self.range.size) if self.bits >> i & 1]

    def encode(self) -> bytes:
        raw = self.bits.to_bytes((self.bits.bit_length() + 7) // 8, "big")
        return orjson.dumps({"kind": "RangeAllocation", "apiVersion": "v1", "metadata": {},
                             "range": str(self.range), "data": base64.b64encode(raw).decode()})

    @classmethod
    def decode(cls, ports: PortRange, value: bytes) -> PortBitmap:
        """The stored bitmap, re-based onto ``ports`` if it was written for another range."""
        doc: dict[str, Any] = orjson.loads(value)
        bits = int.from_bytes(base64.b64decode(doc.get("data") or ""), "big")
        try:
            stored = PortRange.parse(str(doc.get("range") or ""))
        except ValueError:
            stored = ports
        out = cls(ports)
        if stored == ports:
            out.bits = bits
            return out
        for port in cls(stored, bits).taken():
            if ports.contains(port):
                out.set(port)
        return out


class PortOperation:
    """The allocations and deferred releases of one Service write (kube's PortAllocationOperation)."""

    def __init__(self, bitmap: PortBitmap, rng: random.Random, dry_run: bool) -> None:
        self._bitmap = bitmap
        self._rng = rng
        self.dry_run = dry_run
        self.allocated: list[int] = []
        self.deferred: list[int] = []

    def allocate(self, port: int) -> None:
        if self.dry_run:  # kube's dry run only checks that nobody holds the port
            if self._bitmap.has(port) or port in self.allocated:
                raise PortAlreadyAllocated()
            self.allocated.append(port)
            return
        if not self._bitmap.range.contains(port):
            raise PortNotInRange(str(self._bitmap.range))
        if self._bitmap.has(port):
            raise PortAlreadyAllocated()
        self._bitmap.set(port)
        self.allocated.append(port)

    def allocate_next(self) -> int:
        if self.dry_run:
            port = max(self.allocated) + 1 if self.allocated else _DRY_RUN_FIRST
            self.allocated.append(port)
            return port
        for port in self._bitmap.range.candidates(self._rng):
            if not self._bitmap.has(port):
                self._bitmap.set(port)
                self.allocated.append(port)
                return port
        raise RangeFull()

    def claim(self, port: int) -> None:
        """Mark ``port`` taken if it is in the range and free (repair of existing Services)."""
        if self._bitmap.range.contains(port) and not self._bitmap.has(port):
            self._bitmap.set(port)
            self.allocated.append(port)

    def release_deferred(self, port: int) -> None:
        self.deferred.append(port)


class NodePortAllocator:
    """The cluster's node ports, one compare-and-swap per Service operation."""

    def __init__(self, client: EtcdClient, key: str, ports: PortRange, rng: random.Random | None = None) -> None:
        self.client = client
        self.key = key.encode()
        self.range = ports
        self._rng = rng or random.Random()
        # Serializes this process's writers so they do not make each other retry.
        self._lock = asyncio.Lock()

    async def _read(self) -> tuple[PortBitmap, KeyValue | None]:
        kv, _ = await self.client.get(self.key)
        if kv is None:
            return PortBitmap(self.range), None
        return PortBitmap.decode(self.range, kv.value), kv

    async def _write(self, bitmap: PortBitmap, kv: KeyValue | None) -> bool:
        """Store ``bitmap`` if nobody wrote since ``kv`` was read; False when someone did."""
        try:
            if kv is None:
                await self.client.create(self.key, bitmap.encode())
            else:
                await self.client.update(self.key, bitmap.encode(), kv.mod_revision)
        except (serrors.KeyExistsError, serrors.RevisionConflictError, serrors.KeyNotFoundError):
            return False
        return True

    async def run(self, plan: Callable[[PortOperation], T], dry_run: bool = False) -> tuple[T, PortOperation]:
        """Run ``plan`` on the current bitmap and store its allocations atomically.

        ``plan`` may run several times (once per lost race), each time on fresh state, so it
        must not change anything but what it returns. Allocation errors it raises propagate.
        """
        async with self._lock:
            for _ in range(_CAS_RETRIES):
                bitmap, kv = await self._read()
                op = PortOperation(bitmap, self._rng, dry_run)
                result = plan(op)
                if dry_run or not op.allocated or await self._write(bitmap, kv):
                    return result, op
        raise serrors.StorageError("too many concurrent node port allocations")

    async def release(self, ports: list[int]) -> None:
        """Give ``ports`` back (ports out of the range or not held are ignored)."""
        wanted = [p for p in ports if self.range.contains(p)]
        if not wanted:
            return
        async with self._lock:
            for _ in range(_CAS_RETRIES):
                bitmap, kv = await self._read()
                if kv is None or not any(bitmap.has(p) for p in wanted):
                    return
                for port in wanted:
                    bitmap.clear(port)
                if await self._write(bitmap, kv):
                    return
        raise serrors.StorageError("too many concurrent node port releases")

    async def snapshot(self) -> tuple[PortBitmap, KeyValue | None]:
        """The stored bitmap and the key it came from (for ``restore``)."""
        return await self._read()

    async def restore(self, bitmap: PortBitmap, kv: KeyValue | None) -> bool:
        """Replace the bitmap read as ``kv`` by ``bitmap``; False when it changed since (repair)."""
        async with self._lock:
            return await self._write(bitmap, kv)

    async def taken(self) -> list[int]:
        bitmap, _ = await self._read()
        return bitmap.taken()
