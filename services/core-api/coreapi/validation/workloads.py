"""Workload controllers: Deployment, ReplicaSet, ReplicationController, StatefulSet, DaemonSet.

Each owns pods through a selector that must parse, be non-empty and select the template's own
labels; replica counts are non-negative; update strategies have kube's rules; on update the
selector (and for StatefulSets most of the spec) is immutable in apps/v1.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.validation_meta import validate_annotations, validate_labels

from . import gorepr, names, pods, selectors

IMMUTABLE = "field is immutable"


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def nonnegative(value: Any, path: str) -> list[FieldError]:
    """``ValidateNonnegativeField``."""
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [errors.invalid(path, value, "must be greater than or equal to 0")]
    return []


def immutable(new: Any, old: Any, path: str, value: Any) -> list[FieldError]:
    """``ValidateImmutableField``, with ``value`` already rendered as Go prints the new value."""
    return [] if new == old else [errors.invalid(path, value, IMMUTABLE)]


# -- selectors ----------------------------------------------------------------------------------

def _strict_selector(spec: Mapping[str, Any], path: str, kind_word: str) -> list[FieldError]:
    """Required, syntactically valid, non-empty (apps/v1 Deployment, ReplicaSet, StatefulSet)."""
    selector = spec.get("selector")
    if selector is None:
        return [errors.required(f"{path}.selector")]
    errs = selectors.validate_label_selector(selector, f"{path}.selector")
    if selectors.is_empty(selector):
        errs.append(errors.invalid(f"{path}.selector", gorepr.label_selector(selector),
                                   f"empty selector is invalid for {kind_word}"))
    return errs


def _template_for_replicas(spec: Mapping[str, Any], path: str, kind: str) -> list[FieldError]:
    """``ValidatePodTemplateSpecForReplicaSet`` after ``LabelSelectorAsSelector``."""
    selector = selectors.as_selector(spec.get("selector"))
    if selector is None:
        return [errors.invalid(f"{path}.selector", gorepr.label_selector(_dict(spec.get("selector"))),
                               "invalid label selector")]
    template = spec.get("template")
    tpath = f"{path}.template"
    if not isinstance(template, Mapping):
        return [errors.required(tpath)]
    errs: list[FieldError] = []
    labels = selectors.template_labels(template)
    if not selector.empty and not selectors.matches(selector, labels):
        errs.append(selectors.selector_mismatch(labels, f"{tpath}.metadata.labels"))
    errs.extend(pods.validate_pod_template_spec(template, tpath))
    errs.extend(_always_restart(template, tpath, kind))
    return errs


def _always_restart(template: Mapping[str, Any], tpath: str, kind: str) -> list[FieldError]:
    pod_spec = _dict(template.get("spec"))
    errs: list[FieldError] = []
    restart = pod_spec.get("restartPolicy")
    if restart is not None and restart != "Always":
        errs.append(errors.not_supported(f"{tpath}.spec.restartPolicy", restart, ["Always"]))
    if pod_spec.get("activeDeadlineSeconds") is not None:
        errs.append(errors.forbidden(f"{tpath}.spec.activeDeadlineSeconds",
                                     f"activeDeadlineSeconds in {kind} is not Supported"))
    return errs


# -- int-or-percent -----------------------------------------------------------------------------

def _percent(value: Any) -> int | None:
    if isinstance(value, str) and not names.percent_errors(value):
        return int(value[:-1])
    return None


def _int_or_percent_value(value: Any) -> int:
    percent = _percent(value)
    if percent is not None:
        return percent
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):  # IntOrString.IntValue(): Atoi of the string, 0 when it fails
        try:
            return int(value)
        except ValueError:
            return 0
    return 0


def positive_int_or_percent(value: Any, path: str) -> list[FieldError]:
    """``ValidatePositiveIntOrPercent``."""
    if isinstance(value, str):
        return [errors.invalid(path, gorepr.int_or_string(value), m) for m in names.percent_errors(value)]
    if isinstance(value, int) and value < 0:
        return [errors.invalid(path, value, "must be greater than or equal to 0")]
    return []


def not_more_than_100_percent(value: Any, path: str) -> list[FieldError]:
    percent = _percent(value)
    if percent is None or percent <= 100:
        return []
    return [errors.invalid(path, gorepr.int_or_string(value), "must not be greater than 100%")]


# -- Deployment / ReplicaSet / ReplicationController --------------------------------------------

def _deployment_strategy(strategy: Mapping[str, Any], path: str) -> list[FieldError]:
    kind = strategy.get("type")
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            return [errors.forbidden(f"{path}.rollingUpdate",
                                     "may not be specified when strategy `type` is 'Recreate'")]
        return []
    if kind != "RollingUpdate" or not isinstance(rolling, Mapping):
        return []  # unset: filled by defaulting; unknown values: the schema's enum reports them
    rpath = f"{path}.rollingUpdate"
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    errs = positive_int_or_percent(unavailable, f"{rpath}.maxUnavailable")
    errs.extend(positive_int_or_percent(surge, f"{rpath}.maxSurge"))
    if unavailable is not None and surge is not None and \
            _int_or_percent_value(unavailable) == 0 and _int_or_percent_value(surge) == 0:
        errs.append(errors.invalid(f"{rpath}.maxUnavailable", gorepr.int_or_string(unavailable),
                                   "may not be 0 when `maxSurge` is 0"))
    errs.extend(not_more_than_100_percent(unavailable, f"{rpath}.maxUnavailable"))
    return errs


def validate_deployment(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs = nonnegative(spec.get("replicas"), "spec.replicas")
    errs.extend(_strict_selector(spec, "spec", "deployment"))
    errs.extend(_template_for_replicas(spec, "spec", "ReplicaSet"))
    errs.extend(_deployment_strategy(_dict(spec.get("strategy")), "spec.strategy"))
    min_ready = spec.get("minReadySeconds")
    errs.extend(nonnegative(min_ready, "spec.minReadySeconds"))
    errs.extend(nonnegative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit"))
    deadline = spec.get("progressDeadlineSeconds")
    if isinstance(deadline, int):
        errs.extend(nonnegative(deadline, "spec.progressDeadlineSeconds"))
        if deadline <= (min_ready if isinstance(min_ready, int) else 0):
            errs.append(errors.invalid("spec.progressDeadlineSeconds", deadline,
                                       "must be greater than minReadySeconds"))
    return errs


def validate_replica_set(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs = nonnegative(spec.get("replicas"), "spec.replicas")
    errs.extend(nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    errs.extend(_strict_selector(spec, "spec", "deployment"))  # kube's wording, sic
    errs.extend(_template_for_replicas(spec, "spec", "ReplicaSet"))
    return errs


def validate_replication_controller(obj: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateReplicationControllerSpec``: a map selector, defaulted from the template labels."""
    spec = _dict(obj.get("spec"))
    errs = nonnegative(spec.get("replicas"), "spec.replicas")
    errs.extend(nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    selector = spec.get("selector")
    template = spec.get("template")
    labels = selectors.template_labels(template)
    if isinstance(selector, Mapping) and not selector:
        errs.append(errors.required("spec.selector"))
    elif isinstance(selector, Mapping):
        errs.extend(validate_labels(selector, "spec.selector"))
        wanted = {str(k): str(v) for k, v in selector.items()}
        have = {str(k): str(v) for k, v in (labels or {}).items()}
        if isinstance(template, Mapping) and any(have.get(k) != v for k, v in wanted.items()):
            errs.append(selectors.selector_mismatch(labels, "spec.template.metadata.labels"))
    if not isinstance(template, Mapping):
        errs.append(errors.required("spec.template"))
    else:
        errs.extend(pods.validate_pod_template_spec(template, "spec.template"))
        errs.extend(_always_restart(template, "spec.template", "ReplicationController"))
    return errs


# -- StatefulSet --------------------------------------------------------------------------------

def validate_stateful_set(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    policy = spec.get("podManagementPolicy")
    if policy == "":
        errs.append(errors.required("spec.podManagementPolicy"))
    elif policy is not None and policy not in ("OrderedReady", "Parallel"):
        errs.append(errors.invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    strategy = _dict(spec.get("updateStrategy"))
    rolling = strategy.get("rollingUpdate")
    if strategy.get("type") == "OnDelete" and rolling is not None:
        errs.append(errors.invalid("spec.updateStrategy.rollingUpdate", gorepr.statefulset_rolling_update(rolling),
                                   "only allowed for updateStrategy 'RollingUpdate'"))
    elif strategy.get("type") == "RollingUpdate" and isinstance(rolling, Mapping):
        rpath = "spec.updateStrategy.rollingUpdate"
        errs.extend(nonnegative(rolling.get("partition"), f"{rpath}.partition"))
        unavailable = rolling.get("maxUnavailable")
        if unavailable is not None:
            errs.extend(positive_int_or_percent(unavailable, f"{rpath}.maxUnavailable"))
            if _int_or_percent_value(unavailable) == 0:
                errs.append(errors.invalid(f"{rpath}.maxUnavailable", gorepr.int_or_string(unavailable),
                                           "cannot be 0"))
            errs.extend(not_more_than_100_percent(unavailable, f"{rpath}.maxUnavailable"))
    retention = _dict(spec.get("persistentVolumeClaimRetentionPolicy"))
    for key in ("whenDeleted", "whenScaled"):
        value = retention.get(key)
        if value is not None and value not in ("Retain", "Delete"):
            errs.append(errors.not_supported(f"spec.persistentVolumeClaimRetentionPolicy.{key}", value,
                                             ["Retain", "Delete"]))
    errs.extend(nonnegative(spec.get("replicas"), "spec.replicas"))
    errs.extend(nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    errs.extend(nonnegative(_dict(spec.get("ordinals")).get("start"), "spec.ordinals.start"))
    errs.extend(_strict_selector(spec, "spec", "statefulset"))
    selector = selectors.as_selector(spec.get("selector"))
    template = spec.get("template")
    if selector is None:
        errs.append(errors.invalid("spec.selector", gorepr.label_selector(_dict(spec.get("selector"))), ""))
    elif isinstance(template, Mapping):
        labels = selectors.template_labels(template)
        if not selector.empty and not selectors.matches(selector, labels):
            errs.append(selectors.selector_mismatch(labels, "spec.template.metadata.labels"))
        meta = _dict(template.get("metadata"))
        errs.extend(validate_labels(_dict(meta.get("labels")), "spec.template.labels"))
        errs.extend(validate_annotations(_dict(meta.get("annotations")), "spec.template.annotations"))
    if isinstance(template, Mapping):
        errs.extend(_always_restart(template, "spec.template", "StatefulSet"))
    return errs


_STATEFULSET_MUTABLE = ("replicas", "template", "updateStrategy", "minReadySeconds", "ordinals",
                        "persistentVolumeClaimRetentionPolicy")


def validate_stateful_set_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    errs = validate_stateful_set(new)
    new_spec = dict(copy.deepcopy(_dict(new.get("spec"))))
    old_spec = dict(_dict(old.get("spec")))
    for key in _STATEFULSET_MUTABLE:
        new_spec.pop(key, None)
        old_spec.pop(key, None)
    if new_spec != old_spec:
        errs.append(errors.forbidden("spec", "updates to statefulset spec for fields other than 'replicas', "
                                             "'ordinals', 'template', 'updateStrategy', "
                                             "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' "
                                             "are forbidden"))
    return errs


# -- DaemonSet ----------------------------------------------------------------------------------

def validate_daemon_set(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    selector_obj = spec.get("selector")
    errs = selectors.validate_label_selector(selector_obj, "spec.selector")
    selector = selectors.as_selector(selector_obj)
    template = _dict(spec.get("template"))
    labels = selectors.template_labels(template)
    if selector is not None and not selectors.matches(selector, labels):
        errs.append(selectors.selector_mismatch(labels, "spec.template.metadata.labels"))
    if selectors.is_empty(selector_obj):
        errs.append(errors.invalid("spec.selector", gorepr.label_selector(selector_obj),
                                   "empty selector is invalid for daemonset"))
    errs.extend(pods.validate_pod_template_spec(template, "spec.template"))
    errs.extend(_always_restart(template, "spec.template", "DaemonSet"))
    errs.extend(nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    errs.extend(nonnegative(spec.get("templateGeneration"), "spec.templateGeneration"))
    strategy = _dict(spec.get("updateStrategy"))
    rolling = strategy.get("rollingUpdate")
    if strategy.get("type") == "RollingUpdate" and isinstance(rolling, Mapping):
        rpath = "spec.updateStrategy.rollingUpdate"
        unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
        errs.extend(positive_int_or_percent(unavailable, f"{rpath}.maxUnavailable"))
        errs.extend(positive_int_or_percent(surge, f"{rpath}.maxSurge"))
        errs.extend(not_more_than_100_percent(unavailable, f"{rpath}.maxUnavailable"))
        errs.extend(not_more_than_100_percent(surge, f"{rpath}.maxSurge"))
        has_unavailable = _int_or_percent_value(unavailable) != 0
        has_surge = _int_or_percent_value(surge) != 0
        if has_unavailable and has_surge:
            errs.append(errors.invalid(f"{rpath}.maxSurge", gorepr.int_or_string(surge),
                                       "may not be set when maxUnavailable is non-zero"))
        elif not has_unavailable and not has_surge:
            errs.append(errors.required(f"{rpath}.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    errs.extend(nonnegative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit"))
    return errs


def selector_immutable(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """apps/v1 (and later) forbid changing a controller's selector."""
    new_sel = _dict(new.get("spec")).get("selector")
    old_sel = _dict(old.get("spec")).get("selector")
    value = gorepr.label_selector(new_sel if isinstance(new_sel, Mapping) else None)
    return immutable(_normal_selector(new_sel), _normal_selector(old_sel), "spec.selector", value)


def _normal_selector(selector: Any) -> Any:
    """Semantic equality: empty and absent matchLabels/matchExpressions are the same."""
    if not isinstance(selector, Mapping):
        return selector
    return {k: v for k, v in selector.items() if v not in (None, {}, [])}
