"""AdmissionReview: the request a webhook gets and how its answer is checked (kube's ``webhookrequest``).

``build_review`` is kube's ``CreateAdmissionObjects`` (v1 or v1beta1, whichever the webhook lists
first among those kube speaks); ``verify_response`` is ``VerifyAdmissionResponse``: it returns a
``Verdict`` or raises ``InvalidResponse`` with kube's words, which the dispatcher reports as
``received invalid webhook response: <words>``. ``denial`` is kube's ``ToStatusErr``: the Status
the client gets when a webhook says no.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass, field
from typing import Any

from genericapi.apimachinery import deepjson
from genericapi.apimachinery.admission import Attributes
from genericapi.apimachinery.errors import APIError

V1 = "admission.k8s.io/v1"
V1BETA1 = "admission.k8s.io/v1beta1"
#: The AdmissionReview versions kube-apiserver 1.33 speaks, in its order of preference.
SUPPORTED = ("v1", "v1beta1")


class InvalidResponse(Exception):
    """A webhook answer kube refuses (``str()`` is kube's reason)."""


@dataclass
class Invocation:
    """What a matched webhook is called with: the resource and kind as the webhook registered them
    (an equivalent of the request's under matchPolicy Equivalent) and the objects at that version."""

    group: str
    version: str
    resource: str
    kind: str
    obj: dict[str, Any] | None
    old_obj: dict[str, Any] | None


@dataclass
class Verdict:
    allowed: bool
    status: dict[str, Any] | None = None
    patch: bytes = b""
    patch_type: str = ""
    warnings: list[str] = field(default_factory=list)
    audit_annotations: dict[str, str] = field(default_factory=dict)


def review_version(versions: Any) -> str:
    """The first of the webhook's ``admissionReviewVersions`` kube speaks ("" when none)."""
    for v in versions or ():
        if v in SUPPORTED:
            return str(v)
    return ""


def build_review(attrs: Attributes, inv: Invocation, version: str) -> tuple[str, bytes]:
    """(uid, the AdmissionReview request body)."""
    uid = str(uuid.uuid4())
    namespace = attrs.name if (attrs.group, attrs.resource) == ("", "namespaces") and attrs.operation != "CREATE" \
        else attrs.namespace
    request_kind = dict(zip(("group", "version", "kind"), attrs.gvk(), strict=True))
    # a subresource served as another kind (deployments/scale: autoscaling/v1 Scale) keeps its kind
    kind = {"group": inv.group, "version": inv.version, "kind": inv.kind} if attrs.kind_group is None \
        else dict(request_kind)
    request: dict[str, Any] = {
        "uid": uid,
        "kind": kind,
        "resource": {"group": inv.group, "version": inv.version, "resource": inv.resource},
        "requestKind": request_kind,
        "requestResource": {"group": attrs.group, "version": attrs.version, "resource": attrs.resource},
        "operation": attrs.operation,
        "userInfo": attrs.user.to_dict(),
        "object": inv.obj,
        "oldObject": inv.old_obj,
        "dryRun": attrs.dry_run,
        "options": attrs.options,
    }
    if attrs.subresource:
        request["subResource"] = attrs.subresource
        request["requestSubResource"] = attrs.subresource
    if attrs.name:
        request["name"] = attrs.name
    if namespace:
        request["namespace"] = namespace
    api_version = V1 if version == "v1" else V1BETA1
    return uid, deepjson.dumps({"kind": "AdmissionReview", "apiVersion": api_version, "request": request})


def _gvk(doc: dict[str, Any]) -> str:
    api_version = str(doc.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    return f"{group}/{version}, Kind={doc.get('kind') or ''}"


def verify_response(uid: str, version: str, mutating: bool, doc: Any) -> Verdict:
    """kube's ``VerifyAdmissionResponse`` on a decoded AdmissionReview."""
    if not isinstance(doc, dict):
        raise InvalidResponse("webhook response was absent")
    if version == "v1" and (doc.get("apiVersion"), doc.get("kind")) != (V1, "AdmissionReview"):
        raise InvalidResponse(f"expected webhook response of {V1}, Kind=AdmissionReview, got {_gvk(doc)}")
    response = doc.get("response")
    if not isinstance(response, dict):
        raise InvalidResponse("webhook response was absent")
    got_uid = str(response.get("uid") or "")
    if version == "v1" and got_uid != uid:
        raise InvalidResponse(f'expected response.uid="{uid}", got "{got_uid}"')
    patch = _patch_bytes(response.get("patch"))
    patch_type = str(response.get("patchType") or "")
    if version == "v1":
        if patch and not patch_type:
            raise InvalidResponse("webhook returned response.patch but not response.patchType")
        if patch_type:
            if not mutating:
                raise InvalidResponse("validating webhook may not return response.patchType")
            if patch_type != "JSONPatch":
                raise InvalidResponse(f'webhook returned invalid response.patchType of "{patch_type}"')
    elif patch and not patch_type:
        patch_type = "JSONPatch"  # v1beta1 responses may leave it out
    if not mutating:
        patch, patch_type = b"", ""
    status = response.get("status")
    warnings = [str(w) for w in response.get("warnings") or () if isinstance(w, str)]
    annotations = response.get("auditAnnotations")
    return Verdict(response.get("allowed") is True, status if isinstance(status, dict) else None, patch, patch_type,
                   warnings, {str(k): str(v) for k, v in annotations.items()} if isinstance(annotations, dict)
                   else {})


def _patch_bytes(value: Any) -> bytes:
    """``response.patch`` is base64 in JSON ([]byte); Go's decoder refuses anything else."""
    if value is None or value == "":
        return b""
    if not isinstance(value, str):
        raise InvalidResponse("json: cannot unmarshal into Go struct field AdmissionResponse.response.patch "
                              "of type []uint8")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidResponse("illegal base64 data at input byte 0") from None


def denial(webhook: str, status: dict[str, Any] | None) -> APIError:
    """kube's ``ToStatusErr``: the webhook's Status with at least 400, its message prefixed."""
    result = dict(status or {})
    code = result.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) and code >= 400 else 400
    denied_by = f'admission webhook "{webhook}" denied the request'
    message, reason = str(result.get("message") or ""), str(result.get("reason") or "")
    if message:
        text = f"{denied_by}: {message}"
    elif reason:
        text = f"{denied_by}: {reason}"
    else:
        text = f"{denied_by} without explanation"
    details = result.get("details") if isinstance(result.get("details"), dict) else None
    return APIError(code, reason, text, details)


def dry_run_unsupported(webhook: str) -> APIError:
    """kube's ``NewDryRunUnsupportedErr``."""
    return APIError(400, "BadRequest", f'admission webhook "{webhook}" does not support dry run')
