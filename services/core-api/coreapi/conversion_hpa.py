"""HorizontalPodAutoscalers seen through ``autoscaling/v1`` while stored as ``autoscaling/v2``.

``autoscaling/v1`` can only say "target this CPU utilization". kube-apiserver
(``pkg/apis/autoscaling/v1/conversion.go``) maps the first CPU ``Resource`` metric to
``spec.targetCPUUtilizationPercentage`` and the last CPU current utilization to
``status.currentCPUUtilizationPercentage``, and parks everything else in annotations so a
v1 client that reads and writes an object back loses nothing:

* ``autoscaling.alpha.kubernetes.io/metrics``: the non-CPU-utilization metrics (v1 spelling);
* ``autoscaling.alpha.kubernetes.io/current-metrics``: all current metrics (v1 spelling);
* ``autoscaling.alpha.kubernetes.io/behavior``: the behavior (internal Go field names);
* ``autoscaling.alpha.kubernetes.io/conditions``: the conditions.

Reading them back, metrics from the annotation come first and the CPU target last; a v1 HPA
that ends up with no metric at all gets kube's implicit CPU target of 80%. Malformed
annotations are ignored, and all round-trip annotations (plus the v2beta2 tolerance ones)
are removed from the v2 object, as ``DropRoundTripHorizontalPodAutoscalerAnnotations`` does.

Known non-round-trips, all shared with kube: a CPU utilization metric that is not the first
CPU ``Resource`` metric is dropped; the CPU target moves to the end of the metrics list; v2
``type`` of a target is re-derived (see :mod:`coreapi.conversion_hpa_metrics`). Defaulting
(v1 ``minReplicas: 1``, v2 behavior defaults) belongs to the decoders, not here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from coreapi.conversion_gojson import (
    JSONDict,
    MalformedJSON,
    as_dict,
    decode_json_text,
    go_json_dumps,
    object_items,
    or_zero,
    put_omitempty,
    put_pointer,
)
from coreapi.conversion_hpa_metrics import (
    BEHAVIOR_SHAPE,
    CONDITIONS_SHAPE,
    METRIC_SPECS_SHAPE,
    METRIC_STATUSES_SHAPE,
    behavior_go_to_v2,
    behavior_v2_to_go,
    condition_to_other_version,
    cross_version_reference,
    metric_spec_v1_to_v2,
    metric_spec_v2_to_v1,
    metric_status_v1_to_v2,
    metric_status_v2_to_v1,
)

HPA_KIND = "HorizontalPodAutoscaler"
AUTOSCALING_V1 = "autoscaling/v1"
AUTOSCALING_V2 = "autoscaling/v2"

METRIC_SPECS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
METRIC_STATUSES_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR_SPECS_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
TOLERANCE_SCALE_DOWN_ANNOTATION = "autoscaling.alpha.kubernetes.io/scale-down-tolerance"
TOLERANCE_SCALE_UP_ANNOTATION = "autoscaling.alpha.kubernetes.io/scale-up-tolerance"
#: Every annotation kube strips when an HPA leaves a version that uses them.
ROUND_TRIP_ANNOTATIONS = (
    METRIC_SPECS_ANNOTATION, BEHAVIOR_SPECS_ANNOTATION, TOLERANCE_SCALE_DOWN_ANNOTATION,
    TOLERANCE_SCALE_UP_ANNOTATION, METRIC_STATUSES_ANNOTATION, CONDITIONS_ANNOTATION,
)
#: kube's implicit CPU utilization target for a v1 HPA without any metric.
DEFAULT_CPU_UTILIZATION = 80


def _require_object(obj: Any) -> JSONDict:
    if not isinstance(obj, dict):
        raise TypeError(f"a HorizontalPodAutoscaler must be a JSON object, got {type(obj).__name__}")
    return obj


def _metadata_without_round_trip_annotations(obj: JSONDict) -> JSONDict:
    metadata = copy.deepcopy(as_dict(obj.get("metadata")))
    annotations = metadata.get("annotations")
    if isinstance(annotations, dict):
        for key in ROUND_TRIP_ANNOTATIONS:
            annotations.pop(key, None)
        if not annotations:
            del metadata["annotations"]  # an empty map is omitted on the wire
    return metadata


def _is_cpu_resource(metric: JSONDict) -> bool:
    resource = metric.get("resource")
    return metric.get("type") == "Resource" and isinstance(resource, dict) and resource.get("name") == "cpu"


def _cpu_target_utilization(metric: JSONDict) -> Any:
    return as_dict(metric["resource"].get("target")).get("averageUtilization")


def _cpu_current_utilization(metric: JSONDict) -> Any:
    return as_dict(metric["resource"].get("current")).get("averageUtilization")


def hpa_v2_to_v1(obj: JSONDict) -> JSONDict:
    """The ``autoscaling/v1`` view of a stored ``autoscaling/v2`` HorizontalPodAutoscaler."""
    v2 = _require_object(obj)
    spec_in, status_in = as_dict(v2.get("spec")), as_dict(v2.get("status"))
    metrics = object_items(spec_in.get("metrics"))
    current_metrics = object_items(status_in.get("currentMetrics"))
    conditions = object_items(status_in.get("conditions"))

    spec: JSONDict = {"scaleTargetRef": cross_version_reference(spec_in.get("scaleTargetRef"))}
    put_pointer(spec, "minReplicas", spec_in.get("minReplicas"))
    spec["maxReplicas"] = or_zero(spec_in.get("maxReplicas"), 0)
    first_cpu = next((m for m in metrics if _is_cpu_resource(m)), None)
    if first_cpu is not None:
        put_pointer(spec, "targetCPUUtilizationPercentage", _cpu_target_utilization(first_cpu))

    status: JSONDict = {}
    put_pointer(status, "observedGeneration", status_in.get("observedGeneration"))
    put_pointer(status, "lastScaleTime", status_in.get("lastScaleTime"))
    status["currentReplicas"] = or_zero(status_in.get("currentReplicas"), 0)
    status["desiredReplicas"] = or_zero(status_in.get("desiredReplicas"), 0)
    for metric in current_metrics:  # no break in kube: the last CPU utilization wins
        if _is_cpu_resource(metric) and _cpu_current_utilization(metric) is not None:
            status["currentCPUUtilizationPercentage"] = _cpu_current_utilization(metric)

    metadata = _metadata_without_round_trip_annotations(v2)
    added: dict[str, str] = {}
    other_metrics = [
        metric_spec_v2_to_v1(m) for m in metrics
        if not (_is_cpu_resource(m) and _cpu_target_utilization(m) is not None)
    ]
    if other_metrics:
        added[METRIC_SPECS_ANNOTATION] = go_json_dumps(other_metrics)
    if current_metrics:
        added[METRIC_STATUSES_ANNOTATION] = go_json_dumps([metric_status_v2_to_v1(m) for m in current_metrics])
    if isinstance(spec_in.get("behavior"), dict):
        added[BEHAVIOR_SPECS_ANNOTATION] = go_json_dumps(behavior_v2_to_go(spec_in["behavior"]))
    if conditions:
        added[CONDITIONS_ANNOTATION] = go_json_dumps([condition_to_other_version(c) for c in conditions])
    if added:
        metadata["annotations"] = {**as_dict(metadata.get("annotations")), **added}

    return {"kind": HPA_KIND, "apiVersion": AUTOSCALING_V1, "metadata": metadata, "spec": spec, "status": status}


def _decoded_annotation(annotations: JSONDict, key: str, shape: Any) -> tuple[bool, Any]:
    """(True, value) for a present, well-formed annotation; (False, None) otherwise."""
    if key not in annotations:
        return False, None
    try:
        return True, decode_json_text(annotations[key], shape)
    except MalformedJSON:
        return False, None  # kube moves only well-formed data out of annotations


def _converted(items: Any, convert: Callable[[JSONDict], JSONDict]) -> list[JSONDict]:
    return [convert(item) for item in (items or [])]


def hpa_v1_to_v2(obj: JSONDict) -> JSONDict:
    """The ``autoscaling/v2`` object an ``autoscaling/v1`` HorizontalPodAutoscaler is stored as."""
    v1 = _require_object(obj)
    spec_in, status_in = as_dict(v1.get("spec")), as_dict(v1.get("status"))
    annotations = as_dict(as_dict(v1.get("metadata")).get("annotations"))

    cpu_metrics: list[JSONDict] = []
    if spec_in.get("targetCPUUtilizationPercentage") is not None:
        cpu_metrics.append(_cpu_metric(spec_in["targetCPUUtilizationPercentage"]))
    _, other_metrics = _decoded_annotation(annotations, METRIC_SPECS_ANNOTATION, METRIC_SPECS_SHAPE)
    metrics = _converted(other_metrics, metric_spec_v1_to_v2) + cpu_metrics
    if not metrics:
        metrics = [_cpu_metric(DEFAULT_CPU_UTILIZATION)]

    spec: JSONDict = {"scaleTargetRef": cross_version_reference(spec_in.get("scaleTargetRef"))}
    put_pointer(spec, "minReplicas", spec_in.get("minReplicas"))
    spec["maxReplicas"] = or_zero(spec_in.get("maxReplicas"), 0)
    spec["metrics"] = metrics
    behavior_ok, behavior = _decoded_annotation(annotations, BEHAVIOR_SPECS_ANNOTATION, BEHAVIOR_SHAPE)
    if behavior_ok and behavior is not None:
        put_pointer(spec, "behavior", behavior_go_to_v2(behavior))

    current_metrics: list[JSONDict] | None = None
    if status_in.get("currentCPUUtilizationPercentage") is not None:
        utilization = status_in["currentCPUUtilizationPercentage"]
        current_metrics = [{"type": "Resource",
                            "resource": {"name": "cpu", "current": {"averageUtilization": utilization}}}]
    statuses_ok, statuses = _decoded_annotation(annotations, METRIC_STATUSES_ANNOTATION, METRIC_STATUSES_SHAPE)
    if statuses_ok:  # the annotation has more detail than the CPU percentage: it wins
        current_metrics = _converted(statuses, metric_status_v1_to_v2)
    _, conditions = _decoded_annotation(annotations, CONDITIONS_ANNOTATION, CONDITIONS_SHAPE)

    status: JSONDict = {}
    put_pointer(status, "observedGeneration", status_in.get("observedGeneration"))
    put_pointer(status, "lastScaleTime", status_in.get("lastScaleTime"))
    put_omitempty(status, "currentReplicas", status_in.get("currentReplicas"))
    status["desiredReplicas"] = or_zero(status_in.get("desiredReplicas"), 0)
    status["currentMetrics"] = current_metrics  # no omitempty in v2: null when there are none
    put_omitempty(status, "conditions", _converted(conditions, condition_to_other_version))

    metadata = _metadata_without_round_trip_annotations(v1)
    return {"kind": HPA_KIND, "apiVersion": AUTOSCALING_V2, "metadata": metadata, "spec": spec, "status": status}


def _cpu_metric(utilization: Any) -> JSONDict:
    return {"type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization}}}
