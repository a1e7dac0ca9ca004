"""Entry points for the OpenAPI documents a server publishes, with caching.

Building a document means converting ~700 schema definitions and rendering thousands of
operations; servers ask for the same documents on every ``/openapi`` request and whenever a
client refreshes its cache, so results are memoized per input. The definitions mapping is
treated as immutable: pass a new mapping (e.g. after a CustomResourceDefinition changes) to get
new documents. Returned documents are shared between callers and must not be modified.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from genericapi.apimachinery.openapi_schema import Definitions, convert_definitions, reference_graph
from genericapi.apimachinery.openapi_v2 import build_openapi_v2_uncached
from genericapi.apimachinery.openapi_v3 import (
    build_openapi_v3_index,
    build_openapi_v3_uncached,
    openapi_etag,
    openapi_v3_path_key,
    serialize_openapi,
)
from genericapi.apimachinery.resources import ResourceInfo

__all__ = [
    "OPENAPI_V2_PROTOBUF_CONTENT_TYPE",
    "OPENAPI_V2_PROTOBUF_SUBTYPES",
    "build_all_openapi_v3",
    "build_openapi_v2",
    "build_openapi_v3",
    "build_openapi_v3_index",
    "clear_openapi_cache",
    "openapi_etag",
    "openapi_v3_path_key",
    "serialize_openapi",
]

#: Content type of the protobuf ``/openapi/v2`` response (also sent for the deprecated ``@`` form).
OPENAPI_V2_PROTOBUF_CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
#: Accept subtypes that select the protobuf form of ``/openapi/v2`` (current, deprecated).
OPENAPI_V2_PROTOBUF_SUBTYPES = (
    "com.github.proto-openapi.spec.v2.v1.0+protobuf",
    "com.github.proto-openapi.spec.v2@v1.0+protobuf",
)

_MAX_ENTRIES = 64
T = TypeVar("T")


@dataclass
class _Prepared:
    """Work shared by every document built from one definitions mapping."""

    definitions: Definitions
    lock: threading.Lock = field(default_factory=threading.Lock)
    v2: dict[str, Any] | None = None
    v3: dict[str, Any] | None = None
    graph: dict[str, frozenset[str]] | None = None
    documents: OrderedDict[tuple[Any, ...], Any] = field(default_factory=OrderedDict)

    def v2_definitions(self) -> dict[str, Any]:
        if self.v2 is None:
            self.v2 = convert_definitions(self.definitions, v3=False)
        return self.v2

    def v3_definitions(self) -> dict[str, Any]:
        if self.v3 is None:
            self.v3 = convert_definitions(self.definitions, v3=True)
        return self.v3

    def reference_graph(self) -> dict[str, frozenset[str]]:
        if self.graph is None:
            self.graph = reference_graph(self.definitions)
        return self.graph

    def memo(self, key: tuple[Any, ...], build: Callable[[], T]) -> T:
        with self.lock:
            if key in self.documents:
                self.documents.move_to_end(key)
                return self.documents[key]  # type: ignore[no-any-return]
            value = build()
            self.documents[key] = value
            if len(self.documents) > _MAX_ENTRIES:
                self.documents.popitem(last=False)
            return value


_prepared: OrderedDict[int, _Prepared] = OrderedDict()
_prepared_lock = threading.Lock()


def _prepare(definitions: Definitions) -> _Prepared:
    """Per-mapping cache entry; keyed by identity and checked, so a reused id cannot alias."""
    with _prepared_lock:
        entry = _prepared.get(id(definitions))
        if entry is not None and entry.definitions is definitions:
            _prepared.move_to_end(id(definitions))
            return entry
        entry = _Prepared(definitions)
        _prepared[id(definitions)] = entry
        while len(_prepared) > 8:
            _prepared.popitem(last=False)
        return entry


def clear_openapi_cache() -> None:
    with _prepared_lock:
        _prepared.clear()


def build_openapi_v2(
    resources: Iterable[ResourceInfo], definitions: Definitions, info_version: str = "v1.33.0"
) -> dict[str, Any]:
    """The Swagger 2.0 document of ``/openapi/v2``: all definitions and all resources' paths."""
    resources = tuple(resources)
    prepared = _prepare(definitions)
    return prepared.memo(
        ("v2", resources, info_version),
        lambda: build_openapi_v2_uncached(
            resources, definitions, info_version, converted=prepared.v2_definitions()
        ),
    )


def build_openapi_v3(
    group: str, version: str, resources: Iterable[ResourceInfo], definitions: Definitions
) -> dict[str, Any]:
    """The OpenAPI 3.0 document of one group-version (``group`` is "" for the core group)."""
    mine = tuple(r for r in resources if r.group == group and r.version == version)
    prepared = _prepare(definitions)
    return prepared.memo(
        ("v3", group, version, mine),
        lambda: build_openapi_v3_uncached(
            group,
            version,
            mine,
            definitions,
            converted=prepared.v3_definitions(),
            graph=prepared.reference_graph(),
        ),
    )


def build_all_openapi_v3(
    resources: Iterable[ResourceInfo], definitions: Definitions
) -> dict[str, dict[str, Any]]:
    """Every group-version's v3 document, keyed by ``v1`` / ``apps/v1``, in first-seen order."""
    resources = tuple(resources)
    group_versions: dict[str, tuple[str, str]] = {}
    for resource in resources:
        group_versions.setdefault(resource.group_version, (resource.group, resource.version))
    return {
        gv: build_openapi_v3(group, version, resources, definitions)
        for gv, (group, version) in group_versions.items()
    }
