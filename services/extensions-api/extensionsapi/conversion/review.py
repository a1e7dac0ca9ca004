"""ConversionReview documents and the checks on what a conversion returns (no I/O).

Mirrors apiextensions-apiserver's ``webhook_converter.go`` (request building, response
validation) and the checks its delegating converter applies to every converted object
(``converter.go``: groupVersion, kind, name/namespace/uid unchanged, metadata restored except
labels and annotations). Errors are ``ReviewError`` carrying Go's wording; the converter adds the
``conversion for <GVK> ...`` prefixes.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import orjson
from genericapi.apimachinery import deepjson
from genericapi.apimachinery.gofmt import go_type_name
from genericapi.apimachinery.validation_meta import validate_annotations, validate_labels

GROUP = "apiextensions.k8s.io"
#: ConversionReview versions this server speaks, in no particular order (the CRD's list decides).
SUPPORTED_REVIEW_VERSIONS = ("v1", "v1beta1")


class ReviewError(Exception):
    """One conversion problem, worded as kube-apiserver words it."""


def split_api_version(api_version: str) -> tuple[str, str]:
    """``schema.ParseGroupVersion``: ``g/v`` -> (g, v); ``v`` -> ("", v); anything else -> ("", "")."""
    if not api_version:
        return "", ""
    parts = api_version.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    return "", ""


def gv_string(api_version: str) -> str:
    """``GroupVersion.String()``: ``g/v``, or just ``v`` for the core group."""
    group, version = split_api_version(api_version)
    return f"{group}/{version}" if group else version


def gvk_string(api_version: str, kind: str) -> str:
    """``GroupVersionKind.String()``: ``g/v, Kind=K`` (``/, Kind=`` when all are empty)."""
    group, version = split_api_version(api_version)
    return f"{group}/{version}, Kind={kind}"


def review_version(conversion_review_versions: Sequence[Any]) -> str:
    """The first of the CRD's ``conversionReviewVersions`` this server supports."""
    for v in conversion_review_versions:
        if v in SUPPORTED_REVIEW_VERSIONS:
            return str(v)
    raise ReviewError("no supported conversion review versions")


def build_request(version: str, objects: list[dict[str, Any]], desired_api_version: str, uid: str) -> bytes:
    """The ConversionReview request body."""
    return deepjson.dumps({
        "kind": "ConversionReview",
        "apiVersion": f"{GROUP}/{version}",
        "request": {"uid": uid, "desiredAPIVersion": desired_api_version, "objects": objects},
        "response": {"uid": "", "convertedObjects": None, "result": {"metadata": {}}},
    })


def _missing_kind(raw: Any) -> ReviewError:
    text = deepjson.dumps(raw).decode() if not isinstance(raw, (bytes, str)) else \
        (raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw)
    return ReviewError(f"Object 'Kind' is missing in '{text}'")


def decode_response(version: str, uid: str, body: bytes) -> list[Any]:
    """The converted objects of a 2xx webhook answer (``getConvertedObjectsFromResponse``).

    v1 answers must be a ``apiextensions.k8s.io/v1`` ConversionReview echoing the request uid;
    v1beta1 answers skip both checks, as kube does for compatibility.
    """
    try:
        doc = deepjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise ReviewError(f"couldn't get version/kind; json parse error: {err}") from err
    if not isinstance(doc, dict):
        raise ReviewError(f"couldn't get version/kind; json parse error: json: cannot unmarshal "
                          f"{_json_type(doc)} into Go value of type struct {{ APIVersion string "
                          f"\"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}")
    if not doc.get("kind"):
        raise _missing_kind(body)
    if version == "v1":
        expected = f"{GROUP}/v1, Kind=ConversionReview"
        got = gvk_string(str(doc.get("apiVersion") or ""), str(doc.get("kind") or ""))
        if got != expected:
            raise ReviewError(f"expected webhook response of {expected}, got {got}")
    response = doc.get("response")
    if not isinstance(response, dict):
        raise ReviewError("no response provided")
    if version == "v1" and str(response.get("uid") or "") != uid:
        raise ReviewError(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
    result_doc = response.get("result")
    result: dict[str, Any] = result_doc if isinstance(result_doc, dict) else {}
    status = str(result.get("status") or "")
    if status != "Success":
        message = str(result.get("message") or "")
        raise ReviewError(message or f"response.result.status was '{status}', not 'Success'")
    converted = response.get("convertedObjects")
    return list(converted) if isinstance(converted, list) else []


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "null"


def as_object(raw: Any) -> dict[str, Any]:
    """A converted object as ``Unstructured`` decodes it: a JSON object that names its kind."""
    if not isinstance(raw, dict) or not raw.get("kind"):
        raise _missing_kind(raw)
    return raw


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def check_identity(original: dict[str, Any], converted: dict[str, Any]) -> None:
    """``validateConvertedObject``: kind, name, namespace and uid must not change."""
    pairs = (("kind", original.get("kind", ""), converted.get("kind", "")),
             ("name", _meta(original).get("name", ""), _meta(converted).get("name", "")),
             ("namespace", _meta(original).get("namespace", ""), _meta(converted).get("namespace", "")),
             ("UID", _meta(original).get("uid", ""), _meta(converted).get("uid", "")))
    for what, want, got in pairs:
        if (want or "") != (got or ""):
            raise ReviewError(f"must have the same {what}: {want or ''} != {got or ''}")


def restore_metadata(original: dict[str, Any], converted: dict[str, Any]) -> dict[str, Any]:
    """``restoreObjectMeta``: the original metadata, with the webhook's labels and annotations.

    Changed labels/annotations are validated (annotations under kube's ``metadata.annotation``
    path); anything else the webhook changed in metadata is silently put back.
    """
    has_converted, has_original = "metadata" in converted, "metadata" in original
    if not has_converted and not has_original:
        return converted
    if has_original and not has_converted:
        raise ReviewError("missing metadata in converted object")
    conv_meta = converted["metadata"]
    if not isinstance(conv_meta, dict):
        raise ReviewError(f"invalid metadata of type {go_type_name(conv_meta)} in converted object")
    orig_meta = original.get("metadata", {}) if has_original else {}
    if not isinstance(orig_meta, dict):
        raise ReviewError(f"invalid metadata of type {go_type_name(orig_meta)} in input object")
    result_meta = copy.deepcopy(orig_meta)
    for fld, path in (("labels", "metadata.labels"), ("annotations", "metadata.annotation")):
        new = conv_meta.get(fld)
        if new is None:
            result_meta.pop(fld, None)
            continue
        if not isinstance(new, dict):
            raise ReviewError(f"invalid metadata.{fld} of type {go_type_name(new)} in converted object")
        old_doc = orig_meta.get(fld)
        old: dict[str, Any] = old_doc if isinstance(old_doc, dict) else {}
        changed = len(old) != len(new)
        for k, v in new.items():
            if not isinstance(v, str):
                raise ReviewError(f"metadata.{fld}[{k}] must be a string, but is {go_type_name(v)} in converted object")
            if old.get(k) != v:
                changed = True
        if changed:
            errs = validate_labels(new, path) if fld == "labels" else validate_annotations(new, path)
            if errs:
                messages = list(dict.fromkeys(str(e) for e in errs))
                raise ReviewError(messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]")
        result_meta[fld] = dict(new)
    return {**converted, "metadata": result_meta}
