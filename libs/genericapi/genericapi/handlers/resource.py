"""The REST verbs of one resource (``registerResourceHandlers``), on the generic store.

Each function takes the parsed request target and the Starlette request and returns a
response; errors are raised as ``APIError`` and encoded by the router in one place.
"""

from __future__ import annotations

from contextvars import Token
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from genericapi.apimachinery import deepjson, k8sproto
from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.decoding import decode_body
from genericapi.registry.admissionchain import RequestAdmission, options_object, request_admission
from genericapi.registry.fieldvalidation import check_fields_clean
from genericapi.registry.options import DeleteOptions, ListResult
from genericapi.registry.store import Store

from . import params as qp
from .apply import APPLY_PATCH, apply, force_option
from .body import PROTOBUF, check_type, header, media_type, read_bytes, read_object
from .negotiation import Output, output_for
from .ownership import writer_for
from .patch import apply_patch
from .render import render_list, render_object
from .responses import format_warning, object_response
from .scale import to_scale, update_scale
from .watch import watch_response


@dataclass(frozen=True, slots=True)
class Target:
    """What the URL names: the store, namespace, object name and subresource."""

    store: Store
    namespace: str
    name: str
    subresource: str
    watch: bool = False


def _output(request: Request) -> Output:
    return output_for(header(request, b"accept") or "", qp.lookup(request.query_params).get("includeObject", ""))


def _pretty(request: Request) -> bool:
    return qp.flag(qp.lookup(request.query_params), "pretty")


async def get(t: Target, request: Request) -> Response:
    out = _output(request)
    obj = await t.store.get(t.namespace, t.name, qp.lookup(request.query_params).get("resourceVersion", ""))
    if t.subresource == "scale":
        return object_response(to_scale(t.store, obj), pretty=_pretty(request))
    return render_object(t.store, obj, out, _pretty(request))


async def list_or_watch(t: Target, request: Request) -> Response:
    params = request.query_params
    out = _output(request)
    opts = qp.list_options(t.store.info, params, t.name if t.watch else "")
    if t.watch or qp.flag(params, "watch"):
        return await watch_response(t.store, t.namespace, opts, out, request)
    result = await t.store.list(t.namespace, opts)
    return render_list(t.store, result, out, _pretty(request))


async def create(t: Target, request: Request) -> Response:
    params = request.query_params
    kind = qp.OPTIONS_KIND[request.method]
    validation = qp.field_validation(qp.lookup(params), kind)
    dry = qp.dry_run(params, kind)
    out = _output(request)
    writer = writer_for(request, kind)
    obj, duplicates = await read_object(request, t.store.info, validation != "Ignore")
    warnings, clean = check_fields_clean(t.store.strategy, obj, validation, duplicates)
    with admission_scope(request, kind, dry) as scope:
        if clean:
            scope.schema_clean = obj
        created = await t.store.create(t.namespace, obj, dry_run=dry, writer=writer)
    resp = render_object(t.store, created, out, _pretty(request), status=201)
    _add_warnings(resp, warnings + scope.warnings)
    return resp


async def create_subresource(t: Target, request: Request) -> Response:
    """POST on a create-only subresource (``pods/binding``, ``pods/eviction``): the body is the
    subresource's kind; what is answered is the store's creator's (often a Status)."""
    creator = t.store.subresource_creators.get(t.subresource)
    spec = t.store.info.subresource_spec(t.subresource)
    if creator is None or spec is None:
        raise apierrors.APIError(405, "MethodNotAllowed",
                                 "the server does not allow this method on the requested resource", {})
    dry = qp.dry_run(request.query_params, "CreateOptions")
    kind = spec.kind or t.store.info.kind
    api_version = (spec.api_version if spec.kind else "") or t.store.info.api_version  # "": the resource's
    obj, _ = await read_object(request, None, False, kind=kind, api_version=api_version,
                               also_accepts=spec.also_accepts)
    code, body = await creator(t.namespace, t.name, obj, dry)
    return object_response(body, code, pretty=_pretty(request))


async def update(t: Target, request: Request) -> Response:
    params = request.query_params
    kind = qp.OPTIONS_KIND[request.method]
    validation = qp.field_validation(qp.lookup(params), kind)
    dry = qp.dry_run(params, kind)
    out = _output(request)
    writer = writer_for(request, kind, t.subresource)
    if t.subresource == "scale":
        obj, duplicates = await read_object(request, None, validation != "Ignore",
                                            kind="Scale", api_version="autoscaling/v1")
        with admission_scope(request, kind, dry) as scope:
            scale = await update_scale(t.store, t.namespace, t.name, lambda _old: obj, dry, writer)
        resp = object_response(scale, pretty=_pretty(request))
        _add_warnings(resp, scope.warnings)
        return resp
    obj, duplicates = await read_object(request, t.store.info, validation != "Ignore")
    warnings, clean = check_fields_clean(t.store.strategy, obj, validation, duplicates)
    with admission_scope(request, kind, dry) as scope:
        if clean:
            scope.schema_clean_raw = deepjson.dumps(obj)
        updated = await t.store.update(t.namespace, t.name, obj, dry_run=dry, subresource=t.subresource,
                                       writer=writer)
    resp = render_object(t.store, updated, out, _pretty(request))
    _add_warnings(resp, warnings + scope.warnings)
    return resp


async def patch(t: Target, request: Request) -> Response:
    params = request.query_params
    kind = qp.OPTIONS_KIND[request.method]
    validation = qp.field_validation(qp.lookup(params), kind)
    dry = qp.dry_run(params, kind)
    out = _output(request)
    ctype = media_type(request)
    raw = await read_bytes(request)
    if ctype == APPLY_PATCH:
        with admission_scope(request, "UpdateOptions", dry) as scope:
            resp = await apply(t.store, t.namespace, t.name, t.subresource, request, raw, validation, dry, out,
                               _pretty(request))
        _add_warnings(resp, scope.warnings)
        return resp
    force_option(request, False)
    writer = writer_for(request, kind, t.subresource)
    warnings: list[str] = []

    if t.subresource == "scale":

        def scale_patch(old_scale: dict[str, Any]) -> dict[str, Any]:
            return apply_patch(ctype, raw, old_scale, None)

        with admission_scope(request, "UpdateOptions", dry) as scope:  # kube's patchToUpdateOptions
            scale = await update_scale(t.store, t.namespace, t.name, scale_patch, dry, writer)
        resp = object_response(scale, pretty=_pretty(request))
        _add_warnings(resp, scope.warnings)
        return resp

    def produce(old: dict[str, Any]) -> dict[str, Any]:
        warnings.clear()
        new = apply_patch(ctype, raw, old, t.store.strategy)
        if not isinstance(new, dict):
            raise apierrors.bad_request("the patch must produce an object")
        raw_meta = new.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        # kube's checkName on the patched object: a patch may not rename, move or unname it.
        if meta.get("name") != t.name:
            raise apierrors.bad_request(
                f"the name of the object ({meta.get('name') or ''}) does not match the name on the URL ({t.name})")
        if t.namespace and meta.get("namespace") and meta.get("namespace") != t.namespace:
            raise apierrors.bad_request(f"the namespace of the object ({meta.get('namespace')}) does not match "
                                        f"the namespace on the URL ({t.namespace})")
        check_type(new, t.store.info.kind, t.store.info.api_version)
        found, clean = check_fields_clean(t.store.strategy, new, validation, [])
        warnings.extend(found)
        scope = request_admission.get()
        if scope is not None:
            scope.schema_clean_raw = deepjson.dumps(new) if clean else None
        return new

    with admission_scope(request, "UpdateOptions", dry) as scope:  # kube's patchToUpdateOptions
        updated = await t.store.guaranteed_update(t.namespace, t.name, produce, dry_run=dry,
                                                  subresource=t.subresource, writer=writer)
    resp = render_object(t.store, updated, out, _pretty(request))
    _add_warnings(resp, warnings + scope.warnings)
    return resp


async def delete(t: Target, request: Request) -> Response:
    body = await _delete_body(request)
    opts = qp.delete_options(request.query_params, body)
    with admission_scope(request, "DeleteOptions", opts.dry_run, delete=opts) as scope:
        await t.store.admit_delete(t.namespace, t.name, opts)
        obj, gone = await t.store.delete(t.namespace, t.name, opts)
    # 202 only when the object stays and the client asked orphanDependents=false (as kube: other
    # pending deletions, a terminating namespace or a graceful pod, answer 200).
    status = 202 if not gone and opts.orphan_dependents is False else 200
    info = t.store.info
    if gone and not t.store.strategy.returns_deleted_object:
        details: dict[str, Any] = {"name": t.name}
        if info.group:
            details["group"] = info.group
        details["kind"] = info.plural
        details["uid"] = (obj.get("metadata") or {}).get("uid", "")
        body_out = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": details}
        resp = object_response(body_out, status, pretty=_pretty(request))
    else:
        resp = object_response(obj, status, pretty=_pretty(request))
    _add_policy_warning(resp, t.store, opts)
    _add_warnings(resp, scope.warnings)
    return resp


def _add_policy_warning(resp: Response, store: Store, opts: DeleteOptions) -> None:
    if store.default_policy_warning and opts.propagation_policy is None and opts.orphan_dependents is None:
        _add_warnings(resp, [store.default_policy_warning])


async def delete_collection(t: Target, request: Request) -> Response:
    body = await _delete_body(request)
    opts = qp.delete_options(request.query_params, body)
    list_opts = qp.list_options(t.store.info, request.query_params)
    with admission_scope(request, "DeleteOptions", opts.dry_run, delete=opts) as scope:
        await t.store.admit_delete(t.namespace, "", opts)
        result: ListResult = await t.store.delete_collection(t.namespace, list_opts, opts)
    resp = render_list(t.store, result, Output("object"), _pretty(request))
    _add_policy_warning(resp, t.store, opts)
    _add_warnings(resp, scope.warnings)
    return resp


async def _delete_body(request: Request) -> dict[str, Any] | None:
    raw = await read_bytes(request)
    if not raw.strip():
        return None
    if media_type(request) == PROTOBUF:
        return k8sproto.decode_protobuf_body(raw, default_gvk=("meta.k8s.io", "v1", "DeleteOptions"))
    try:
        body = deepjson.loads(raw, max_depth=deepjson.MAX_DEPTH)
    except orjson.JSONDecodeError:
        body, _ = decode_body(raw, "application/yaml", detect_duplicates=False)
    if not isinstance(body, dict):
        raise apierrors.bad_request("DeleteOptions must be an object")
    return body


class admission_scope:  # lower case: it replaced a @contextmanager function of this name
    """What admission learns of this request (its options as a ``meta.k8s.io/v1`` object) and
    gives back (warnings), for the length of the write: ``with admission_scope(...) as scope``.

    A class rather than a ``@contextmanager`` generator: it is entered on every write, and the
    generator machinery cost more than the rest of it."""

    __slots__ = ("_scope", "_token")

    def __init__(self, request: Request, kind: str, dry_run: bool, delete: DeleteOptions | None = None) -> None:
        if delete is not None:
            preconditions = {k: v for k, v in (("uid", delete.precondition_uid),
                                               ("resourceVersion", delete.precondition_rv)) if v is not None}
            options = options_object(kind, dry_run, gracePeriodSeconds=delete.grace_period_seconds,
                                     preconditions=preconditions, orphanDependents=delete.orphan_dependents,
                                     propagationPolicy=delete.propagation_policy)
        else:
            params = qp.lookup(request.query_params)
            options = options_object(kind, dry_run, fieldManager=params.get("fieldManager"),
                                     fieldValidation=params.get("fieldValidation"))
        self._scope = RequestAdmission(options)
        self._token: Token[RequestAdmission | None] | None = None

    def __enter__(self) -> RequestAdmission:
        self._token = request_admission.set(self._scope)
        return self._scope

    def __exit__(self, *_exc: object) -> None:
        if self._token is not None:
            request_admission.reset(self._token)
            self._token = None


def _add_warnings(resp: Response, warnings: list[str]) -> None:
    for w in warnings:
        resp.headers.append("Warning", format_warning(w))

