"""The OpenAPI v2 and v3 documents of the sample aggregated API server (``sample_apiserver.py``).

``flunders`` of ``wardle.example.com/<version>``: a Flunder with a described ``spec.reference``
(what ``kubectl explain`` shows), a FlunderList, list/create/get/delete paths, plus what a real
aggregated server also serves and kube-aggregator must not take over: a group path outside
``/apis/<group>/<version>/`` with a definition only it uses. Its ``ObjectMeta`` and ``ListMeta``
are deliberately trimmed, so they differ from the built-in ones of the same name: merged into the
gateway's ``/openapi/v2`` they must be renamed (``..._v2``), not replace the built-ins.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

GROUP = "wardle.example.com"
META = "io.k8s.apimachinery.pkg.apis.meta.v1"
REFERENCE_DESCRIPTION = "Reference names another flunder this one points at (the wardle sample's documented field)."
FLUNDER_DESCRIPTION = "Flunder is the only kind of the wardle sample aggregated API server."
#: Used only by the group path (``/apis/<group>/``), which the gateway drops with its definitions.
GROUP_ONLY = "com.example.wardle.GroupInfo"


def _definitions(version: str) -> dict[str, dict[str, Any]]:
    prefix = f"com.example.wardle.{version}"
    gvk = [{"group": GROUP, "version": version, "kind": "Flunder"}]
    return {
        f"{prefix}.Flunder": {
            "description": FLUNDER_DESCRIPTION, "type": "object",
            "properties": {
                "apiVersion": {"description": "APIVersion of the object.", "type": "string"},
                "kind": {"description": "Kind of the object.", "type": "string"},
                "metadata": {"description": "Standard object metadata (trimmed).",
                             "$ref": f"#/definitions/{META}.ObjectMeta"},
                "spec": {"description": "What the flunder refers to.", "$ref": f"#/definitions/{prefix}.FlunderSpec"},
            },
            "x-kubernetes-group-version-kind": gvk,
        },
        f"{prefix}.FlunderSpec": {
            "description": "FlunderSpec is the desired state of a Flunder.", "type": "object",
            "properties": {
                "reference": {"description": REFERENCE_DESCRIPTION, "type": "string"},
                "referenceType": {"description": "Flunder or Fischer.", "type": "string",
                                  "enum": ["Flunder", "Fischer"]},
            },
        },
        f"{prefix}.FlunderList": {
            "description": "FlunderList is a list of Flunders.", "type": "object", "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "items": {"type": "array", "items": {"$ref": f"#/definitions/{prefix}.Flunder"}},
                "metadata": {"$ref": f"#/definitions/{META}.ListMeta"},
            },
            "x-kubernetes-group-version-kind": [{"group": GROUP, "version": version, "kind": "FlunderList"}],
        },
        f"{META}.ObjectMeta": {
            "description": "Trimmed ObjectMeta of the wardle sample.", "type": "object",
            "properties": {"name": {"description": "Name of the flunder.", "type": "string"},
                           "namespace": {"type": "string"}},
        },
        f"{META}.ListMeta": {
            "description": "Trimmed ListMeta of the wardle sample.", "type": "object",
            "properties": {"resourceVersion": {"type": "string"}},
        },
        GROUP_ONLY: {"description": "Only the group path uses this.", "type": "object",
                     "properties": {"name": {"type": "string"}}},
    }


def _op(op_id: str, response: str, params: list[str], ref: str, action: str = "",
        gvk: dict[str, str] | None = None) -> dict[str, Any]:
    """One operation; resource operations carry kube's ``x-kubernetes-action`` and GVK (kubectl explain
    finds a resource's kind through them)."""
    op: dict[str, Any] = {
        "operationId": op_id, "consumes": ["*/*"], "produces": ["application/json"], "schemes": ["https"],
        "parameters": [{"name": p, "in": "path", "required": True, "type": "string"} for p in params],
        "responses": {response: {"description": "OK", "schema": {"$ref": ref}}}}
    if gvk is not None:
        op["x-kubernetes-action"] = action
        op["x-kubernetes-group-version-kind"] = gvk
    return op


def openapi_v2(version: str) -> dict[str, Any]:
    prefix = f"com.example.wardle.{version}"
    base = f"/apis/{GROUP}/{version}"
    flunder, flist = f"#/definitions/{prefix}.Flunder", f"#/definitions/{prefix}.FlunderList"
    cap = version.capitalize()
    gvk = {"group": GROUP, "version": version, "kind": "Flunder"}
    ns, named = ["namespace"], ["namespace", "name"]
    paths = {
        f"{base}/flunders": {"get": _op(f"listWardle{cap}FlunderForAllNamespaces", "200", [], flist, "list", gvk)},
        f"{base}/namespaces/{{namespace}}/flunders": {
            "get": _op(f"listWardle{cap}NamespacedFlunder", "200", ns, flist, "list", gvk),
            "post": _op(f"createWardle{cap}NamespacedFlunder", "201", ns, flunder, "post", gvk)},
        f"{base}/namespaces/{{namespace}}/flunders/{{name}}": {
            "get": _op(f"readWardle{cap}NamespacedFlunder", "200", named, flunder, "get", gvk),
            "delete": _op(f"deleteWardle{cap}NamespacedFlunder", "200", named, flunder, "delete", gvk)},
        f"/apis/{GROUP}/": {"get": _op("getWardleAPIGroup", "200", [], f"#/definitions/{GROUP_ONLY}")},
    }
    return {"swagger": "2.0", "info": {"title": "wardle", "version": version}, "paths": paths,
            "definitions": _definitions(version)}


def _v3_refs(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (v.replace("#/definitions/", "#/components/schemas/") if k == "$ref" else _v3_refs(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_v3_refs(v) for v in node]
    return node


def openapi_v3(version: str) -> dict[str, Any]:
    """The ``apis/<group>/<version>`` OpenAPI v3 document (only this group-version's paths)."""
    v2 = openapi_v2(version)
    paths: dict[str, Any] = {}
    for path, item in v2["paths"].items():
        if not path.startswith(f"/apis/{GROUP}/{version}/"):
            continue
        paths[path] = {}
        for method, op in item.items():
            params = [{"name": p["name"], "in": "path", "required": True, "schema": {"type": "string"}}
                      for p in op["parameters"]]
            responses = {code: {"description": r["description"],
                                "content": {"application/json": {"schema": _v3_refs(r["schema"])}}}
                         for code, r in op["responses"].items()}
            extensions = {k: v for k, v in op.items() if k.startswith("x-")}
            paths[path][method] = {"operationId": op["operationId"], "parameters": params, "responses": responses,
                                   **extensions}
    schemas = {k: _v3_refs(v) for k, v in v2["definitions"].items() if k != GROUP_ONLY}
    return {"openapi": "3.0.0", "info": {"title": "wardle", "version": version}, "paths": paths,
            "components": {"schemas": schemas}}


def _encode(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True).encode()


@dataclass(frozen=True)
class Documents:
    """What the sample serves at ``/openapi/v2``, ``/openapi/v3`` and the v3 group-version path,
    encoded once, with their ETags (a content hash, as kube-openapi makes them)."""

    v2: bytes
    v2_etag: str
    v3_key: str
    v3: bytes
    v3_hash: str

    @classmethod
    def build(cls, version: str) -> Documents:
        v2 = _encode(openapi_v2(version))
        v3 = _encode(openapi_v3(version))
        v3_hash = hashlib.sha512(v3).hexdigest().upper()
        return cls(v2, f'"{hashlib.sha512(v2).hexdigest().upper()}"', f"apis/{GROUP}/{version}", v3, v3_hash)

    @property
    def v3_index(self) -> bytes:
        url = f"/openapi/v3/{self.v3_key}?hash={self.v3_hash}"
        return _encode({"paths": {self.v3_key: {"serverRelativeURL": url}}})
