"""The Swagger 2.0 document kube-apiserver serves at ``/openapi/v2``.

kubectl 1.27/1.28 (and older clients) read this document, usually as protobuf, to explain
types, to compute strategic merge patches for ``kubectl apply`` and to check whether PATCH
supports ``fieldValidation``. It holds every definition and every path of every resource.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from genericapi.apimachinery.openapi_paths import (
    RESPONSE_MEDIA_TYPES,
    WATCH_MEDIA_TYPES,
    Operation,
    Param,
    PathSpec,
    api_resources_path,
    resolve_schemas,
    resource_paths,
    sorted_params,
)
from genericapi.apimachinery.openapi_schema import V2_REF_PREFIX, Definitions, convert_definitions
from genericapi.apimachinery.resources import ResourceInfo

SECURITY_DEFINITIONS: dict[str, Any] = {
    "BearerToken": {
        "description": "Bearer Token authentication",
        "in": "header",
        "name": "authorization",
        "type": "apiKey",
    }
}


def render_param_v2(param: Param) -> dict[str, Any]:
    rendered: dict[str, Any] = {
        "description": param.description,
        "in": param.location,
        "name": param.name,
        "type": param.type,
        "uniqueItems": True,
    }
    if param.required:
        rendered["required"] = True
    return rendered


def _ref(definition: str) -> dict[str, str]:
    return {"$ref": V2_REF_PREFIX + definition}


def render_operation_v2(operation: Operation) -> dict[str, Any]:
    params: list[dict[str, Any]] = []
    consumes: list[str] = ["*/*"]
    if operation.body is not None:
        body: dict[str, Any] = {"in": "body", "name": "body", "schema": _ref(operation.body.definition)}
        if operation.body.required:
            body["required"] = True
        params.append(body)
        if operation.body.kind == "patch":
            consumes = list(operation.body.patch_media_types)
    params.extend(render_param_v2(p) for p in sorted_params(operation.params))
    produces = list(operation.produces or RESPONSE_MEDIA_TYPES)
    if operation.streams:
        produces.extend(WATCH_MEDIA_TYPES)
    responses: dict[str, Any] = {}
    for response in operation.responses:
        entry: dict[str, Any] = {"description": response.description}
        if response.string:
            entry["schema"] = {"type": "string"}
        elif response.definition is not None:
            entry["schema"] = _ref(response.definition)
        responses[response.code] = entry
    rendered: dict[str, Any] = {
        "consumes": consumes,
        "description": operation.description,
        "operationId": operation.operation_id,
        "produces": produces,
        "responses": responses,
        "schemes": ["https"],
        "tags": [operation.tag],
    }
    if params:
        rendered["parameters"] = params
    if operation.action is not None:
        rendered["x-kubernetes-action"] = operation.action
    if operation.gvk is not None:
        rendered["x-kubernetes-group-version-kind"] = operation.gvk.as_dict()
    return rendered


def render_path_v2(spec: PathSpec) -> dict[str, Any]:
    item: dict[str, Any] = {op.method: render_operation_v2(op) for op in spec.operations}
    if spec.params:
        item["parameters"] = [render_param_v2(p) for p in sorted_params(spec.params)]
    return item


def all_paths(
    resources: Iterable[ResourceInfo], definitions: Definitions
) -> tuple[dict[str, Mapping[str, Any]], list[PathSpec]]:
    """Effective definitions and every path of the given resources, group-version roots included."""
    resources = list(resources)
    effective, schemas = resolve_schemas(resources, definitions)
    specs: list[PathSpec] = []
    seen_roots: set[tuple[str, str]] = set()
    for resource in resources:
        key = (resource.group, resource.version)
        if key not in seen_roots:
            seen_roots.add(key)
            specs.append(api_resources_path(*key))
        specs.extend(resource_paths(resource, schemas[resource]))
    return effective, specs


def build_openapi_v2_uncached(
    resources: Iterable[ResourceInfo],
    definitions: Definitions,
    info_version: str = "v1.33.0",
    *,
    converted: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Build the document. ``converted`` may carry already-converted v2 definitions to reuse."""
    effective, specs = all_paths(resources, definitions)
    if converted is None:
        converted_defs = convert_definitions(effective, v3=False)
    else:
        extra = {name: d for name, d in effective.items() if name not in converted}
        converted_defs = {**converted, **convert_definitions(extra, v3=False)}
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": info_version},
        "paths": {spec.path: render_path_v2(spec) for spec in specs},
        "definitions": converted_defs,
        "security": [{"BearerToken": []}],
        "securityDefinitions": SECURITY_DEFINITIONS,
    }
