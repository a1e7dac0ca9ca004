"""The OpenAPI 3.0 documents kube-apiserver serves under ``/openapi/v3``.

There is one document per group-version (``/openapi/v3/api/v1``, ``/openapi/v3/apis/apps/v1``)
holding that group-version's paths and only the schemas they reach, plus an index at
``/openapi/v3`` pointing at each with a content hash so clients can cache them forever. kubectl
1.29+ uses these for ``explain``, for ``apply``'s strategic merge patch and to check that PATCH
accepts ``fieldValidation``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

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
from genericapi.apimachinery.openapi_schema import (
    V3_REF_PREFIX,
    Definitions,
    closure,
    collect_refs,
    convert_definitions,
    reference_graph,
)
from genericapi.apimachinery.resources import ResourceInfo


def render_param_v3(param: Param) -> dict[str, Any]:
    rendered: dict[str, Any] = {
        "description": param.description,
        "in": param.location,
        "name": param.name,
        "schema": {"type": param.type, "uniqueItems": True},
    }
    if param.required:
        rendered["required"] = True
    return rendered


def _content(definition: str, media_types: Iterable[str]) -> dict[str, Any]:
    schema = {"$ref": V3_REF_PREFIX + definition}
    return {media_type: {"schema": schema} for media_type in media_types}


def render_operation_v3(operation: Operation) -> dict[str, Any]:
    rendered: dict[str, Any] = {
        "description": operation.description,
        "operationId": operation.operation_id,
        "tags": [operation.tag],
    }
    if operation.params:
        rendered["parameters"] = [render_param_v3(p) for p in sorted_params(operation.params)]
    body = operation.body
    if body is not None:
        if body.kind == "patch":
            media: Iterable[str] = body.patch_media_types
        elif body.kind == "options":
            media = ("application/json",)
        else:
            media = ("*/*",)
        request: dict[str, Any] = {"content": _content(body.definition, media)}
        if body.required:
            request["required"] = True
        rendered["requestBody"] = request
    response_media = list(operation.produces or RESPONSE_MEDIA_TYPES)
    if operation.streams:
        response_media.extend(WATCH_MEDIA_TYPES)
    responses: dict[str, Any] = {}
    for response in operation.responses:
        entry: dict[str, Any] = {"description": response.description}
        if response.string:
            entry["content"] = {media: {"schema": {"type": "string"}} for media in response_media}
        elif response.definition is not None:
            entry["content"] = _content(response.definition, response_media)
        responses[response.code] = entry
    rendered["responses"] = responses
    if operation.action is not None:
        rendered["x-kubernetes-action"] = operation.action
    if operation.gvk is not None:
        rendered["x-kubernetes-group-version-kind"] = operation.gvk.as_dict()
    return rendered


def render_path_v3(spec: PathSpec) -> dict[str, Any]:
    item: dict[str, Any] = {op.method: render_operation_v3(op) for op in spec.operations}
    if spec.params:
        item["parameters"] = [render_param_v3(p) for p in sorted_params(spec.params)]
    return item


def build_openapi_v3_uncached(
    group: str,
    version: str,
    resources: Iterable[ResourceInfo],
    definitions: Definitions,
    *,
    converted: Mapping[str, Any] | None = None,
    graph: Mapping[str, frozenset[str]] | None = None,
) -> dict[str, Any]:
    """The document of one group-version; resources of other group-versions are ignored.

    ``converted`` (v3 form of ``definitions``) and ``graph`` (``reference_graph(definitions)``)
    may be passed to share the work between group-versions.
    """
    mine = [r for r in resources if r.group == group and r.version == version]
    effective, schemas = resolve_schemas(mine, definitions)
    specs: list[PathSpec] = [api_resources_path(group, version)]
    for resource in mine:
        specs.extend(resource_paths(resource, schemas[resource]))
    paths = {spec.path: render_path_v3(spec) for spec in specs}

    extra = {name: d for name, d in effective.items() if name not in definitions}
    if graph is None:
        graph = reference_graph(definitions)
    if extra:
        graph = {**graph, **reference_graph(extra)}
    reachable = closure(collect_refs(paths, set()), graph)
    if converted is None:
        converted = convert_definitions({n: effective[n] for n in reachable if n in effective}, v3=True)
    extra_converted = convert_definitions(extra, v3=True) if extra else {}
    schemas_out: dict[str, Any] = {}
    for name in sorted(reachable):
        if name in extra_converted:
            schemas_out[name] = extra_converted[name]
        elif name in converted:
            schemas_out[name] = converted[name]
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "components": {"schemas": schemas_out},
    }


def openapi_v3_path_key(group_version: str) -> str:
    """Index key of a group-version: ``v1`` -> ``api/v1``, ``apps/v1`` -> ``apis/apps/v1``."""
    if group_version.startswith(("api/", "apis/")):
        return group_version
    return f"apis/{group_version}" if "/" in group_version else f"api/{group_version}"


def serialize_openapi(document: Mapping[str, Any]) -> bytes:
    """The JSON bytes to serve (sorted keys, as Go's encoder writes maps)."""
    return orjson.dumps(document, option=orjson.OPT_SORT_KEYS)


def openapi_etag(data: bytes) -> str:
    """kube-openapi's content hash: uppercase hex SHA-512 of the served bytes."""
    return hashlib.sha512(data).hexdigest().upper()


def build_openapi_v3_index(group_versions: Iterable[str], hashes: Mapping[str, str]) -> dict[str, Any]:
    """The ``/openapi/v3`` discovery document.

    ``group_versions`` are ``v1``/``apps/v1`` strings (``api/v1``/``apis/apps/v1`` also accepted);
    ``hashes`` maps each (in either spelling) to its document's ``openapi_etag``.
    """
    paths: dict[str, Any] = {}
    for group_version in group_versions:
        key = openapi_v3_path_key(group_version)
        digest = hashes.get(group_version, hashes.get(key))
        if digest is None:
            raise KeyError(f"no hash given for OpenAPI v3 document {group_version!r}")
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}
