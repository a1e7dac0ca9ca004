"""Pod updates: what kube-apiserver 1.33's ``ValidatePodUpdate`` lets a client change in a running Pod.

A Pod's spec is nearly frozen once created. A plain update (PUT/PATCH of the pod, not of
``/status``, ``/ephemeralcontainers`` or ``/resize``) may only change container and init-container
images (never to empty), set or shorten ``activeDeadlineSeconds``, add tolerations (or change the
``tolerationSeconds`` of existing ones), remove scheduling gates, move a negative
``terminationGracePeriodSeconds`` to 1 and, while the old Pod is still gated, add to
``nodeSelector`` and to the required node-affinity terms. Everything else is one ``Forbidden``
error at ``spec``. Metadata changes are always allowed, subject to the object-meta update rules
(no new finalizers on an object being deleted, identity fields fixed) and the pod-only
annotation rules (mirror-pod and AppArmor annotations may not be added, changed or removed).

Both objects reach this module defaulted, so "unchanged" means equal after defaulting. Equality
follows apimachinery's semantic equality on the JSON form: null, empty lists and empty objects
equal a missing field, and so do ``""``, ``false`` and ``0`` except for the fields Go keeps as
pointers (where nil and zero differ).

Deviations from kube, on purpose:

- kube ends the ``spec`` Forbidden message with a ``cmp.Diff`` of the Go specs after a newline.
  That text cannot be reproduced faithfully, so the first line is kube's exactly and the lines
  after it list the differing spec fields instead, one per line: ``~`` changed, ``+`` added,
  ``-`` removed (``  ~ spec.containers[0].env``).
- ``metadata.resourceVersion`` "must be specified for an update" is not checked: the store fills
  it in for unconditional updates, as kube does for Pods. The identity fields (uid,
  creationTimestamp, deletion fields) are copied from the stored object by the store before
  validation, so their checks here only guard direct callers.
- Tolerations are validated (``ValidateTolerations``) here on update only, since the shared
  pod-spec validation does not check them yet; kube reports such errors twice (from the spec and
  from the tolerations-update check), and so does this module.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.gofmt import GoRendered, go_quote, string_map, string_slice
from genericapi.apimachinery.validation_meta import validate_label_value, validate_qualified_name

from . import names, pods

#: The first line of kube's message for any other spec change (``updatablePodSpecFields``).
SPEC_FORBIDDEN = "pod updates may not change fields other than " + ",".join((
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
))
IMMUTABLE = "field is immutable"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
APPARMOR_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
_MAX_INT32 = 2**31 - 1
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_OPERATORS = ("Equal", "Exists")
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")

#: Scalar fields Go keeps as pointers somewhere in a PodSpec: their zero value is not "unset".
_POINTER_SCALARS = frozenset({
    "activeDeadlineSeconds", "allowPrivilegeEscalation", "automountServiceAccountToken", "defaultMode",
    "enableServiceLinks", "expirationSeconds", "fsGroup", "hostProcess", "hostUsers", "mode", "optional",
    "preemptionPolicy", "priority", "privileged", "readOnlyRootFilesystem", "runAsGroup", "runAsNonRoot",
    "runAsUser", "runtimeClassName", "setHostnameAsFQDN", "shareProcessNamespace",
    "terminationGracePeriodSeconds", "tolerationSeconds",
})


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# -- semantic equality ----------------------------------------------------------------------------

def _unset(key: str | None, value: Any) -> bool:
    if value is None or value == [] or value == {}:
        return True
    if key in _POINTER_SCALARS:
        return False
    return value == "" or value is False or (_int(value) == 0)


def normalized(value: Any, key: str | None = None) -> Any:
    """``value`` with every field that reads as unset in Go dropped (see the module docstring)."""
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            v = normalized(v, k)
            if not _unset(k, v):
                out[k] = v
        return out
    if isinstance(value, list):
        return [normalized(item) for item in value]
    return value


def same(a: Any, b: Any, key: str | None = None) -> bool:
    return normalized(a, key) == normalized(b, key)


# -- object meta ----------------------------------------------------------------------------------

def validate_meta_update(new: Mapping[str, Any], old: Mapping[str, Any], path: str = "metadata") -> list[FieldError]:
    """``ValidateObjectMetaAccessorUpdate`` minus what the shared object-meta validation already does."""
    errs: list[FieldError] = []
    if old.get("deletionTimestamp"):
        added = sorted({str(f) for f in _list(new.get("finalizers"))} - {str(f) for f in _list(old.get("finalizers"))})
        if added:
            errs.append(errors.forbidden(
                f"{path}.finalizers",
                f"no new finalizers can be added if the object is being deleted, found new finalizers "
                f"{string_slice(added)}"))
    new_gen, old_gen = _int(new.get("generation")) or 0, _int(old.get("generation")) or 0
    if new_gen < old_gen:
        errs.append(errors.invalid(f"{path}.generation", new_gen, "must not be decremented"))
    for key in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
        if not same(new.get(key), old.get(key), key):
            value = new.get(key)
            errs.append(errors.invalid(f"{path}.{key}", "null" if value is None else value, IMMUTABLE))
    return errs


def validate_pod_annotation_updates(new: Mapping[str, Any], old: Mapping[str, Any],
                                    path: str = "metadata.annotations") -> list[FieldError]:
    """``ValidatePodSpecificAnnotationUpdates``: mirror-pod and AppArmor annotations are fixed."""
    errs: list[FieldError] = []
    new_ann, old_ann = _dict(new.get("annotations")), _dict(old.get("annotations"))
    for key, value in old_ann.items():
        if key in new_ann and new_ann[key] == value:
            continue
        if key.startswith(APPARMOR_PREFIX):
            errs.append(errors.forbidden(f"{path}[{key}]", "may not remove or update AppArmor annotations"))
        if key == MIRROR_ANNOTATION:
            errs.append(errors.forbidden(f"{path}[{key}]", "may not remove or update mirror pod annotation"))
    for key in new_ann:
        if key in old_ann:
            continue
        if key.startswith(APPARMOR_PREFIX):
            errs.append(errors.forbidden(f"{path}[{key}]", "may not add AppArmor annotations"))
        if key == MIRROR_ANNOTATION:
            errs.append(errors.forbidden(f"{path}[{key}]", "may not add mirror pod annotation"))
    return errs


# -- tolerations and scheduling gates -------------------------------------------------------------

def validate_tolerations(tolerations: list[Any], path: str) -> list[FieldError]:
    """``ValidateTolerations``."""
    errs: list[FieldError] = []
    for i, tol in enumerate(tolerations):
        tol = _dict(tol)
        at = f"{path}[{i}]"
        key, operator = str(tol.get("key") or ""), str(tol.get("operator") or "")
        value, effect = str(tol.get("value") or ""), str(tol.get("effect") or "")
        if key:
            errs.extend(errors.invalid(f"{at}.key", key, m) for m in validate_qualified_name(key))
        if not key and operator != "Exists":
            errs.append(errors.invalid(f"{at}.operator", operator,
                                       'operator must be Exists when `key` is empty, which means "match all values '
                                       'and all keys"'))
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.append(errors.invalid(f"{at}.effect", effect,
                                       "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if operator in ("Equal", ""):
            problems = validate_label_value(value)
            if problems:
                errs.append(errors.invalid(f"{at}.operator", value, ";".join(problems)))
        elif operator == "Exists":
            if value:
                errs.append(errors.invalid(f"{at}.operator", value, "value must be empty when `operator` is 'Exists'"))
        else:
            errs.append(errors.not_supported(f"{at}.operator", operator, _OPERATORS))
        if effect and effect not in _EFFECTS:
            errs.append(errors.not_supported(f"{at}.effect", effect, _EFFECTS))
    return errs


def validate_only_added_tolerations(new: list[Any], old: list[Any], path: str) -> list[FieldError]:
    """Every old toleration is still there (its ``tolerationSeconds`` may change); then the new list's errors."""
    for old_tol in old:
        found = False
        for new_tol in new:
            clone = dict(_dict(old_tol))
            clone.pop("tolerationSeconds", None)
            seconds = _dict(new_tol).get("tolerationSeconds")
            if seconds is not None:
                clone["tolerationSeconds"] = seconds
            if same(clone, new_tol):
                found = True
                break
        if not found:
            return [errors.forbidden(path, "existing toleration can not be modified except its tolerationSeconds")]
    return validate_tolerations(new, path)


def validate_only_deleted_scheduling_gates(new: list[Any], old: list[Any], path: str) -> list[FieldError]:
    old_names = {_dict(g).get("name") for g in old}
    added: dict[str, int] = {}
    for i, gate in enumerate(new):
        added[str(_dict(gate).get("name") or "")] = i
    return [errors.forbidden(f"{path}[{i}].name", f"only deletion is allowed, but found new scheduling gate '{name}'")
            for name, i in sorted(added.items(), key=lambda item: item[1]) if name not in old_names]


# -- gated pods: node selector and node affinity ---------------------------------------------------

def _go_requirements(reqs: Any) -> str:
    if not isinstance(reqs, list):
        return "[]core.NodeSelectorRequirement(nil)"
    parts = []
    for req in reqs:
        req = _dict(req)
        parts.append(f"core.NodeSelectorRequirement{{Key:{go_quote(str(req.get('key') or ''))}, "
                     f"Operator:{go_quote(str(req.get('operator') or ''))}, Values:{string_slice(req.get('values'))}}}")
    return "[]core.NodeSelectorRequirement{" + ", ".join(parts) + "}"


def _go_term(term: Any) -> str:
    term = _dict(term)
    return (f"core.NodeSelectorTerm{{MatchExpressions:{_go_requirements(term.get('matchExpressions'))}, "
            f"MatchFields:{_go_requirements(term.get('matchFields'))}}}")


def _go_terms(terms: list[Any] | None) -> GoRendered:
    if terms is None:
        return GoRendered("[]core.NodeSelectorTerm(nil)")
    return GoRendered("[]core.NodeSelectorTerm{" + ", ".join(_go_term(t) for t in terms) + "}")


def _only_additions(new_term: Any, old_term: Any) -> bool:
    new_term, old_term = _dict(new_term), _dict(old_term)
    if not _list(old_term.get("matchExpressions")) and not _list(old_term.get("matchFields")):
        if _list(new_term.get("matchExpressions")) or _list(new_term.get("matchFields")):
            return False
    for key in ("matchExpressions", "matchFields"):
        old_reqs, new_reqs = _list(old_term.get(key)), _list(new_term.get(key))
        if old_reqs and (len(new_reqs) < len(old_reqs) or not same(new_reqs[:len(old_reqs)], old_reqs)):
            return False
    return True


def validate_node_affinity_mutation(new: Any, old: Any, path: str) -> list[FieldError]:
    """A gated Pod's required node-affinity terms may only gain requirements."""
    old_required = _dict(old).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(old_required, Mapping):
        return []
    old_terms = _list(old_required.get("nodeSelectorTerms"))
    new_required = _dict(new).get("requiredDuringSchedulingIgnoredDuringExecution")
    raw_terms = _dict(new_required).get("nodeSelectorTerms")
    new_terms = raw_terms if isinstance(raw_terms, list) else None
    terms_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    if old_terms and len(old_terms) != len(new_terms or []):
        return [errors.invalid(terms_path, _go_terms(new_terms),
                               "no additions/deletions to non-empty NodeSelectorTerms list are allowed")]
    return [errors.invalid(f"{terms_path}[{i}]", GoRendered(_go_term((new_terms or [])[i])),
                           "only additions are allowed (no mutations or deletions)")
            for i in range(len(old_terms)) if not _only_additions((new_terms or [])[i], old_terms[i])]


def _munge_gated(munged: dict[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """For a gated Pod: check nodeSelector/nodeAffinity changes, then take them back from ``old``."""
    errs: list[FieldError] = []
    old_selector = _dict(old.get("nodeSelector"))
    if not same(munged.get("nodeSelector"), old.get("nodeSelector")):
        new_selector = _dict(munged.get("nodeSelector"))
        if any(k not in new_selector or new_selector[k] != v for k, v in old_selector.items()):
            errs.append(errors.invalid("spec.nodeSelector", string_map(munged.get("nodeSelector")),
                                       "only additions to spec.nodeSelector are allowed (no mutations or deletions)"))
        _put(munged, "nodeSelector", old.get("nodeSelector"))
    old_affinity = old.get("affinity")
    old_na = _dict(old_affinity).get("nodeAffinity")
    affinity = munged.get("affinity")
    munged_na = _dict(affinity).get("nodeAffinity")
    if not same(old_na, munged_na):
        errs.extend(validate_node_affinity_mutation(munged_na, old_na, "spec.affinity.nodeAffinity"))
        if affinity is None:
            if old_na is not None:
                munged["affinity"] = {"nodeAffinity": copy.deepcopy(old_na)}
        elif old_affinity is None and not _dict(affinity).get("podAffinity") \
                and not _dict(affinity).get("podAntiAffinity"):
            munged.pop("affinity", None)
        elif isinstance(affinity, dict):
            _put(affinity, "nodeAffinity", old_na)
    return errs


# -- the update ------------------------------------------------------------------------------------

def _put(target: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        target.pop(key, None)
    else:
        target[key] = copy.deepcopy(value)


def _container_updates(new: list[Any], old: list[Any], path: str) -> tuple[list[FieldError], bool]:
    """``ValidateContainerUpdates``: same number of containers, each with a usable image."""
    if len(new) != len(old):
        return [errors.forbidden(path, "pod updates may not add or remove containers")], True
    errs: list[FieldError] = []
    for i, ctr in enumerate(new):
        image = _dict(ctr).get("image")
        image = image if isinstance(image, str) else ""
        if not image:
            errs.append(errors.required(f"{path}[{i}].image"))
        if image != image.strip():
            errs.append(errors.invalid(f"{path}[{i}].image", image, "must not have leading or trailing whitespace"))
    return errs, False


def _deadline_errors(new: Any, old: Any) -> tuple[list[FieldError], bool]:
    """``activeDeadlineSeconds`` may be set, or lowered, never raised or unset; True means stop here."""
    path = "spec.activeDeadlineSeconds"
    new_value, old_value = _int(new), _int(old)
    if new_value is not None:
        if not 0 <= new_value <= _MAX_INT32:
            return [errors.invalid(path, new_value, names.inclusive_range_error(0, _MAX_INT32))], True
        if old_value is not None and old_value < new_value:
            return [errors.invalid(path, new_value, "must be less than or equal to previous value")], True
    elif old_value is not None:
        return [errors.invalid(path, "null", "must not update from a positive integer to nil value")], False
    return [], False


def spec_differences(old: Any, new: Any, path: str = "spec") -> list[str]:
    """Lines naming what differs between two specs (containers are followed to their fields)."""
    old_n, new_n = _dict(normalized(old)), _dict(normalized(new))
    lines: list[str] = []
    for key in list(old_n) + [k for k in new_n if k not in old_n]:
        if key not in new_n:
            lines.append(f"  - {path}.{key}")
        elif key not in old_n:
            lines.append(f"  + {path}.{key}")
        elif old_n[key] != new_n[key]:
            a, b = old_n[key], new_n[key]
            if key in _CONTAINER_LISTS and isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
                for i, (x, y) in enumerate(zip(a, b, strict=True)):
                    if x != y:
                        lines.extend(spec_differences(x, y, f"{path}.{key}[{i}]"))
            else:
                lines.append(f"  ~ {path}.{key}")
    return lines


def validate_pod_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """``ValidatePodUpdate`` of kube-apiserver 1.33 (see the module docstring)."""
    new_meta, old_meta = _dict(new.get("metadata")), _dict(old.get("metadata"))
    new_spec, old_spec = _dict(new.get("spec")), _dict(old.get("spec"))
    errs = validate_meta_update(new_meta, old_meta)
    errs.extend(pods.validate_pod(new))
    errs.extend(validate_tolerations(_list(new_spec.get("tolerations")), "spec.tolerations"))
    errs.extend(validate_pod_annotation_updates(new_meta, old_meta))

    for key in ("containers", "initContainers"):
        found, stop = _container_updates(_list(new_spec.get(key)), _list(old_spec.get(key)), f"spec.{key}")
        errs.extend(found)
        if stop:
            return errs
    found, stop = _deadline_errors(new_spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds"))
    errs.extend(found)
    if stop:
        return errs
    errs.extend(validate_only_added_tolerations(_list(new_spec.get("tolerations")), _list(old_spec.get("tolerations")),
                                                "spec.tolerations"))
    errs.extend(validate_only_deleted_scheduling_gates(_list(new_spec.get("schedulingGates")),
                                                       _list(old_spec.get("schedulingGates")), "spec.schedulingGates"))
    if same(new_spec, old_spec):
        return errs

    munged = copy.deepcopy(dict(new_spec))
    for key in ("containers", "initContainers"):
        old_ctrs = _list(old_spec.get(key))
        for i, ctr in enumerate(_list(munged.get(key))):
            if isinstance(ctr, dict):
                _put(ctr, "image", _dict(old_ctrs[i]).get("image"))
    for key in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        _put(munged, key, old_spec.get(key))
    old_grace = _int(old_spec.get("terminationGracePeriodSeconds"))
    if old_grace is not None and old_grace < 0 and _int(munged.get("terminationGracePeriodSeconds")) == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    if _list(old_spec.get("schedulingGates")):
        errs.extend(_munge_gated(munged, old_spec))

    if not same(munged, old_spec):
        detail = "\n".join([SPEC_FORBIDDEN, *spec_differences(old_spec, munged)])
        errs.append(errors.forbidden("spec", detail))
    return errs
