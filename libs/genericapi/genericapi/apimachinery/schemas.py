"""The built-in kinds' OpenAPI schemas, loaded once and indexed for fast walking.

Validation, decoding error messages, strategic merge patch and the OpenAPI documents all need
to know the shape of built-in objects. The schemas come from the ``kubernetes_validate``
package (JSON-Schema form of the upstream OpenAPI definitions, Kubernetes extensions kept), so
this module only loads them, indexes them by group/version/kind and offers small helpers for
walking from a schema node to the schema of a child value.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

_REF_PREFIX = "#/$defs/"
_EMPTY: dict[str, Any] = {}


def _schema_file(kubernetes_version: str) -> Path:
    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or spec.origin is None:
        raise RuntimeError("the kubernetes_validate package is not installed")
    base = Path(spec.origin).parent / "kubernetes-json-schema"
    major_minor = ".".join(kubernetes_version.lstrip("v").split(".")[:2])
    path = base / f"v{major_minor}.0-local" / "_definitions.json"
    if not path.is_file():
        raise FileNotFoundError(f"no schemas for Kubernetes {kubernetes_version} in {base}")
    return path


_NODE_TYPES: dict[int, tuple[Mapping[str, Any], frozenset[str]]] = {}


def node_types(node: Mapping[str, Any]) -> frozenset[str]:
    """JSON types a (resolved) schema node admits, ignoring ``null``.

    ``oneOf`` alternatives (IntOrString, Quantity) contribute all their types. An empty set
    means "anything goes" (no type constraint). Memoized per node (it runs for every field of
    every validated object); the node is kept with its entry so its id cannot be reused.
    """
    cached = _NODE_TYPES.get(id(node))
    if cached is not None and cached[0] is node:
        return cached[1]
    result = _node_types(node)
    _NODE_TYPES[id(node)] = (node, result)
    return result


def _node_types(node: Mapping[str, Any]) -> frozenset[str]:
    declared = node.get("type")
    out: set[str] = set()
    if isinstance(declared, str):
        out.add(declared)
    elif isinstance(declared, list):
        out.update(t for t in declared if t != "null")
    for alternative in node.get("oneOf", ()) or ():
        if isinstance(alternative, Mapping):
            out.update(node_types(alternative))
    out.discard("null")
    return frozenset(out)


@dataclass(frozen=True)
class PatchMeta:
    """Strategic-merge-patch metadata of one field: its strategies and merge key."""

    strategies: tuple[str, ...] = ()
    merge_key: str = ""

    @classmethod
    def from_node(cls, node: Mapping[str, Any]) -> PatchMeta:
        raw = node.get("x-kubernetes-patch-strategy") or ""
        strategies = tuple(s for s in raw.split(",") if s) if isinstance(raw, str) else ()
        merge_key = node.get("x-kubernetes-patch-merge-key") or ""
        if not strategies and not merge_key:
            return _NO_META
        return cls(strategies, merge_key if isinstance(merge_key, str) else "")


_NO_META = PatchMeta()


class PatchSchema:
    """Where a strategic merge patch currently is in a kind's schema.

    Built from :meth:`SchemaCatalog.patch_schema`. A ``PatchSchema`` with no node is
    schema-less: every field has no patch metadata, so maps merge like JSON merge patch and
    lists are replaced (the behaviour for parts of an object the schema does not describe).
    """

    __slots__ = ("_catalog", "_node")

    def __init__(self, catalog: SchemaCatalog | None, node: Mapping[str, Any] | None) -> None:
        self._catalog = catalog
        self._node = catalog.resolve(node) if catalog is not None and node is not None else None

    @classmethod
    def schemaless(cls) -> PatchSchema:
        return _SCHEMALESS

    @property
    def is_schemaless(self) -> bool:
        return self._node is None

    def field(self, name: str) -> tuple[PatchSchema, PatchMeta]:
        """Schema and patch metadata of the value under ``name`` in this map."""
        if self._catalog is None or self._node is None:
            return _SCHEMALESS, _NO_META
        child = self._catalog.child_schema(self._node, name)
        if child is None:
            return _SCHEMALESS, _NO_META
        return PatchSchema(self._catalog, child), PatchMeta.from_node(child)

    def items(self) -> PatchSchema:
        """Schema of the elements when this node is a list."""
        if self._catalog is None or self._node is None:
            return _SCHEMALESS
        child = self._catalog.items_schema(self._node)
        return PatchSchema(self._catalog, child) if child is not None else _SCHEMALESS


_SCHEMALESS = PatchSchema(None, None)


class SchemaCatalog:
    """Every built-in definition, indexed by name and by group/version/kind."""

    def __init__(self, definitions: dict[str, dict[str, Any]]) -> None:
        self._definitions = definitions
        self._by_gvk: dict[tuple[str, str, str], str] = {}
        for name, definition in definitions.items():
            for gvk in definition.get("x-kubernetes-group-version-kind", ()) or ():
                key = (gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))
                # The first definition wins; duplicates (e.g. WatchEvent) are not kinds we serve.
                self._by_gvk.setdefault(key, name)

    @classmethod
    def load(cls, kubernetes_version: str = "1.33") -> SchemaCatalog:
        """The catalog for a Kubernetes minor version, parsed once per process."""
        return _load_cached(".".join(kubernetes_version.lstrip("v").split(".")[:2]))

    @property
    def definitions(self) -> dict[str, dict[str, Any]]:
        """The raw ``$defs`` mapping (definition name -> JSON schema). Do not mutate."""
        return self._definitions

    def definition(self, name: str) -> dict[str, Any] | None:
        return self._definitions.get(name)

    def definition_name(self, group: str, version: str, kind: str) -> str | None:
        """``io.k8s.api.apps.v1.Deployment`` for ("apps", "v1", "Deployment")."""
        return self._by_gvk.get((group, version, kind))

    def root_schema(self, group: str, version: str, kind: str) -> dict[str, Any] | None:
        name = self.definition_name(group, version, kind)
        return self._definitions.get(name) if name else None

    def kinds(self) -> list[tuple[str, str, str]]:
        return list(self._by_gvk)

    @staticmethod
    def ref_name(node: Mapping[str, Any]) -> str | None:
        """Definition name a node refers to, if it is a ``$ref`` node."""
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
            return ref[len(_REF_PREFIX):]
        return None

    def resolve(self, node: Mapping[str, Any]) -> dict[str, Any]:
        """Follow ``$ref`` until a concrete schema; an unknown reference resolves to ``{}``."""
        seen = 0
        current: Mapping[str, Any] = node
        while "$ref" in current and seen < 32:
            name = self.ref_name(current)
            target = self._definitions.get(name) if name else None
            if target is None:
                return _EMPTY
            current = target
            seen += 1
        return current  # type: ignore[return-value]

    def resolve_named(self, node: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
        """Like :meth:`resolve`, also giving the definition name reached (None if inline)."""
        name = self.ref_name(node)
        resolved = self.resolve(node)
        return name, resolved

    def property_schema(self, node: Mapping[str, Any], name: str) -> dict[str, Any] | None:
        """Unresolved schema of property ``name`` (keeps field-level extensions)."""
        props = self.resolve(node).get("properties")
        if props is None:
            return None
        child = props.get(name)
        return child if isinstance(child, dict) else None

    def items_schema(self, node: Mapping[str, Any]) -> dict[str, Any] | None:
        items = self.resolve(node).get("items")
        return items if isinstance(items, dict) else None

    def additional_properties_schema(self, node: Mapping[str, Any]) -> dict[str, Any] | None:
        extra = self.resolve(node).get("additionalProperties")
        return extra if isinstance(extra, dict) else None

    def child_schema(self, node: Mapping[str, Any], key: str) -> dict[str, Any] | None:
        """Schema of the value under ``key`` in an object: a property or a map value."""
        resolved = self.resolve(node)
        props = resolved.get("properties")
        if props is not None and key in props:
            child = props[key]
            return child if isinstance(child, dict) else None
        extra = resolved.get("additionalProperties")
        return extra if isinstance(extra, dict) else None

    def patch_schema(self, group: str, version: str, kind: str) -> PatchSchema:
        """Strategic merge patch view of a kind; schema-less when the kind is unknown."""
        root = self.root_schema(group, version, kind)
        return PatchSchema(self, root) if root is not None else PatchSchema.schemaless()


@functools.lru_cache(maxsize=4)
def _load_cached(major_minor: str) -> SchemaCatalog:
    raw = orjson.loads(_schema_file(major_minor).read_bytes())
    return SchemaCatalog(raw["$defs"])
