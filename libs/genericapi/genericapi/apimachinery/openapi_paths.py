"""The REST operations of a resource, as kube-apiserver's OpenAPI documents list them.

kube-apiserver's installer registers, for each resource and verb, a route with a fixed
operationId (``listAppsV1NamespacedDeployment``, ``patchAppsV1NamespacedDeploymentScale``, ...),
query parameters, request body and responses. Clients depend on these: kubectl finds the PATCH
operation of a group-version-kind and checks it lists the ``fieldValidation`` parameter before
using server-side validation. This module derives the operations once, in a form independent of
the OpenAPI dialect; ``openapi_v2`` and ``openapi_v3`` render them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from genericapi.apimachinery.openapi_schema import (
    API_RESOURCE_LIST,
    DELETE_OPTIONS,
    PATCH,
    SCALE,
    STATUS,
    WATCH_EVENT,
    Definitions,
    gvk_index,
    synthesize_kind_definition,
    synthesize_list_definition,
    synthetic_name,
)
from genericapi.apimachinery.resources import ResourceInfo

#: Media types every read/write operation responds with.
RESPONSE_MEDIA_TYPES: tuple[str, ...] = ("application/json", "application/yaml")
#: Extra media types of list/watch operations (watch streams).
WATCH_MEDIA_TYPES: tuple[str, ...] = ("application/json;stream=watch",)
APPLY_PATCH_MEDIA_TYPE = "application/apply-patch+yaml"
STRATEGIC_MERGE_PATCH_MEDIA_TYPE = "application/strategic-merge-patch+json"


@dataclass(frozen=True)
class Param:
    """A path or query parameter."""

    name: str
    location: str  # "path" | "query"
    type: str  # "string" | "integer" | "boolean"
    description: str
    required: bool = False


@dataclass(frozen=True)
class Body:
    """The request body of an operation."""

    definition: str
    kind: str  # "object" (any content type), "patch" (patch media types), "options" (DeleteOptions)
    required: bool = True
    patch_media_types: tuple[str, ...] = ()


@dataclass(frozen=True)
class Response:
    code: str
    description: str
    definition: str | None
    #: The body is a plain string (connect subresources, pod logs), not a definition.
    string: bool = False


@dataclass(frozen=True)
class GVK:
    group: str
    version: str
    kind: str

    def as_dict(self) -> dict[str, str]:
        return {"group": self.group, "kind": self.kind, "version": self.version}


@dataclass(frozen=True)
class Operation:
    method: str  # get, put, post, patch, delete
    operation_id: str
    description: str
    tag: str
    params: tuple[Param, ...] = ()
    body: Body | None = None
    responses: tuple[Response, ...] = ()
    action: str | None = None
    gvk: GVK | None = None
    streams: bool = False  # list/watch: also produces watch streams
    #: Media types produced instead of the defaults (connect subresources: ``*/*``).
    produces: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PathSpec:
    path: str
    params: tuple[Param, ...]
    operations: tuple[Operation, ...]


def _q(name: str, type_: str, description: str) -> Param:
    return Param(name, "query", type_, description)


# Query parameters. Descriptions are ours, kept short; names and types match kube-apiserver's.
PRETTY = _q("pretty", "string", "If 'true', the response is pretty-printed.")
DRY_RUN = _q("dryRun", "string", "When set to 'All', the request is processed but nothing is persisted.")
FIELD_MANAGER = _q(
    "fieldManager", "string", "Name of the actor making the change, recorded in managedFields."
)
FIELD_MANAGER_PATCH = _q(
    "fieldManager",
    "string",
    "Name of the actor making the change, recorded in managedFields. Required for apply patches.",
)
FIELD_VALIDATION = _q(
    "fieldValidation",
    "string",
    "How to treat unknown or duplicate fields in the request body: Ignore, Warn (default) or Strict.",
)
FORCE = _q("force", "boolean", "Take over fields owned by other managers in an apply patch.")
GRACE_PERIOD = _q("gracePeriodSeconds", "integer", "Seconds to wait before the object is deleted.")
IGNORE_STORE_READ_ERROR = _q(
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "boolean",
    "Delete an object that cannot be read from storage. Unsafe: skips finalizers and preconditions.",
)
ORPHAN_DEPENDENTS = _q(
    "orphanDependents", "boolean", "Deprecated: use propagationPolicy. Orphan the dependents when true."
)
PROPAGATION_POLICY = _q(
    "propagationPolicy",
    "string",
    "Garbage collection policy for dependents: Orphan, Background or Foreground.",
)
ALLOW_WATCH_BOOKMARKS = _q("allowWatchBookmarks", "boolean", "Ask for BOOKMARK events on a watch.")
CONTINUE = _q("continue", "string", "Token from a previous paged list response to fetch the next page.")
FIELD_SELECTOR = _q("fieldSelector", "string", "Only return objects whose fields match this selector.")
LABEL_SELECTOR = _q("labelSelector", "string", "Only return objects whose labels match this selector.")
LIMIT = _q("limit", "integer", "Maximum number of items to return in one page of a list.")
RESOURCE_VERSION = _q(
    "resourceVersion", "string", "Resource version the response must be at least as new as."
)
RESOURCE_VERSION_MATCH = _q(
    "resourceVersionMatch", "string", "How resourceVersion applies to a list: Exact or NotOlderThan."
)
SEND_INITIAL_EVENTS = _q(
    "sendInitialEvents", "boolean", "Start a watch with synthetic ADDED events for the current objects."
)
TIMEOUT_SECONDS = _q("timeoutSeconds", "integer", "Time limit of the list or watch call.")
WATCH = _q("watch", "boolean", "Stream add, update and delete notifications instead of a list.")

LIST_PARAMS = (
    ALLOW_WATCH_BOOKMARKS,
    CONTINUE,
    FIELD_SELECTOR,
    LABEL_SELECTOR,
    LIMIT,
    RESOURCE_VERSION,
    RESOURCE_VERSION_MATCH,
    SEND_INITIAL_EVENTS,
    TIMEOUT_SECONDS,
    WATCH,
)
WRITE_PARAMS = (DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION)
PATCH_PARAMS = (DRY_RUN, FIELD_MANAGER_PATCH, FIELD_VALIDATION, FORCE)
DELETE_PARAMS = (DRY_RUN, GRACE_PERIOD, IGNORE_STORE_READ_ERROR, ORPHAN_DEPENDENTS, PROPAGATION_POLICY)
DELETE_COLLECTION_PARAMS = tuple(
    sorted(
        (*DELETE_PARAMS, *(p for p in LIST_PARAMS if p.name not in ("watch", "allowWatchBookmarks"))),
        key=lambda p: p.name,
    )
)

NAMESPACE_PARAM = Param(
    "namespace", "path", "string", "Namespace of the object: the scope of its name.", required=True
)

UNAUTHORIZED = Response("401", "Unauthorized", None)


def _name_param(kind: str) -> Param:
    return Param("name", "path", "string", f"name of the {kind}", required=True)


def _camel_segment(text: str, capitalize_first: bool) -> str:
    """kube's operationId word rule: keep letters, '_' and inner digits; capitalize after others."""
    chars: list[str] = []
    capitalize = capitalize_first
    for index, char in enumerate(text):
        if char.isalpha() or char == "_" or (index != 0 and char.isdigit()):
            chars.append(char.upper() if capitalize else char)
            capitalize = False
        else:
            capitalize = True
    return "".join(chars)


def group_version_prefix(group: str, version: str) -> tuple[str, str]:
    """(``AppsV1``, ``apps_v1``): the operationId infix and the tag of a group-version."""
    trimmed = group.removesuffix(".k8s.io") if group else "core"
    infix = _camel_segment(trimmed, True) + _camel_segment(version, True)
    tag = _camel_segment(trimmed, False) + "_" + _camel_segment(version, False)
    return infix, tag


def group_version_root(group: str, version: str) -> str:
    """URL prefix of a group-version: ``/api/v1`` or ``/apis/<group>/<version>``."""
    return f"/apis/{group}/{version}" if group else f"/api/{version}"


def api_resources_path(group: str, version: str) -> PathSpec:
    """``GET /apis/<group>/<version>/``: the group-version's APIResourceList."""
    infix, tag = group_version_prefix(group, version)
    operation = Operation(
        method="get",
        operation_id=f"get{infix}APIResources",
        description="get available resources",
        tag=tag,
        responses=(Response("200", "OK", API_RESOURCE_LIST), UNAUTHORIZED),
    )
    return PathSpec(group_version_root(group, version) + "/", (), (operation,))


@dataclass(frozen=True)
class ResourceSchemas:
    """Definition names one resource's operations reference."""

    kind: str
    list: str
    strategic_merge: bool  # whether strategic merge patch is offered (built-in types only)
    #: Definition of each create-only subresource's kind (``binding``: Binding, ``eviction``: Eviction).
    subresources: tuple[tuple[str, str], ...] = ()


def _patch_media_types(strategic_merge: bool) -> tuple[str, ...]:
    types = ["application/json-patch+json", "application/merge-patch+json"]
    if strategic_merge:
        types.append(STRATEGIC_MERGE_PATCH_MEDIA_TYPE)
    types.append(APPLY_PATCH_MEDIA_TYPE)
    return tuple(types)


def resource_paths(resource: ResourceInfo, schemas: ResourceSchemas) -> list[PathSpec]:
    """Every path kube-apiserver serves for one resource, with its operations."""
    infix, tag = group_version_prefix(resource.group, resource.version)
    gvk = GVK(resource.group, resource.version, resource.kind)
    kind = resource.kind
    scope = "Namespaced" if resource.namespaced else ""
    root = group_version_root(resource.group, resource.version)
    ns_segment = "/namespaces/{namespace}" if resource.namespaced else ""
    ns_params: tuple[Param, ...] = (NAMESPACE_PARAM,) if resource.namespaced else ()
    collection = f"{root}{ns_segment}/{resource.plural}"
    item = collection + "/{name}"
    name_param = _name_param(kind)
    patch_types = _patch_media_types(schemas.strategic_merge)

    def op(
        method: str,
        verb: str,
        suffix: str,
        description: str,
        action: str,
        *,
        responses: tuple[Response, ...],
        gvk: GVK = gvk,
        params: tuple[Param, ...] = (),
        body: Body | None = None,
        streams: bool = False,
    ) -> Operation:
        return Operation(
            method=method,
            operation_id=f"{verb}{infix}{suffix}",
            description=description,
            tag=tag,
            params=params,
            body=body,
            responses=responses,
            action=action,
            gvk=gvk,
            streams=streams,
        )

    def ok(definition: str, *codes: tuple[str, str]) -> tuple[Response, ...]:
        return (*(Response(code, text, definition) for code, text in codes), UNAUTHORIZED)

    paths: list[PathSpec] = []
    supports = resource.supports

    collection_ops: list[Operation] = []
    if supports("deletecollection"):
        collection_ops.append(
            op(
                "delete", "delete", f"Collection{scope}{kind}", f"delete collection of {kind}",
                "deletecollection", params=DELETE_COLLECTION_PARAMS,
                body=Body(DELETE_OPTIONS, "options", required=False),
                responses=ok(STATUS, ("200", "OK")),
            )
        )  # fmt: skip
    if supports("list"):
        collection_ops.append(
            op(
                "get", "list", f"{scope}{kind}", f"list or watch objects of kind {kind}", "list",
                params=LIST_PARAMS, responses=ok(schemas.list, ("200", "OK")), streams=True,
            )
        )  # fmt: skip
    if supports("create"):
        collection_ops.append(
            op(
                "post", "create", f"{scope}{kind}", f"create a {kind}", "post", params=WRITE_PARAMS,
                body=Body(schemas.kind, "object"),
                responses=ok(schemas.kind, ("200", "OK"), ("201", "Created"), ("202", "Accepted")),
            )
        )  # fmt: skip
    if collection_ops:
        paths.append(PathSpec(collection, (*ns_params, PRETTY), tuple(collection_ops)))

    item_ops: list[Operation] = []
    if supports("delete"):
        item_ops.append(
            op(
                "delete", "delete", f"{scope}{kind}", f"delete a {kind}", "delete", params=DELETE_PARAMS,
                body=Body(DELETE_OPTIONS, "options", required=False),
                responses=ok(STATUS, ("200", "OK"), ("202", "Accepted")),
            )
        )  # fmt: skip
    if supports("get"):
        item_ops.append(
            op("get", "read", f"{scope}{kind}", f"read the specified {kind}", "get",
               responses=ok(schemas.kind, ("200", "OK")))
        )  # fmt: skip
    if supports("patch"):
        item_ops.append(
            op(
                "patch", "patch", f"{scope}{kind}", f"partially update the specified {kind}", "patch",
                params=PATCH_PARAMS, body=Body(PATCH, "patch", patch_media_types=patch_types),
                responses=ok(schemas.kind, ("200", "OK"), ("201", "Created")),
            )
        )  # fmt: skip
    if supports("update"):
        item_ops.append(
            op(
                "put", "replace", f"{scope}{kind}", f"replace the specified {kind}", "put",
                params=WRITE_PARAMS, body=Body(schemas.kind, "object"),
                responses=ok(schemas.kind, ("200", "OK"), ("201", "Created")),
            )
        )  # fmt: skip
    if item_ops:
        paths.append(PathSpec(item, (name_param, *ns_params, PRETTY), tuple(item_ops)))

    for subresource in resource.subresources:
        if subresource == "status":
            sub_schema, sub_gvk, label = schemas.kind, gvk, "status"
        elif subresource == "scale":
            sub_schema, sub_gvk, label = SCALE, GVK("autoscaling", "v1", "Scale"), "scale"
        else:
            spec = resource.subresource_spec(subresource)
            connect = _connect_paths(resource, subresource, item, scope, infix, tag, ns_params)
            if connect:
                paths.extend(connect)
                continue
            sub_definition = dict(schemas.subresources).get(subresource)
            if sub_definition is None or spec is None or spec.verbs != ("create",):
                continue
            # kube's NamedCreater subresources (pods/binding, pods/eviction): POST only.
            sub_gvk = GVK(spec.group or resource.group, spec.version or resource.version, spec.kind)
            create_op = op(
                "post", "create", f"{scope}{kind}{subresource.capitalize()}", f"create {subresource} of a {kind}",
                "post", gvk=sub_gvk, params=WRITE_PARAMS, body=Body(sub_definition, "object"),
                responses=ok(sub_definition, ("200", "OK"), ("201", "Created"), ("202", "Accepted")),
            )  # fmt: skip
            paths.append(PathSpec(f"{item}/{subresource}", (_name_param(spec.kind), *ns_params, PRETTY),
                                  (create_op,)))
            continue
        suffix = f"{scope}{kind}{label.capitalize()}"
        sub_name = name_param if subresource == "status" else _name_param("Scale")
        sub_ops = (
            op("get", "read", suffix, f"read {label} of the specified {kind}", "get", gvk=sub_gvk,
               responses=ok(sub_schema, ("200", "OK"))),
            op(
                "patch", "patch", suffix, f"partially update {label} of the specified {kind}", "patch",
                gvk=sub_gvk, params=PATCH_PARAMS, body=Body(PATCH, "patch", patch_media_types=patch_types),
                responses=ok(sub_schema, ("200", "OK"), ("201", "Created")),
            ),
            op(
                "put", "replace", suffix, f"replace {label} of the specified {kind}", "put", gvk=sub_gvk,
                params=WRITE_PARAMS, body=Body(sub_schema, "object"),
                responses=ok(sub_schema, ("200", "OK"), ("201", "Created")),
            ),
        )  # fmt: skip
        paths.append(PathSpec(f"{item}/{subresource}", (sub_name, *ns_params, PRETTY), sub_ops))

    if resource.namespaced and supports("list"):
        paths.append(
            PathSpec(
                f"{root}/{resource.plural}",
                (*LIST_PARAMS, PRETTY),
                (
                    op("get", "list", f"{kind}ForAllNamespaces", f"list or watch objects of kind {kind}",
                       "list", responses=ok(schemas.list, ("200", "OK")), streams=True),
                ),
            )
        )  # fmt: skip

    if supports("watch"):
        watch_root = f"{root}/watch{ns_segment}/{resource.plural}"
        watch_ok = ok(WATCH_EVENT, ("200", "OK"))
        paths.append(
            PathSpec(
                watch_root,
                (*LIST_PARAMS, *ns_params, PRETTY),
                (
                    op("get", "watch", f"{scope}{kind}List",
                       f"watch individual changes to a list of {kind}. deprecated: use the 'watch' "
                       "parameter with a list operation instead.",
                       "watchlist", responses=watch_ok, streams=True),
                ),
            )
        )  # fmt: skip
        paths.append(
            PathSpec(
                watch_root + "/{name}",
                (*LIST_PARAMS, name_param, *ns_params, PRETTY),
                (
                    op("get", "watch", f"{scope}{kind}",
                       f"watch changes to an object of kind {kind}. deprecated: use the 'watch' "
                       "parameter with a list operation instead, filtered to a single item with the "
                       "'fieldSelector' parameter.",
                       "watch", responses=watch_ok, streams=True),
                ),
            )
        )  # fmt: skip
        if resource.namespaced:
            paths.append(
                PathSpec(
                    f"{root}/watch/{resource.plural}",
                    (*LIST_PARAMS, PRETTY),
                    (
                        op("get", "watch", f"{kind}ListForAllNamespaces",
                           f"watch individual changes to a list of {kind}. deprecated: use the 'watch' "
                           "parameter with a list operation instead.",
                           "watchlist", responses=watch_ok, streams=True),
                    ),
                )
            )  # fmt: skip
    return paths


def _connect_paths(resource: ResourceInfo, subresource: str, item: str, scope: str, infix: str, tag: str,
                   ns_params: tuple[Param, ...]) -> list[PathSpec]:
    """Paths of a connect subresource (``openapi_connect``), or none for any other subresource."""
    # imported here: openapi_connect builds on this module's types
    from genericapi.apimachinery.openapi_connect import OPTIONS_PARAMS, connect_paths, log_path

    spec = resource.subresource_spec(subresource)
    if spec is None:
        return []
    if subresource == "log" and spec.kind == resource.kind:
        return [log_path(item, resource.kind, scope, infix, tag, ns_params, PRETTY, resource.group,
                         resource.version)]
    if spec.kind not in OPTIONS_PARAMS:
        return []
    return connect_paths(item, subresource, spec.kind, resource.kind, scope, infix, tag, ns_params,
                         subresource == "proxy", resource.group, resource.version)


def sorted_params(params: Iterable[Param]) -> list[Param]:
    """Parameters in kube's order: by name."""
    return sorted(params, key=lambda p: p.name)


def resolve_schemas(
    resources: Iterable[ResourceInfo], definitions: Definitions
) -> tuple[dict[str, Mapping[str, Any]], dict[ResourceInfo, ResourceSchemas]]:
    """Find each resource's kind and list definitions by group-version-kind.

    Kinds or lists nobody supplied a schema for get a synthesized one (kube publishes a List type
    beside every kind), returned in the first element together with the given definitions.
    Strategic merge patch is offered only for built-in (``io.k8s.*``) types, as in kube, where
    custom resources accept JSON and merge patches only.
    """
    index = gvk_index(definitions)
    effective: dict[str, Mapping[str, Any]] = dict(definitions)
    found: dict[ResourceInfo, ResourceSchemas] = {}
    for resource in resources:
        group, version, kind = resource.group, resource.version, resource.kind
        kind_name = index.get((group, version, kind))
        if kind_name is None:
            kind_name = synthetic_name(group, version, kind)
            effective.setdefault(kind_name, synthesize_kind_definition(group, version, kind))
            index[(group, version, kind)] = kind_name
        list_name = index.get((group, version, resource.list_kind))
        if list_name is None and resource.supports("list"):  # nothing to list: no List type (reviews)
            list_name = synthetic_name(group, version, resource.list_kind)
            effective.setdefault(list_name, synthesize_list_definition(group, version, kind, kind_name))
            index[(group, version, resource.list_kind)] = list_name
        subresources = tuple(
            (spec.name, index[(spec.group or group, spec.version or version, spec.kind)])
            for spec in resource.subresource_specs
            if spec.kind and (spec.group or group, spec.version or version, spec.kind) in index)
        found[resource] = ResourceSchemas(kind_name, list_name or "", kind_name.startswith("io.k8s."), subresources)
    return effective, found
