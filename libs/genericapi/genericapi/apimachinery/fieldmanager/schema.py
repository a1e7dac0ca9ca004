"""Merge semantics of an object's parts, read from its OpenAPI or structural schema.

structured-merge-diff types every part of an object as a scalar, a map (granular, or atomic
with ``x-kubernetes-map-type: atomic``) or a list (``x-kubernetes-list-type`` atomic, set or
map with ``x-kubernetes-list-map-keys``; without it, built-ins fall back to the
``patchStrategy``/``patchMergeKey`` of strategic merge patch, as kube-openapi's schemaconv
does, and to atomic). Parts with no type, or under ``x-kubernetes-preserve-unknown-fields``,
are *deduced* from the value itself: maps granular, lists atomic (SMD's
``DeducedParseableType``). An ``x-kubernetes-embedded-resource`` gets ``apiVersion``, ``kind``
and an ObjectMeta ``metadata``, as kube's CRD OpenAPI gives it. Built-in and custom resources
use the same :class:`TypeNode`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SCALAR, MAP, LIST, DEDUCED = "scalar", "map", "list", "deduced"

#: Defaults of list-map key fields that kube's OpenAPI declares and the bundled JSON schemas
#: drop (SMD fills a missing key from its default: ``k:{"containerPort":80,"protocol":"TCP"}``).
_KEY_DEFAULTS: dict[str, dict[str, Any]] = {
    "io.k8s.api.core.v1.ContainerPort": {"protocol": "TCP"},
    "io.k8s.api.core.v1.ServicePort": {"protocol": "TCP"},
}

_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_REF = "#/$defs/"
_EMBEDDED_PROPERTIES: dict[str, Any] = {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                        "metadata": {"$ref": _REF + _OBJECT_META}}


class TypeNode:
    """The merge semantics of one part of an object (one SMD atom)."""

    __slots__ = ("_elem", "_fields", "_resolver", "_src_elem", "_src_fields", "atomic", "closed",
                 "key_defaults", "keys", "kind", "list_type")

    def __init__(self, kind: str, resolver: SchemaResolver | None = None) -> None:
        self.kind = kind
        self.atomic = False
        self.list_type = "atomic"
        self.keys: tuple[str, ...] = ()
        self.key_defaults: dict[str, Any] = {}
        #: A struct that declares its fields and nothing else (no additionalProperties, no
        #: x-kubernetes-preserve-unknown-fields): SMD refuses other fields in it.
        self.closed = False
        self._resolver = resolver
        self._src_fields: Mapping[str, Any] | None = None
        self._src_elem: Any = None
        self._fields: dict[str, TypeNode] = {}
        self._elem: TypeNode | None = None

    @property
    def is_struct(self) -> bool:
        return self._src_fields is not None

    def has_field(self, name: str) -> bool:
        return self._src_fields is not None and name in self._src_fields

    def child(self, name: str) -> tuple[TypeNode, bool]:
        """(type of the value under ``name`` in this map, whether it is a named field)."""
        if self.kind == DEDUCED:
            return DEDUCED_NODE, False
        src = self._src_fields
        if src is not None and name in src:
            node = self._fields.get(name)
            if node is None:
                node = self._fields[name] = self._resolve(src[name])
            return node, True
        return self.elem(), False

    def elem(self) -> TypeNode:
        """Type of list items, or of map values that are not named fields."""
        if self.kind == DEDUCED:
            return DEDUCED_NODE
        if self._elem is None:
            self._elem = self._resolve(self._src_elem) if self._src_elem is not None else DEDUCED_NODE
        return self._elem

    def _resolve(self, node: Any) -> TypeNode:
        if self._resolver is None or not isinstance(node, Mapping):
            return DEDUCED_NODE
        return self._resolver.node(node)

    def __repr__(self) -> str:
        return f"TypeNode({self.kind}, atomic={self.atomic}, list_type={self.list_type}, keys={self.keys})"


DEDUCED_NODE = TypeNode(DEDUCED)


class SchemaResolver:
    """Builds :class:`TypeNode` trees from JSON schemas; ``$ref`` resolved in ``definitions``."""

    def __init__(self, definitions: Mapping[str, Any] | None = None) -> None:
        self._definitions = definitions or {}
        self._cache: dict[int, tuple[Any, TypeNode]] = {}
        self._pinned: list[Any] = []

    def node(self, schema: Mapping[str, Any]) -> TypeNode:
        cached = self._cache.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
        built = self._build(schema)
        self._cache[id(schema)] = (schema, built)
        return built

    def definition(self, name: str) -> Mapping[str, Any] | None:
        found = self._definitions.get(name)
        return found if isinstance(found, Mapping) else None

    def _deref(self, schema: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any]]:
        name: str | None = None
        seen = 0
        current = schema
        while isinstance(current.get("$ref"), str) and seen < 32:
            ref = current["$ref"]
            name = ref[len(_REF):] if ref.startswith(_REF) else ref.rsplit("/", 1)[-1]
            target = self.definition(name)
            if target is None:
                return name, {}
            current = target
            seen += 1
        if not current.get("type") and isinstance(current.get("allOf"), list) and len(current["allOf"]) == 1:
            inner = current["allOf"][0]
            if isinstance(inner, Mapping):
                return self._deref(inner)
        return name, current

    def _build(self, schema: Mapping[str, Any]) -> TypeNode:
        _name, target = self._deref(schema)

        def ext(key: str) -> Any:
            # Field-level extensions win over the referenced definition's own.
            return schema[key] if key in schema else target.get(key)

        if target.get("x-kubernetes-int-or-string") or "oneOf" in target or "anyOf" in target:
            return TypeNode(SCALAR)
        declared = target.get("type")
        types = {declared} if isinstance(declared, str) else set(declared or ())
        types.discard("null")
        if "array" in types or "items" in target:
            node = TypeNode(LIST, self)
            node._src_elem = target.get("items") if isinstance(target.get("items"), Mapping) else None
            list_type = ext("x-kubernetes-list-type")
            if list_type in ("set", "map", "atomic"):
                node.list_type = list_type
                if list_type == "map":
                    keys = ext("x-kubernetes-list-map-keys") or ()
                    node.keys = tuple(k for k in keys if isinstance(k, str))
            else:
                strategy = ext("x-kubernetes-patch-strategy") or ""
                if isinstance(strategy, str) and "merge" in strategy.split(","):
                    merge_key = ext("x-kubernetes-patch-merge-key")
                    node.list_type = "map" if merge_key else "set"
                    node.keys = (merge_key,) if merge_key else ()
            if node.list_type == "map" and node._src_elem is not None:
                node.key_defaults = self._key_defaults(node._src_elem, node.keys)
            return node
        props = target.get("properties")
        additional = target.get("additionalProperties")
        preserve = bool(ext("x-kubernetes-preserve-unknown-fields"))
        if ext("x-kubernetes-embedded-resource"):
            # kube's CRD OpenAPI (addEmbeddedProperties) sets apiVersion, kind and an ObjectMeta
            # metadata on an embedded resource, over whatever the CRD declares for them.
            props = {**(props if isinstance(props, Mapping) else {}), **_EMBEDDED_PROPERTIES}
        if "object" in types or isinstance(props, Mapping) or isinstance(additional, Mapping):
            node = TypeNode(MAP, self)
            if isinstance(props, Mapping):
                node._src_fields = props
            if isinstance(additional, Mapping) and not preserve:
                node._src_elem = additional
            node.atomic = ext("x-kubernetes-map-type") == "atomic"
            node.closed = node._src_fields is not None and node._src_elem is None and not preserve
            if node._src_fields is None and node._src_elem is None and not node.atomic:
                return DEDUCED_NODE
            return node
        if types:
            return TypeNode(SCALAR)
        return DEDUCED_NODE

    def _key_defaults(self, items: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
        name, target = self._deref(items)
        out = dict(_KEY_DEFAULTS.get(name or "", {}))
        props = target.get("properties")
        if isinstance(props, Mapping):
            for k in keys:
                prop = props.get(k)
                if isinstance(prop, Mapping) and "default" in prop:
                    out[k] = prop["default"]
        return {k: v for k, v in out.items() if k in keys}


    def root(self, schema: Mapping[str, Any] | None) -> TypeNode:
        """The type of a whole object: its schema (a CRD's structural schema or a built-in
        definition) with ``metadata`` typed as ObjectMeta; no schema means all deduced but
        metadata."""
        if schema is None:
            schema = _OPEN_ROOT
        cached = self._cache.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
        _, target = self._deref(schema)
        props = target.get("properties")
        meta = props.get("metadata") if isinstance(props, Mapping) else None
        # (a CRD's own metadata schema, at most name and generateName, is replaced by ObjectMeta)
        typed_meta = isinstance(meta, Mapping) and bool(meta.get("$ref"))
        if typed_meta and isinstance(props, Mapping) and "apiVersion" in props and "kind" in props:
            built = self.node(schema)
        else:
            # A custom resource's schema: kube's CRD OpenAPI adds apiVersion, kind and ObjectMeta.
            wrapped = dict(target)
            wrapped["properties"] = {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                     **(props if isinstance(props, Mapping) else {})}
            if not typed_meta:
                wrapped["properties"]["metadata"] = {"$ref": _REF + _OBJECT_META}
            if not isinstance(props, Mapping):
                wrapped["x-kubernetes-preserve-unknown-fields"] = True
            self._pinned.append(wrapped)
            built = self.node(wrapped)
        self._cache[id(schema)] = (schema, built)
        return built


_OPEN_ROOT: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
