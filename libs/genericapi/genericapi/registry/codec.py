"""How objects are stored: the served JSON without ``resourceVersion`` (etcd's revision is it).

The stored value never carries its own revision; reading sets ``metadata.resourceVersion`` to
the key's ``mod_revision``, as kube-apiserver's storage layer does. A resource served at a
version other than its storage version (events.k8s.io/v1 Events over core v1 Events) gets a
codec with a conversion pair, so storage always holds the storage version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from genericapi.apimachinery import deepjson

Converter = Callable[[dict[str, Any]], dict[str, Any]]


class JsonCodec:
    """Encode objects for etcd and decode them with the revision they were read at."""

    def __init__(self, to_storage: Converter | None = None, from_storage: Converter | None = None) -> None:
        self._to_storage = to_storage
        self._from_storage = from_storage

    @property
    def converts(self) -> bool:
        """Whether decoding converts from the storage version (the watch cache shares one view among
        the codecs that do not)."""
        return self._from_storage is not None

    def to_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` at the storage version (itself when served as stored)."""
        return self._to_storage(obj) if self._to_storage is not None else obj

    def from_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A stored object at the served version (may change ``obj``)."""
        return self._from_storage(obj) if self._from_storage is not None else obj

    def encode(self, obj: dict[str, Any]) -> bytes:
        if self._to_storage is not None:
            obj = self._to_storage(obj)
        meta = obj.get("metadata")
        if isinstance(meta, dict) and "resourceVersion" in meta:
            meta = {k: v for k, v in meta.items() if k != "resourceVersion"}
            obj = {**obj, "metadata": meta}
        try:  # orjson inline, deepjson only past its depth: no extra call on the hot path
            return orjson.dumps(obj)
        except orjson.JSONEncodeError:
            return deepjson.dumps(obj)

    def loads(self, served: bytes) -> dict[str, Any]:
        """An object back from the served JSON ``decode`` made (the watch cache keeps only that):
        orjson, or the deep parser past orjson's 1,024 levels."""
        obj: dict[str, Any] = deepjson.loads(served)
        return obj

    def decode(self, value: bytes, revision: int) -> tuple[dict[str, Any], bytes]:
        try:
            obj = orjson.loads(value)
        except orjson.JSONDecodeError:
            obj = deepjson.loads(value)
        if self._from_storage is not None:
            obj = self._from_storage(obj)
        if revision:
            meta = obj.setdefault("metadata", {})
            meta["resourceVersion"] = str(revision)
        try:
            return obj, orjson.dumps(obj)
        except orjson.JSONEncodeError:
            return obj, deepjson.dumps(obj)
