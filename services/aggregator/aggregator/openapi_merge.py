"""``/openapi/v2`` merged across the chain, as kube-aggregator's OpenAPI v2 aggregation.

kubectl up to 1.28 reads the whole OpenAPI v2 document (``kubectl explain``, client-side
validation), JSON or gnostic protobuf. Each member serves only its own part (core-api the
built-ins, extensions-api the CRDs), so the gateway fetches every member's document, merges
paths and definitions (the first member in chain order wins a name, as it wins a group-version),
adds its own APIService group, then merges the documents of service-backed APIServices the way
kube-aggregator does (``apiservices/openapi_specmerge``: their paths where free, definitions
renamed on conflict), and keeps the result until a member's streamed discovery generation changes
(a CRD added, changed or removed republishes the member's discovery) or a service-backed
document changes. While a member's stream has not delivered yet nothing is cached: the next
request merges again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from genericapi.apimachinery import openapi
from genericapi.apimachinery.openapi_proto import openapi_v2_to_protobuf

from .apiservices.openapi_specmerge import merge_ignoring_path_conflicts

#: Sections merged name by name; the rest (swagger, info) come from the first document.
MERGED_SECTIONS = ("paths", "definitions", "securityDefinitions", "parameters", "responses")

#: Per member (chain order) the body of its ``/openapi/v2`` JSON, None when unavailable.
Fetcher = Callable[[], Awaitable[list[bytes | None]]]
#: Extra documents (the gateway's own APIService group), merged after the members'.
ExtraSource = Callable[[], Awaitable[list[dict[str, Any]]]]


class ServiceSpecs(Protocol):
    """Service-backed APIServices' documents (``apiservices.openapi_aggregation``)."""

    generation: int

    def ordered_v2(self) -> list[dict[str, Any]]: ...


def merge_documents(docs: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """One Swagger 2.0 document from several; None when there is none."""
    if not docs:
        return None
    merged: dict[str, Any] = {k: v for k, v in docs[0].items() if k not in MERGED_SECTIONS}
    for section in MERGED_SECTIONS:
        combined: dict[str, Any] = {}
        for doc in docs:
            part = doc.get(section)
            if isinstance(part, dict):
                for name, value in part.items():
                    combined.setdefault(name, value)
        if combined or any(section in d for d in docs):
            merged[section] = dict(sorted(combined.items()))
    if "security" in docs[0]:
        merged["security"] = docs[0]["security"]
    return merged


@dataclass
class MergedV2:
    """One merged document, encoded: JSON now, protobuf when first asked for."""

    doc: dict[str, Any]
    json: bytes
    etag: str
    proto: bytes | None = None

    async def protobuf(self) -> bytes:
        if self.proto is None:
            self.proto = await asyncio.to_thread(openapi_v2_to_protobuf, self.doc)
        return self.proto


class OpenAPIV2Cache:
    """The merged document for the current generation key (None key: never cached)."""

    def __init__(self, fetch: Fetcher, extra: ExtraSource | None = None, max_age: float = 30.0,
                 services: Callable[[], ServiceSpecs | None] | None = None) -> None:
        self._fetch = fetch
        self._services = services
        #: A CRD's schema can change without changing its member's discovery: rebuild at least this often.
        self._max_age = max_age
        self._built = 0.0
        self._extra = extra
        self._key: tuple[Any, ...] | None = None
        self._value: MergedV2 | None = None
        self._lock = asyncio.Lock()
        #: How many merges were built (for tests and metrics of the cache's hit rate).
        self.builds = 0

    def _fresh(self, key: tuple[Any, ...] | None) -> bool:
        return key is not None and key == self._key and self._value is not None \
            and time.monotonic() - self._built < self._max_age

    async def get(self, key: tuple[Any, ...] | None) -> MergedV2 | None:
        specs = self._services() if self._services is not None else None
        if key is not None and specs is not None:
            key = (*key, ("apiservices", specs.generation))
        if self._fresh(key):
            return self._value
        async with self._lock:
            if self._fresh(key):
                return self._value
            started = time.monotonic()
            value, complete = await self._build(specs)
            if key is not None and value is not None and complete:
                self._key, self._value, self._built = key, value, started
            return value

    async def _build(self, specs: ServiceSpecs | None = None) -> tuple[MergedV2 | None, bool]:
        """The merged document, and whether every member contributed (only then is it cached)."""
        bodies = await self._fetch()
        docs: list[dict[str, Any]] = []
        for body in bodies:
            if body is None:
                continue
            try:
                doc = orjson.loads(body)
            except orjson.JSONDecodeError:
                continue
            if isinstance(doc, dict):
                docs.append(doc)
        complete = len(docs) == len(bodies)
        if not docs:
            return None, False
        if self._extra is not None:
            docs.extend(await self._extra())
        merged = merge_documents(docs)
        if merged is None:
            return None, False
        for service_doc in specs.ordered_v2() if specs is not None else []:
            merge_ignoring_path_conflicts(merged, service_doc)
        data = await asyncio.to_thread(openapi.serialize_openapi, merged)
        self.builds += 1
        return MergedV2(merged, data, openapi.openapi_etag(data)), complete


def wants_protobuf(accept: str) -> bool:
    return any(sub in accept for sub in openapi.OPENAPI_V2_PROTOBUF_SUBTYPES)
