"""kube 1.33's validation of the ``authorization.k8s.io/v1`` access reviews (pure functions).

Messages and field paths are kube's (``pkg/apis/authorization/validation``), including how Go
prints the offending values: a nil attributes pointer as ``"null"``, a set one as
``authorization.NonResourceAttributes{Path:"/x", Verb:"get"}``.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.gofmt import GoRendered, go_quote
from genericapi.apimachinery.labels import qualified_name_errors

_NULL = GoRendered('"null"')
_ONE_OF = "exactly one of nonResourceAttributes or resourceAttributes must be specified"


def _dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def non_resource_value(attrs: dict[str, Any] | None) -> GoRendered:
    """``%#v`` of ``*authorization.NonResourceAttributes`` once dereferenced (nil: ``"null"``)."""
    if attrs is None:
        return _NULL
    return GoRendered(f"authorization.NonResourceAttributes{{Path:{go_quote(str(attrs.get('path') or ''))}, "
                      f"Verb:{go_quote(str(attrs.get('verb') or ''))}}}")


def _string_map(value: Any) -> str:
    if not value:
        return "map[string]string(nil)"
    return "map[string]string{" + ", ".join(f"{go_quote(k)}:{go_quote(str(v))}" for k, v in sorted(value.items())) + "}"


def object_meta_value(meta: dict[str, Any]) -> GoRendered:
    """``%#v`` of a ``v1.ObjectMeta`` (the fields a client can send; managedFields left out as
    kube's check clears them first)."""
    generation = meta.get("generation") if isinstance(meta.get("generation"), int) else 0
    finalizers = meta.get("finalizers") or []
    fin = "[]string(nil)" if not finalizers else "[]string{" + ", ".join(go_quote(str(f)) for f in finalizers) + "}"
    parts = [
        f"Name:{go_quote(str(meta.get('name') or ''))}",
        f"GenerateName:{go_quote(str(meta.get('generateName') or ''))}",
        f"Namespace:{go_quote(str(meta.get('namespace') or ''))}",
        f"SelfLink:{go_quote(str(meta.get('selfLink') or ''))}",
        f"UID:{go_quote(str(meta.get('uid') or ''))}",
        f"ResourceVersion:{go_quote(str(meta.get('resourceVersion') or ''))}",
        f"Generation:{generation}",
        "CreationTimestamp:time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)",
        "DeletionTimestamp:<nil>",
        "DeletionGracePeriodSeconds:(*int64)(nil)",
        f"Labels:{_string_map(meta.get('labels'))}",
        f"Annotations:{_string_map(meta.get('annotations'))}",
        "OwnerReferences:[]v1.OwnerReference(nil)",
        f"Finalizers:{fin}",
        "ManagedFields:[]v1.ManagedFieldsEntry(nil)",
    ]
    return GoRendered("v1.ObjectMeta{" + ", ".join(parts) + "}")


def _meta_is_empty(meta: dict[str, Any], *, except_namespace: bool = False) -> bool:
    for key, value in meta.items():
        if key in ("managedFields", "creationTimestamp") or (except_namespace and key == "namespace"):
            continue
        if value not in (None, "", 0, [], {}):
            return False
    return True


def _requirement_errors(req: Any, path: str, *, labels: bool) -> list[FieldError]:
    """``ValidateLabelSelectorRequirement`` / ``ValidateFieldSelectorRequirement`` with unknown
    operators allowed (newer clients' operators are authorized, not refused)."""
    req = req if isinstance(req, dict) else {}
    errs: list[FieldError] = []
    operator, values, key = req.get("operator") or "", req.get("values") or [], str(req.get("key") or "")
    if not labels and not key:
        errs.append(apierrors.required(f"{path}.key", "must be specified"))  # fields: the key first
    if operator in ("In", "NotIn") and not values:
        errs.append(apierrors.required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    if operator in ("Exists", "DoesNotExist") and values:
        errs.append(apierrors.forbidden(f"{path}.values",
                                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    if labels:  # labels: the key last
        errs.extend(apierrors.invalid(f"{path}.key", key, msg) for msg in qualified_name_errors(key))
    return errs


def _selector_errors(selector: Any, path: str, *, labels: bool) -> list[FieldError]:
    sel = _dict(selector)
    if sel is None:
        return []
    errs: list[FieldError] = []
    raw, requirements = sel.get("rawSelector") or "", sel.get("requirements") or []
    if raw and requirements:
        errs.append(apierrors.invalid(f"{path}.rawSelector", raw, "may not specified at the same time as requirements"))
    if not raw and not requirements:
        errs.append(apierrors.required(f"{path}.requirements",
                                       f"when {path} is specified, requirements or rawSelector is required"))
    for i, req in enumerate(requirements if isinstance(requirements, list) else []):
        errs.extend(_requirement_errors(req, f"{path}.requirements[{i}]", labels=labels))
    return errs


def _resource_attribute_errors(attrs: dict[str, Any] | None) -> list[FieldError]:
    if attrs is None:
        return []
    base = "spec.resourceAttributes"
    return [*_selector_errors(attrs.get("fieldSelector"), f"{base}.fieldSelector", labels=False),
            *_selector_errors(attrs.get("labelSelector"), f"{base}.labelSelector", labels=True)]


def _attributes_errors(spec: dict[str, Any]) -> list[FieldError]:
    resource, non_resource = _dict(spec.get("resourceAttributes")), _dict(spec.get("nonResourceAttributes"))
    errs: list[FieldError] = []
    if resource is not None and non_resource is not None:
        errs.append(apierrors.invalid("spec.nonResourceAttributes", non_resource_value(non_resource),
                                      "cannot be specified in combination with resourceAttributes"))
    if resource is None and non_resource is None:
        errs.append(apierrors.invalid("spec.resourceAttributes", _NULL, _ONE_OF))
    return errs


def validate_subject_access_review_spec(spec: dict[str, Any]) -> list[FieldError]:
    """``ValidateSubjectAccessReviewSpec``: one kind of attributes, and a user or a group."""
    errs = _attributes_errors(spec)
    if not spec.get("user") and not spec.get("groups"):
        errs.append(apierrors.invalid("spec.user", str(spec.get("user") or ""),
                                      "at least one of user or group must be specified"))
    errs.extend(_resource_attribute_errors(_dict(spec.get("resourceAttributes"))))
    return errs


def validate_subject_access_review(obj: dict[str, Any]) -> list[FieldError]:
    errs = validate_subject_access_review_spec(_dict(obj.get("spec")) or {})
    meta = _dict(obj.get("metadata")) or {}
    if not _meta_is_empty(meta):
        errs.append(apierrors.invalid("metadata", object_meta_value(meta), "must be empty"))
    return errs


def validate_self_subject_access_review(obj: dict[str, Any]) -> list[FieldError]:
    spec = _dict(obj.get("spec")) or {}
    errs = _attributes_errors(spec)
    errs.extend(_resource_attribute_errors(_dict(spec.get("resourceAttributes"))))
    meta = _dict(obj.get("metadata")) or {}
    if not _meta_is_empty(meta):
        errs.append(apierrors.invalid("metadata", object_meta_value(meta), "must be empty"))
    return errs


def validate_local_subject_access_review(obj: dict[str, Any]) -> list[FieldError]:
    spec = _dict(obj.get("spec")) or {}
    errs = validate_subject_access_review_spec(spec)
    meta = _dict(obj.get("metadata")) or {}
    if not _meta_is_empty(meta, except_namespace=True):
        errs.append(apierrors.invalid("metadata", object_meta_value(meta), "must be empty except for namespace"))
    resource = _dict(spec.get("resourceAttributes"))
    if resource is not None and (resource.get("namespace") or "") != (meta.get("namespace") or ""):
        errs.append(apierrors.invalid("spec.resourceAttributes.namespace", str(resource.get("namespace") or ""),
                                      "must match metadata.namespace"))
    non_resource = _dict(spec.get("nonResourceAttributes"))
    if non_resource is not None:
        errs.append(apierrors.invalid("spec.nonResourceAttributes", non_resource_value(non_resource),
                                      "disallowed on this kind of request"))
    return errs
