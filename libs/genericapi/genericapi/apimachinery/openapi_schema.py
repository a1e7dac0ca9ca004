"""Schema definitions as the OpenAPI documents publish them.

Our schema source (kubernetes-validate's ``_definitions.json``, and custom resources fed in the same
shape) is JSON Schema: ``$ref: "#/$defs/<name>"``, nullable ``["string", "null"]`` type lists and
``oneOf`` for IntOrString/Quantity. kube-apiserver publishes the same types in Swagger 2.0
(``/openapi/v2``) and OpenAPI 3.0 (``/openapi/v3``) form, and kubectl reads those forms: ``kubectl
explain`` walks them and ``kubectl apply`` reads the ``x-kubernetes-patch-*`` extensions from them
to compute strategic merge patches. This module converts between the two, finds the definition
that carries a group-version-kind, and fills in definitions a resource needs but nobody supplied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: Input-side definition map: name -> JSON-Schema definition.
Definitions = Mapping[str, Mapping[str, Any]]

GVK_EXTENSION = "x-kubernetes-group-version-kind"

META = "io.k8s.apimachinery.pkg.apis.meta.v1."
OBJECT_META = META + "ObjectMeta"
LIST_META = META + "ListMeta"
STATUS = META + "Status"
DELETE_OPTIONS = META + "DeleteOptions"
WATCH_EVENT = META + "WatchEvent"
PATCH = META + "Patch"
API_RESOURCE_LIST = META + "APIResourceList"
SCALE = "io.k8s.api.autoscaling.v1.Scale"

V2_REF_PREFIX = "#/definitions/"
V3_REF_PREFIX = "#/components/schemas/"
_INPUT_REF_PREFIXES = ("#/$defs/", "#/definitions/", "#/components/schemas/")

# Keywords both OpenAPI dialects accept unchanged (values are scalars or plain data).
_PLAIN_KEYWORDS = frozenset(
    {
        "description",
        "format",
        "title",
        "default",
        "example",
        "enum",
        "required",
        "readOnly",
        "discriminator",
        "pattern",
        "maximum",
        "minimum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxProperties",
        "minProperties",
        "multipleOf",
        "externalDocs",
    }
)
# Keywords only OpenAPI 3 schemas carry; Swagger 2.0 has no place for them.
_V3_ONLY_KEYWORDS = frozenset({"nullable", "writeOnly", "deprecated"})
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def ref_name(ref: str) -> str:
    """Definition name of a ``$ref`` in any of the three spellings."""
    for prefix in _INPUT_REF_PREFIXES:
        if ref.startswith(prefix):
            return ref[len(prefix) :]
    return ref.rsplit("/", 1)[-1]


def _single_type(value: Any) -> str | list[str] | None:
    """Drop ``null`` from a JSON-Schema type list the way kube publishes non-pointer types."""
    if isinstance(value, str):
        return None if value == "null" else value
    if isinstance(value, list):
        kept = [t for t in value if t != "null"]
        if not kept:
            return None
        return kept[0] if len(kept) == 1 else kept
    return None


def _one_of_scalar_types(branches: Any) -> frozenset[str] | None:
    """The set of types when every ``oneOf`` branch is a bare ``{"type": ...}``, else None."""
    if not isinstance(branches, list) or not branches:
        return None
    found: set[str] = set()
    for branch in branches:
        if not isinstance(branch, Mapping) or set(branch) - {"type"}:
            return None
        single = _single_type(branch.get("type"))
        if not isinstance(single, str):
            return None
        found.add(single)
    return frozenset(found)


_INT_OR_STRING = frozenset({"integer", "string"})
_QUANTITY = frozenset({"number", "string"})


def convert_schema(node: Mapping[str, Any], *, v3: bool) -> dict[str, Any]:
    """One JSON-Schema node in Swagger 2.0 (``v3=False``) or OpenAPI 3.0 (``v3=True``) form."""
    prefix = V3_REF_PREFIX if v3 else V2_REF_PREFIX
    out: dict[str, Any] = {}
    scalar_union = _one_of_scalar_types(node.get("oneOf"))
    for key, value in node.items():
        if key == "$ref":
            if isinstance(value, str):
                out["$ref"] = prefix + ref_name(value)
        elif key == "type":
            single = _single_type(value)
            if single is not None:
                out["type"] = single
        elif key == "properties" or key == "patternProperties":
            if isinstance(value, Mapping) and (key == "properties" or v3):
                out[key] = {name: convert_schema(sub, v3=v3) for name, sub in value.items()}
        elif key == "items":
            if isinstance(value, Mapping):
                out["items"] = convert_schema(value, v3=v3)
            elif isinstance(value, list) and value:
                out["items"] = convert_schema(value[0], v3=v3)
        elif key == "additionalProperties":
            if isinstance(value, bool):
                out[key] = value
            elif isinstance(value, Mapping):
                out[key] = convert_schema(value, v3=v3)
        elif key in _SUBSCHEMA_LISTS:
            if key == "oneOf" and scalar_union is not None:
                continue  # handled below
            if isinstance(value, list) and (v3 or key == "allOf"):
                out[key] = [convert_schema(sub, v3=v3) for sub in value if isinstance(sub, Mapping)]
        elif key == "not":
            if v3 and isinstance(value, Mapping):
                out[key] = convert_schema(value, v3=v3)
        elif key.startswith("x-") or key in _PLAIN_KEYWORDS:
            out[key] = value
        elif key in _V3_ONLY_KEYWORDS and v3:
            out[key] = value
        # anything else ($schema, $id, const, ...) has no OpenAPI equivalent and is dropped
    if scalar_union is not None:
        if scalar_union <= _INT_OR_STRING and "integer" in scalar_union:
            out.setdefault("type", "string")
            out.setdefault("format", "int-or-string")
        elif scalar_union <= _QUANTITY:
            out.setdefault("type", "string")
        elif v3:
            out["oneOf"] = [{"type": t} for t in sorted(scalar_union)]
    if v3 and "$ref" in out and len(out) > 1:
        # OpenAPI 3.0 ignores siblings of $ref; kube wraps the reference in allOf to keep them.
        out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    return out


def _gvk_api_versions_and_kinds(gvks: Any) -> tuple[set[str], set[str]]:
    api_versions: set[str] = set()
    kinds: set[str] = set()
    if isinstance(gvks, list):
        for gvk in gvks:
            if isinstance(gvk, Mapping):
                group, version = gvk.get("group", ""), gvk.get("version", "")
                api_versions.add(f"{group}/{version}" if group else str(version))
                kinds.add(str(gvk.get("kind", "")))
    return api_versions, kinds


def _strip_type_meta_enums(definition: Mapping[str, Any]) -> Mapping[str, Any]:
    """Remove the ``enum`` our schema source adds to ``apiVersion``/``kind``; kube publishes none.

    Only an enum whose values all come from the definition's own group-version-kinds is removed,
    so a custom resource that really restricts those fields keeps its enum.
    """
    properties = definition.get("properties")
    if GVK_EXTENSION not in definition or not isinstance(properties, Mapping):
        return definition
    api_versions, kinds = _gvk_api_versions_and_kinds(definition[GVK_EXTENSION])
    allowed = {"apiVersion": api_versions, "kind": kinds}
    changed: dict[str, Any] | None = None
    for field, values in allowed.items():
        prop = properties.get(field)
        if isinstance(prop, Mapping) and isinstance(prop.get("enum"), list) and set(prop["enum"]) <= values:
            if changed is None:
                changed = dict(properties)
            changed[field] = {k: v for k, v in prop.items() if k != "enum"}
    if changed is None:
        return definition
    return {**definition, "properties": changed}


def convert_definitions(definitions: Definitions, *, v3: bool) -> dict[str, dict[str, Any]]:
    """Every definition converted to the chosen OpenAPI dialect."""
    return {
        name: convert_schema(_strip_type_meta_enums(definition), v3=v3)
        for name, definition in definitions.items()
    }


def collect_refs(node: Any, into: set[str]) -> set[str]:
    """Add the name of every definition referenced anywhere inside ``node`` to ``into``."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                into.add(ref_name(value))
            elif not (isinstance(key, str) and key.startswith("x-")):
                collect_refs(value, into)
    elif isinstance(node, list):
        for item in node:
            collect_refs(item, into)
    return into


def reference_graph(definitions: Definitions) -> dict[str, frozenset[str]]:
    """For each definition, the names it references directly."""
    return {name: frozenset(collect_refs(schema, set())) for name, schema in definitions.items()}


def closure(roots: Iterable[str], graph: Mapping[str, frozenset[str]]) -> set[str]:
    """The roots and every definition reachable from them (unknown names are kept as-is)."""
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        stack.extend(graph.get(name, ()))
    return seen


def gvk_index(definitions: Definitions) -> dict[tuple[str, str, str], str]:
    """(group, version, kind) -> definition name, from ``x-kubernetes-group-version-kind``.

    A definition listing several GVKs (the meta types) is indexed under each; when two definitions
    claim the same GVK, the one listing fewer GVKs (the more specific) wins.
    """
    index: dict[tuple[str, str, str], str] = {}
    width: dict[tuple[str, str, str], int] = {}
    for name, schema in definitions.items():
        gvks = schema.get(GVK_EXTENSION)
        if not isinstance(gvks, list):
            continue
        for gvk in gvks:
            if not isinstance(gvk, Mapping):
                continue
            key = (str(gvk.get("group", "")), str(gvk.get("version", "")), str(gvk.get("kind", "")))
            if key not in index or len(gvks) < width[key]:
                index[key] = name
                width[key] = len(gvks)
    return index


def synthetic_name(group: str, version: str, kind: str) -> str:
    """Definition name kube gives a type it builds itself: reversed group, version, kind."""
    if not group:
        return f"io.k8s.api.core.{version}.{kind}"
    return ".".join([*reversed(group.split(".")), version, kind])


def _type_meta_properties(api_version: str) -> dict[str, Any]:
    return {
        "apiVersion": {
            "description": f"APIVersion of this representation of the object ({api_version}).",
            "type": "string",
        },
        "kind": {"description": "Kind of the REST resource this object represents.", "type": "string"},
    }


def synthesize_kind_definition(group: str, version: str, kind: str) -> dict[str, Any]:
    """A permissive schema for a kind that came without one (fields other than metadata unknown)."""
    api_version = f"{group}/{version}" if group else version
    return {
        "description": f"{kind} is served without a published schema.",
        "type": "object",
        "properties": {
            **_type_meta_properties(api_version),
            "metadata": {"$ref": "#/$defs/" + OBJECT_META, "description": "Standard object's metadata."},
        },
        "x-kubernetes-preserve-unknown-fields": True,
        GVK_EXTENSION: [{"group": group, "kind": kind, "version": version}],
    }


def synthesize_list_definition(group: str, version: str, kind: str, item_definition: str) -> dict[str, Any]:
    """The ``<Kind>List`` schema kube publishes beside every kind it serves."""
    api_version = f"{group}/{version}" if group else version
    return {
        "description": f"{kind}List is a list of {kind}.",
        "type": "object",
        "properties": {
            **_type_meta_properties(api_version),
            "items": {
                "description": f"List of {kind.lower()}s.",
                "type": "array",
                "items": {"$ref": "#/$defs/" + item_definition},
            },
            "metadata": {"$ref": "#/$defs/" + LIST_META, "description": "Standard list metadata."},
        },
        "required": ["items"],
        GVK_EXTENSION: [{"group": group, "kind": f"{kind}List", "version": version}],
    }
