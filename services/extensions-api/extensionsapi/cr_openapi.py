"""OpenAPI definitions of custom resources, in the JSON-Schema shape the shared OpenAPI builder reads.

Each served version with a schema gets a definition named as kube names it (reversed group,
version, kind: ``com.example.stable.v1.CronTab``) whose ``metadata`` refers to ObjectMeta and
whose ``apiVersion``/``kind`` carry the standard descriptions, so ``kubectl explain`` walks it
like a built-in kind. Versions without a schema are left to the builder's permissive synthesis.
"""

from __future__ import annotations

import copy
from typing import Any

from genericapi.apimachinery.openapi_schema import GVK_EXTENSION, OBJECT_META, synthetic_name
from genericapi.apimachinery.tables_common import doc

_TYPED = "io.k8s.api.core.v1.ConfigMap"  # any built-in kind: the TypeMeta/metadata descriptions


def definition_name(group: str, version: str, kind: str) -> str:
    return synthetic_name(group, version, kind)


def kind_definition(group: str, version: str, kind: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The published schema of one kind at one version (``schema``: its openAPIV3Schema)."""
    out = copy.deepcopy(schema)
    out.setdefault("type", "object")
    props = out.get("properties")
    if not isinstance(props, dict):
        props = out["properties"] = {}
    props["apiVersion"] = {**(props.get("apiVersion") or {}), "type": "string",
                           "description": doc(_TYPED, "apiVersion")}
    props["kind"] = {**(props.get("kind") or {}), "type": "string", "description": doc(_TYPED, "kind")}
    props["metadata"] = {"$ref": "#/$defs/" + OBJECT_META, "description": doc(_TYPED, "metadata")}
    out[GVK_EXTENSION] = [{"group": group, "kind": kind, "version": version}]
    return out


def definitions_for(crd: dict[str, Any], served: list[tuple[str, str, dict[str, Any] | None]]) -> dict[str, Any]:
    """Definitions of one CRD: ``served`` is (version, kind, openAPIV3Schema or None) per version."""
    group = (crd.get("spec") or {}).get("group", "")
    out: dict[str, Any] = {}
    for version, kind, schema in served:
        if schema:
            out[definition_name(group, version, kind)] = kind_definition(group, version, kind, schema)
    return out
