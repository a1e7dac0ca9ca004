"""ConfigMaps, Secrets, PersistentVolumeClaims and Namespaces.

Keys of ConfigMap/Secret data are config keys; both are limited to 1 MiB; Secrets of the typed
kinds must carry their keys; ``immutable: true`` freezes data (and itself) on update, and a
Secret's type never changes. A claim's spec is fixed once created (kube only lets bound claims
grow their storage request).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import orjson
from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.go_json_errors import go_syntax_error
from genericapi.apimachinery.quantity import parse_quantity
from genericapi.apimachinery.validation_meta import validate_qualified_name

from . import names
from .workloads import IMMUTABLE

MAX_SECRET_SIZE = 1024 * 1024
_FROZEN = "field is immutable when `immutable` is set"
_REDACTED = "<secret contents redacted>"
_SA_NAME_KEY = "kubernetes.io/service-account.name"


def _dict(value: Any) -> Mapping[str, Any]:
    if type(value) is dict:  # what a decoded body holds: no ABC instance check
        return value
    return value if isinstance(value, Mapping) else {}


def _decoded(value: Any) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        return str(value).encode()


def _key_errors(keys: Any, path: str) -> list[FieldError]:
    return [errors.invalid(f"{path}[{key}]", key, m) for key in keys for m in names.config_key_errors(str(key))]


def _size(value: Any) -> int:
    """Bytes of a data value as Go counts them (UTF-8)."""
    text = value if type(value) is str else str(value)
    return len(text) if text.isascii() else len(text.encode())


# -- ConfigMap ----------------------------------------------------------------------------------

def validate_config_map(obj: Mapping[str, Any]) -> list[FieldError]:
    data, binary = _dict(obj.get("data")), _dict(obj.get("binaryData"))
    errs: list[FieldError] = []
    total = 0
    for key, value in data.items():
        if not names.is_config_key(key):
            errs.extend(_key_errors([key], "data"))
        if key in binary:
            errs.append(errors.invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        total += _size(value)
    for key, value in binary.items():
        if not names.is_config_key(key):
            errs.extend(_key_errors([key], "binaryData"))
        total += len(_decoded(value))
    if total > MAX_SECRET_SIZE:
        errs.append(errors.too_long("", MAX_SECRET_SIZE))
    return errs


def _same(new: Any, old: Any) -> bool:
    return (new or None) == (old or None)


def validate_config_map_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    if old.get("immutable") is True:
        if new.get("immutable") is not True:
            errs.append(errors.forbidden("immutable", _FROZEN))
        if not _same(new.get("data"), old.get("data")):
            errs.append(errors.forbidden("data", _FROZEN))
        if not _same(new.get("binaryData"), old.get("binaryData")):
            errs.append(errors.forbidden("binaryData", _FROZEN))
    return errs + validate_config_map(new)


# -- Secret -------------------------------------------------------------------------------------

def _secret_data(obj: Mapping[str, Any]) -> dict[str, bytes]:
    """``data`` with ``stringData`` merged over it, as the v1 conversion leaves a Secret."""
    data = {str(k): _decoded(v) for k, v in _dict(obj.get("data")).items()}
    data.update({str(k): str(v).encode() for k, v in _dict(obj.get("stringData")).items()})
    return data


def _json_object_error(raw: bytes) -> str | None:
    """What Go's ``json.Unmarshal`` into ``map[string]interface{}`` says, or None."""
    syntax = go_syntax_error(raw) if raw.strip() else "unexpected end of JSON input"
    if syntax:
        return syntax
    value = orjson.loads(raw)
    if isinstance(value, dict) or value is None:
        return None
    kind = {list: "array", str: "string", bool: "bool"}.get(type(value), "number")
    if kind == "number":
        kind = f"number {raw.decode().strip()}"
    return f"json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"


def validate_secret(obj: Mapping[str, Any]) -> list[FieldError]:
    data = _secret_data(obj)
    errs = _key_errors(data, "data")
    if sum(len(v) for v in data.values()) > MAX_SECRET_SIZE:
        errs.append(errors.too_long("data", MAX_SECRET_SIZE))
    kind = obj.get("type") or "Opaque"
    annotations = _dict(_dict(obj.get("metadata")).get("annotations"))
    if kind == "kubernetes.io/service-account-token":
        if not annotations.get(_SA_NAME_KEY):
            errs.append(errors.required(f"metadata.annotations[{_SA_NAME_KEY}]"))
    elif kind in ("kubernetes.io/dockercfg", "kubernetes.io/dockerconfigjson"):
        key = ".dockercfg" if kind == "kubernetes.io/dockercfg" else ".dockerconfigjson"
        if key not in data:
            errs.append(errors.required(f"data[{key}]"))
        else:
            problem = _json_object_error(data[key])
            if problem:
                errs.append(errors.invalid(f"data[{key}]", _REDACTED, problem))
    elif kind == "kubernetes.io/basic-auth":
        if "username" not in data and "password" not in data:
            errs.append(errors.required("data[username]"))
            errs.append(errors.required("data[password]"))
    elif kind == "kubernetes.io/ssh-auth":
        if not data.get("ssh-privatekey"):
            errs.append(errors.required("data[ssh-privatekey]"))
    elif kind == "kubernetes.io/tls":
        for key in ("tls.crt", "tls.key"):
            if key not in data:
                errs.append(errors.required(f"data[{key}]"))
    return errs


def validate_secret_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    new_type, old_type = new.get("type") or "Opaque", old.get("type") or "Opaque"
    if new_type != old_type:
        errs.append(errors.invalid("type", new_type, IMMUTABLE))
    if old.get("immutable") is True:
        if new.get("immutable") is not True:
            errs.append(errors.forbidden("immutable", _FROZEN))
        if _secret_data(new) != _secret_data(old):
            errs.append(errors.forbidden("data", _FROZEN))
    return errs + validate_secret(new)


# -- PersistentVolumeClaim ----------------------------------------------------------------------

_PVC_ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")


def validate_pvc(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    modes = spec.get("accessModes")
    if not modes:
        errs.append(errors.required("spec.accessModes", "at least 1 access mode is required"))
    for mode in modes or []:
        if mode not in _PVC_ACCESS_MODES:
            errs.append(errors.not_supported("spec.accessModes", mode, _PVC_ACCESS_MODES))
    requests = _dict(_dict(spec.get("resources")).get("requests"))
    storage = requests.get("storage")
    if storage is None:
        errs.append(errors.required("spec.resources[storage]"))
    else:
        try:
            q = parse_quantity(str(storage).strip())
        except ValueError:
            q = None
        if q is not None and q.sign() <= 0:
            errs.append(errors.invalid("spec.resources[storage]", q.canonical(), "must be greater than zero"))
    return errs


def _spec_without_mutable(obj: Mapping[str, Any], bound: bool, old_volume_name: str) -> dict[str, Any]:
    spec = dict(_dict(obj.get("spec")))
    spec.pop("volumeAttributesClassName", None)
    if not old_volume_name:
        spec.pop("volumeName", None)  # the binder sets it once
    if bound:
        resources = dict(_dict(spec.get("resources")))
        requests = dict(_dict(resources.get("requests")))
        requests.pop("storage", None)
        resources["requests"] = requests
        spec["resources"] = resources
    return {k: v for k, v in spec.items() if v not in (None, {}, [])}


def validate_pvc_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    errs = validate_pvc(new)
    bound = _dict(new.get("status")).get("phase") == "Bound"
    old_volume = str(_dict(old.get("spec")).get("volumeName") or "")
    new_spec = _spec_without_mutable(new, bound, old_volume)
    old_spec = _spec_without_mutable(old, bound, old_volume)
    if new_spec != old_spec:
        changed = sorted(k for k in set(new_spec) | set(old_spec) if new_spec.get(k) != old_spec.get(k))
        diff = "\n".join(f"  {k}: {orjson.dumps(old_spec.get(k)).decode()} -> {orjson.dumps(new_spec.get(k)).decode()}"
                         for k in changed)
        errs.append(errors.forbidden("spec", "spec is immutable after creation except resources.requests and "
                                             f"volumeAttributesClassName for bound claims\n{diff}"))
    old_size = _dict(_dict(_dict(old.get("spec")).get("resources")).get("requests")).get("storage")
    new_size = _dict(_dict(_dict(new.get("spec")).get("resources")).get("requests")).get("storage")
    try:
        shrunk = old_size is not None and new_size is not None and \
            parse_quantity(str(new_size)).cmp(parse_quantity(str(old_size))) < 0
    except ValueError:
        shrunk = False
    if shrunk:
        errs.append(errors.forbidden("spec.resources.requests.storage", "field can not be less than previous value"))
    new_mode, old_mode = _dict(new.get("spec")).get("volumeMode"), _dict(old.get("spec")).get("volumeMode")
    if new_mode != old_mode and old_mode is not None:
        errs.append(errors.invalid("volumeMode", new_mode, IMMUTABLE))
    return errs


# -- Namespace ----------------------------------------------------------------------------------

def validate_namespace(obj: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    for finalizer in _dict(obj.get("spec")).get("finalizers") or []:
        name = str(finalizer)
        msgs = validate_qualified_name(name)
        errs.extend(errors.invalid("spec.finalizers", name, m) for m in msgs)
        if not msgs and "/" not in name and name != "kubernetes":
            errs.append(errors.invalid("spec.finalizers", name,
                                       "name is neither a standard finalizer name nor is it fully qualified"))
    return errs
