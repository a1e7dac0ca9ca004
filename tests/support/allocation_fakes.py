"""In-test stand-ins for what Service allocation talks to: etcd's compare-and-swap on one key,
the ipaddresses store and the services store. Pure-logic unit tests of the allocators and the
repair loops use them; the integration tests run the same code on real etcd."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime
from typing import Any

from genericapi.apimachinery.errors import APIError
from genericapi.registry.options import DeleteOptions, ListResult
from genericapi.storage import errors as serrors
from genericapi.storage.etcd import KeyValue


class FakeEtcd:
    """One key-value map with etcd's create/update compare-and-swap, yielding between calls
    so concurrent writers interleave."""

    def __init__(self) -> None:
        self.data: dict[bytes, tuple[bytes, int]] = {}
        self.revision = 0
        self.conflicts = 0

    async def get(self, key: bytes) -> tuple[KeyValue | None, int]:
        await asyncio.sleep(0)
        if key not in self.data:
            return None, self.revision
        value, rev = self.data[key]
        return KeyValue(key, value, rev, rev), self.revision

    async def create(self, key: bytes, value: bytes) -> int:
        await asyncio.sleep(0)
        if key in self.data:
            self.conflicts += 1
            raise serrors.KeyExistsError(key.decode())
        self.revision += 1
        self.data[key] = (value, self.revision)
        return self.revision

    async def update(self, key: bytes, value: bytes, expected: int) -> int:
        await asyncio.sleep(0)
        if self.data.get(key, (b"", -1))[1] != expected:
            self.conflicts += 1
            raise serrors.RevisionConflictError(key.decode(), expected, self.data.get(key, (b"", 0))[1])
        self.revision += 1
        self.data[key] = (value, self.revision)
        return self.revision


class _Cache:
    ready = False


class FakeIPAddresses:
    """The ipaddresses store as the allocator and the repair use it: create fails with 409 when
    taken, delete honours a uid precondition (409), objects get a uid and a creationTimestamp."""

    def __init__(self, now: float | None = None) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.cache = _Cache()
        self.now = now  # creation time of new objects (None: the wall clock)
        self._uids = itertools.count(1)

    def key(self, _ns: str, name: str) -> bytes:
        return name.encode()

    async def create(self, _ns: str, obj: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        name = obj["metadata"]["name"]
        if name in self.objects:
            raise APIError(409, "AlreadyExists", "exists")
        created = datetime.fromtimestamp(self.now, UTC) if self.now is not None else datetime.now(UTC)
        obj["metadata"].setdefault("uid", f"uid-{next(self._uids)}")
        obj["metadata"].setdefault("creationTimestamp", created.strftime("%Y-%m-%dT%H:%M:%SZ"))
        self.objects[name] = obj
        return obj

    async def get(self, _ns: str, name: str) -> dict[str, Any]:
        if name not in self.objects:
            raise APIError(404, "NotFound", "not found")
        return self.objects[name]

    async def list(self, _ns: str, _opts: Any) -> ListResult:
        return ListResult([(o, b"") for o in self.objects.values()], 1)

    async def delete(self, _ns: str, name: str, opts: DeleteOptions) -> tuple[dict[str, Any], bool]:
        if name not in self.objects:
            raise APIError(404, "NotFound", "not found")
        if opts.precondition_uid is not None and opts.precondition_uid != self.objects[name]["metadata"].get("uid"):
            raise APIError(409, "Conflict", "Precondition failed: UID")
        return self.objects.pop(name), True


class FakeServices:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    async def list(self, _ns: str, _opts: Any) -> ListResult:
        return ListResult([(i, b"") for i in self.items], 1)
