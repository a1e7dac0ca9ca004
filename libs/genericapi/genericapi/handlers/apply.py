"""Server-side apply: ``PATCH`` with ``application/apply-patch+yaml``.

As kube-apiserver's apply patcher: the options are checked (``fieldManager`` required,
``force`` a boolean), the body is a YAML or JSON object of the endpoint's kind, the field
manager merges it into the live object (or an empty one: apply creates), prunes what the
manager stopped applying, reports conflicts as 409, and records an ``Apply`` entry. The store
then validates and writes as for any update (dry-run included).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from genericapi.apimachinery import decoding
from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.fieldmanager.managers import FieldManager
from genericapi.apimachinery.fieldmanager.typed import TypedError, validate_applied
from genericapi.apimachinery.nested import set_path
from genericapi.registry.admissionchain import request_admission
from genericapi.registry.fieldtracking import Writer
from genericapi.registry.fieldvalidation import check_fields
from genericapi.registry.store import Store

from .body import decode_request_body
from .negotiation import Output
from .ownership import field_manager
from .render import render_object
from .responses import format_warning, object_response
from .scale import scale_view, to_scale

APPLY_PATCH = "application/apply-patch+yaml"


def force_option(request: Request, apply: bool) -> bool:
    """``force``: a boolean, and only on apply patches (``ValidatePatchOptions``)."""
    raw = request.query_params.get("force")
    if raw is None:
        return False
    if not apply:
        raise apierrors.invalid_object("meta.k8s.io", "PatchOptions", "", [
            apierrors.forbidden("force", "may not be specified for non-apply patch")])
    value = raw.lower()
    if value in ("", "1", "t", "true"):
        return True
    if value in ("0", "f", "false"):
        return False
    raise apierrors.bad_request(f'strconv.ParseBool: parsing "{raw}": invalid syntax')


def _gvk(obj: dict[str, Any]) -> str:
    api_version = obj.get("apiVersion") if isinstance(obj.get("apiVersion"), str) else ""
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else ""
    group, _, version = str(api_version).rpartition("/")
    return f"{group}/{version}, Kind={kind}"


def decode_config(raw: bytes, store: Store, validation: str, *, api_version: str = "",
                  kind: str = "") -> tuple[dict[str, Any], list[str]]:
    """The applied configuration, with kube's 400s for bodies that are not one."""
    if not raw.strip():
        config: Any = {}
        duplicates: list[str] = []
    else:
        config = None
        if raw.lstrip()[:1] == b"{":
            # JSON is YAML; its own decoder is much faster (kubectl and most clients send JSON).
            try:
                config, duplicates = decode_request_body(raw, "application/json", validation != "Ignore",
                                                         store.info.kind)
            except apierrors.APIError:
                config = None
        if config is None:
            try:
                config, duplicates = decoding.decode_body(raw, "application/yaml",
                                                          detect_duplicates=validation != "Ignore",
                                                          kind=store.info.kind)
            except apierrors.APIError as err:
                raise apierrors.bad_request(f"error decoding YAML: {err.message}") from None
    info = store.info
    if config.get("apiVersion") != (api_version or info.api_version) or config.get("kind") != (kind or info.kind):
        raise apierrors.bad_request(f"invalid object type: {_gvk(config)}")
    return config, duplicates


def _check_identity(obj: dict[str, Any], name: str, namespace: str, *, partial: bool = False) -> None:
    """kube's checkName: the (merged) object names the URL's object. ``partial``: a
    configuration may leave its name out (the live object's stays)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    if partial and meta.get("name") is None:
        pass
    elif meta.get("name") != name:
        raise apierrors.bad_request(
            f"the name of the object ({meta.get('name') or ''}) does not match the name on the URL ({name})")
    if namespace and meta.get("namespace") and meta.get("namespace") != namespace:
        raise apierrors.bad_request(f"the namespace of the object ({meta.get('namespace')}) does not match "
                                    f"the namespace on the URL ({namespace})")


def _typed_failure(err: TypedError, store: Store, config: dict[str, Any]) -> apierrors.APIError:
    """kube answers a configuration SMD cannot type (a field the schema does not declare, an
    associative list item without its keys or repeated) with a plain error: 500, no reason,
    whatever ``fieldValidation`` says (kubernetes/kubernetes#122480, #139253). The namespace and
    name are the configuration's own (kube's objectGVKNN of the patch object)."""
    info = store.info
    group_version = info.api_version if "/" in info.api_version else "/" + info.api_version
    meta = config.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    namespace, name = (value if isinstance(value := meta.get(k), str) else "" for k in ("namespace", "name"))
    return apierrors.unknown_error(f"failed to create typed patch object ({namespace}/{name}; "
                                   f"{group_version}, Kind={info.kind}): {err.message()}")


def _type_config(config: dict[str, Any], fm: FieldManager, store: Store) -> None:
    """kube's field manager refuses a configuration that carries managedFields (400), then types
    it against the schema before anything else looks at it: unknown fields are not pruned or
    reported per ``fieldValidation`` as on create, they fail the apply (see _typed_failure)."""
    meta = config.get("metadata")
    if isinstance(meta, dict) and meta.get("managedFields") is not None:
        raise apierrors.bad_request("metadata.managedFields must be nil")
    try:
        validate_applied(config, fm.root)
    except TypedError as err:
        raise _typed_failure(err, store, config) from None


async def apply(store: Store, namespace: str, name: str, subresource: str, request: Request, raw: bytes,
                validation: str, dry_run: bool, out: Output, pretty: bool) -> Response:
    manager = field_manager(request.query_params, "PatchOptions")
    force = force_option(request, True)
    if not manager:
        raise apierrors.invalid_object("meta.k8s.io", "PatchOptions", "", [
            apierrors.required("fieldManager", "is required for apply patch")])
    if subresource == "scale":
        return await _apply_scale(store, namespace, name, raw, validation, dry_run, manager, force, pretty)
    if subresource not in ("", "status"):
        raise apierrors.APIError(415, "UnsupportedMediaType",
                                 f"apply patches are not supported on the {subresource} subresource")
    config, duplicates = decode_config(raw, store, validation)
    fm = store.fields.manager()
    _type_config(config, fm, store)
    _check_identity(config, name, namespace, partial=True)
    warnings = check_fields(store.strategy, config, validation, duplicates)
    writer = Writer(manager, subresource, recorded=True)

    def produce(old: dict[str, Any]) -> dict[str, Any]:
        try:
            new = fm.apply(old, config, manager, force=force, subresource=subresource)
        except TypedError as err:
            raise _typed_failure(err, store, config) from None
        _check_identity(new, name, namespace)
        new["metadata"]["resourceVersion"] = pinned_rv or old["metadata"]["resourceVersion"]
        return new

    pinned_rv = (config.get("metadata") or {}).get("resourceVersion") or ""

    status = 200
    try:
        result = await store.guaranteed_update(namespace, name, produce, dry_run=dry_run, subresource=subresource,
                                               precondition=True if pinned_rv else None, writer=writer)
    except apierrors.APIError as err:
        if err.code != 404 or subresource:
            raise
        try:
            created = fm.apply(None, config, manager, force=force)
        except TypedError as terr:
            raise _typed_failure(terr, store, config) from None
        created["metadata"].pop("resourceVersion", None)
        _check_identity(created, name, namespace)
        scope = request_admission.get()
        if scope is not None and scope.options is not None:  # a patch that creates admits as a create
            scope.options = {**scope.options, "kind": "CreateOptions"}
        result = await store.create(namespace, created, dry_run=dry_run, writer=writer)
        status = 201
    resp = render_object(store, result, out, pretty, status=status)
    for w in warnings:
        resp.headers.append("Warning", format_warning(w))
    return resp



async def _apply_scale(store: Store, namespace: str, name: str, raw: bytes, validation: str, dry_run: bool,
                       manager: str, force: bool, pretty: bool) -> Response:
    """Apply an ``autoscaling/v1`` Scale: ownership of the replicas is recorded on the parent
    (its replicas path, ``subresource: scale``), where conflicts with the parent's appliers show."""
    config, _ = decode_config(raw, store, validation, api_version="autoscaling/v1", kind="Scale")
    _check_identity(config, name, namespace, partial=True)
    spec_path = (store.info.scale_paths or (".spec.replicas",))[0]
    parent: dict[str, Any] = {"apiVersion": store.info.api_version, "kind": store.info.kind,
                              "metadata": {"name": name}}
    spec = config.get("spec")
    if isinstance(spec, dict) and "replicas" in spec:
        replicas = spec["replicas"]
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            detail = "must be greater than or equal to 0" if isinstance(replicas, int) else "must be an integer"
            raise apierrors.invalid_object("autoscaling", "Scale", name, [
                apierrors.invalid("spec.replicas", replicas, detail)])
        set_path(parent, spec_path, replicas)
    fm = store.fields.manager()
    pinned_rv = (config.get("metadata") or {}).get("resourceVersion") or ""

    def produce(old: dict[str, Any]) -> dict[str, Any]:
        new = fm.apply(old, parent, manager, force=force, subresource="scale")
        new["metadata"]["resourceVersion"] = pinned_rv or old["metadata"]["resourceVersion"]
        return new

    updated = await store.guaranteed_update(namespace, name, produce, dry_run=dry_run,
                                            precondition=True if pinned_rv else None,
                                            writer=Writer(manager, "scale", recorded=True),
                                            view=scale_view(store, name), view_from_parent=True)
    return object_response(to_scale(store, updated), pretty=pretty)
