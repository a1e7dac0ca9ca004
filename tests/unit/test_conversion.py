"""Conversions between served versions sharing one storage: Events (core v1 <-> events.k8s.io/v1)
and HorizontalPodAutoscalers (autoscaling/v2 storage <-> autoscaling/v1 view), as kube-apiserver does."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from coreapi.conversion import (
    CONVERSIONS,
    event_core_to_events_v1,
    event_events_v1_to_core,
    hpa_v1_to_v2,
    hpa_v2_to_v1,
    storage_conversion,
)
from coreapi.conversion_gojson import INT32, MalformedJSON, decode_shape, go_json_dumps
from coreapi.conversion_hpa import (
    BEHAVIOR_SPECS_ANNOTATION,
    CONDITIONS_ANNOTATION,
    METRIC_SPECS_ANNOTATION,
    METRIC_STATUSES_ANNOTATION,
    TOLERANCE_SCALE_UP_ANNOTATION,
)

# --------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------

POD_REF = {"kind": "Pod", "namespace": "default", "name": "web-0", "uid": "8c0f9a5e-1111-4b1e-9d3c-2f1d2a3b4c5d",
           "apiVersion": "v1", "resourceVersion": "4711", "fieldPath": "spec.containers{web}"}


def kubelet_core_event() -> dict[str, Any]:
    """A core/v1 Event as kubelet's recorder writes it and kube-apiserver serves it."""
    return {
        "kind": "Event", "apiVersion": "v1",
        "metadata": {"name": "web-0.17a9", "namespace": "default", "uid": "e1", "resourceVersion": "900",
                     "creationTimestamp": "2024-05-01T10:00:00Z", "labels": {"x": "y"}},
        "involvedObject": POD_REF,
        "reason": "Pulled",
        "message": 'Container image "nginx:1.25" already present on machine',
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2024-05-01T10:00:00Z",
        "lastTimestamp": "2024-05-01T10:05:00Z",
        "count": 3,
        "type": "Normal",
        "eventTime": None,
        "reportingComponent": "kubelet",
        "reportingInstance": "node-1",
    }


def scheduler_events_v1_event() -> dict[str, Any]:
    """An events.k8s.io/v1 Event as the scheduler's new-style recorder writes it."""
    return {
        "kind": "Event", "apiVersion": "events.k8s.io/v1",
        "metadata": {"name": "web-1.17b0", "namespace": "default"},
        "eventTime": "2024-05-01T10:00:00.123456Z",
        "series": {"count": 4, "lastObservedTime": "2024-05-01T10:09:00.000001Z"},
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-cp-1",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "web-1", "uid": "u-1", "apiVersion": "v1",
                      "resourceVersion": "77"},
        "related": {"kind": "Node", "name": "node-2", "apiVersion": "v1"},
        "note": "0/3 nodes are available: 3 Insufficient cpu.",
        "type": "Warning",
        "deprecatedSource": {},
        "deprecatedFirstTimestamp": None,
        "deprecatedLastTimestamp": None,
    }


def test_core_event_to_events_v1_maps_every_field() -> None:
    converted = event_core_to_events_v1(kubelet_core_event())
    assert converted == {
        "kind": "Event", "apiVersion": "events.k8s.io/v1",
        "metadata": kubelet_core_event()["metadata"],
        "eventTime": None,
        "reportingController": "kubelet",
        "reportingInstance": "node-1",
        "reason": "Pulled",
        "regarding": POD_REF,
        "note": 'Container image "nginx:1.25" already present on machine',
        "type": "Normal",
        "deprecatedSource": {"component": "kubelet", "host": "node-1"},
        "deprecatedFirstTimestamp": "2024-05-01T10:00:00Z",
        "deprecatedLastTimestamp": "2024-05-01T10:05:00Z",
        "deprecatedCount": 3,
    }


def test_events_v1_to_core_maps_every_field() -> None:
    converted = event_events_v1_to_core(scheduler_events_v1_event())
    assert converted == {
        "kind": "Event", "apiVersion": "v1",
        "metadata": {"name": "web-1.17b0", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-1", "uid": "u-1",
                           "apiVersion": "v1", "resourceVersion": "77"},
        "reason": "FailedScheduling",
        "message": "0/3 nodes are available: 3 Insufficient cpu.",
        "source": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "type": "Warning",
        "eventTime": "2024-05-01T10:00:00.123456Z",
        "series": {"count": 4, "lastObservedTime": "2024-05-01T10:09:00.000001Z"},
        "action": "Scheduling",
        "related": {"kind": "Node", "name": "node-2", "apiVersion": "v1"},
        "reportingComponent": "default-scheduler",
        "reportingInstance": "default-scheduler-cp-1",
    }


def test_event_round_trips_core_events_core() -> None:
    original = kubelet_core_event()
    assert event_events_v1_to_core(event_core_to_events_v1(original)) == original
    with_series = event_events_v1_to_core(scheduler_events_v1_event())
    assert event_events_v1_to_core(event_core_to_events_v1(with_series)) == with_series


def test_event_round_trips_events_core_events() -> None:
    original = scheduler_events_v1_event()
    assert event_core_to_events_v1(event_events_v1_to_core(original)) == original


def test_event_with_only_metadata_gets_go_zero_values() -> None:
    core = event_events_v1_to_core({"metadata": {"name": "e"}})
    assert core == {"kind": "Event", "apiVersion": "v1", "metadata": {"name": "e"}, "involvedObject": {},
                    "source": {}, "firstTimestamp": None, "lastTimestamp": None, "eventTime": None,
                    "reportingComponent": "", "reportingInstance": ""}
    events = event_core_to_events_v1({})
    assert events == {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": {}, "eventTime": None,
                      "regarding": {}, "deprecatedSource": {}, "deprecatedFirstTimestamp": None,
                      "deprecatedLastTimestamp": None}


def test_event_empty_strings_and_zero_counts_are_omitted() -> None:
    core = kubelet_core_event() | {"reason": "", "count": 0, "reportingComponent": "", "action": ""}
    events = event_core_to_events_v1(core)
    for absent in ("reason", "deprecatedCount", "reportingController", "action"):
        assert absent not in events
    ref = event_core_to_events_v1({"involvedObject": {"kind": "Pod", "name": "p", "namespace": ""}})["regarding"]
    assert ref == {"kind": "Pod", "name": "p"}


def test_event_series_fields_follow_each_versions_tags() -> None:
    # events.k8s.io/v1 EventSeries always writes both fields; core omits a zero count.
    events = event_core_to_events_v1({"series": {}})
    assert events["series"] == {"count": 0, "lastObservedTime": None}
    core = event_events_v1_to_core({"series": {"count": 0, "lastObservedTime": "2024-01-01T00:00:00.000000Z"}})
    assert core["series"] == {"lastObservedTime": "2024-01-01T00:00:00.000000Z"}


@pytest.mark.parametrize("bad", ["Pod/web-0", ["Pod"], 7, None])
def test_event_bad_sub_object_shapes_read_as_absent(bad: Any) -> None:
    core = event_events_v1_to_core({"regarding": bad, "related": bad, "series": bad, "deprecatedSource": bad})
    assert core["involvedObject"] == {}
    assert core["source"] == {}
    assert "related" not in core and "series" not in core
    events = event_core_to_events_v1({"involvedObject": bad, "related": bad, "series": bad, "source": bad})
    assert events["regarding"] == {} and events["deprecatedSource"] == {}
    assert "related" not in events and "series" not in events


def test_event_unknown_fields_are_not_carried() -> None:
    events = event_core_to_events_v1(kubelet_core_event() | {"bogus": 1})
    assert "bogus" not in events


@pytest.mark.parametrize("convert", [event_core_to_events_v1, event_events_v1_to_core, hpa_v1_to_v2, hpa_v2_to_v1])
def test_non_object_input_is_a_type_error(convert: Any) -> None:
    with pytest.raises(TypeError):
        convert(["not", "an", "object"])


def test_event_conversions_do_not_mutate_or_alias_input() -> None:
    core = kubelet_core_event()
    snapshot = copy.deepcopy(core)
    events = event_core_to_events_v1(core)
    events["metadata"]["labels"]["x"] = "changed"
    events["regarding"]["name"] = "changed"
    assert core == snapshot
    events_in = scheduler_events_v1_event()
    snapshot = copy.deepcopy(events_in)
    back = event_events_v1_to_core(events_in)
    back["series"]["count"] = 99
    back["related"]["name"] = "changed"
    assert events_in == snapshot


# --------------------------------------------------------------------------------------------
# HorizontalPodAutoscalers
# --------------------------------------------------------------------------------------------

def rich_v2_hpa() -> dict[str, Any]:
    """A stored autoscaling/v2 HPA using every metric source, behavior and conditions.

    The CPU utilization metric is last, and every target/current carries what kube's own
    conversion re-creates, so v2 -> v1 -> v2 is exact.
    """
    selector = {"matchLabels": {"queue": "jobs"}}
    return {
        "kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v2",
        "metadata": {"name": "web", "namespace": "shop", "uid": "h-1", "resourceVersion": "31",
                     "labels": {"app": "web"}, "annotations": {"owner": "team-a"}},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
            "minReplicas": 2,
            "maxReplicas": 20,
            "metrics": [
                {"type": "Resource", "resource": {"name": "memory",
                                                  "target": {"type": "AverageValue", "averageValue": "512Mi"}}},
                {"type": "ContainerResource", "containerResource": {
                    "name": "cpu", "container": "sidecar",
                    "target": {"type": "Utilization", "averageUtilization": 70}}},
                {"type": "Pods", "pods": {"metric": {"name": "requests_per_second"},
                                          "target": {"type": "AverageValue", "averageValue": "100"}}},
                {"type": "Object", "object": {
                    "describedObject": {"kind": "Ingress", "name": "main", "apiVersion": "networking.k8s.io/v1"},
                    "target": {"type": "Value", "value": "10k"},
                    "metric": {"name": "hits", "selector": selector}}},
                {"type": "External", "external": {"metric": {"name": "queue_depth", "selector": selector},
                                                  "target": {"type": "AverageValue", "averageValue": "30"}}},
                {"type": "Resource", "resource": {"name": "cpu",
                                                  "target": {"type": "Utilization", "averageUtilization": 60}}},
            ],
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                            "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                         {"type": "Percent", "value": 100, "periodSeconds": 15}]},
                "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Min",
                              "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}],
                              "tolerance": "50m"},
            },
        },
        "status": {
            "observedGeneration": 4,
            "lastScaleTime": "2024-05-01T09:00:00Z",
            "currentReplicas": 5,
            "desiredReplicas": 6,
            "currentMetrics": [
                {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "400Mi"}}},
                {"type": "ContainerResource", "containerResource": {
                    "name": "cpu", "container": "sidecar",
                    "current": {"averageValue": "250m", "averageUtilization": 50}}},
                {"type": "Pods", "pods": {"metric": {"name": "requests_per_second"},
                                          "current": {"averageValue": "90"}}},
                {"type": "Object", "object": {"metric": {"name": "hits", "selector": selector},
                                              "current": {"value": "12k"},
                                              "describedObject": {"kind": "Ingress", "name": "main",
                                                                  "apiVersion": "networking.k8s.io/v1"}}},
                {"type": "External", "external": {"metric": {"name": "queue_depth", "selector": selector},
                                                  "current": {"value": "0", "averageValue": "25"}}},
                {"type": "Resource", "resource": {"name": "cpu",
                                                  "current": {"averageValue": "300m", "averageUtilization": 75}}},
            ],
            "conditions": [
                {"type": "AbleToScale", "status": "True", "lastTransitionTime": "2024-05-01T08:00:00Z",
                 "reason": "ReadyForNewScale", "message": "recommended size matches current size"},
                {"type": "ScalingActive", "status": "True", "lastTransitionTime": "2024-05-01T08:00:00Z",
                 "reason": "ValidMetricFound"},
            ],
        },
    }


def test_hpa_v2_to_v1_fields_and_annotations() -> None:
    v1 = hpa_v2_to_v1(rich_v2_hpa())
    assert v1["apiVersion"] == "autoscaling/v1" and v1["kind"] == "HorizontalPodAutoscaler"
    assert v1["spec"] == {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                          "minReplicas": 2, "maxReplicas": 20, "targetCPUUtilizationPercentage": 60}
    assert v1["status"] == {"observedGeneration": 4, "lastScaleTime": "2024-05-01T09:00:00Z",
                            "currentReplicas": 5, "desiredReplicas": 6, "currentCPUUtilizationPercentage": 75}
    annotations = v1["metadata"]["annotations"]
    assert annotations["owner"] == "team-a"
    assert v1["metadata"]["labels"] == {"app": "web"} and v1["metadata"]["uid"] == "h-1"
    # The CPU utilization target is not repeated in the annotation; the v1 spelling is used.
    assert orjson.loads(annotations[METRIC_SPECS_ANNOTATION]) == [
        {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "512Mi"}},
        {"type": "ContainerResource", "containerResource": {"name": "cpu", "targetAverageUtilization": 70,
                                                            "container": "sidecar"}},
        {"type": "Pods", "pods": {"metricName": "requests_per_second", "targetAverageValue": "100"}},
        {"type": "Object", "object": {"target": {"kind": "Ingress", "name": "main",
                                                 "apiVersion": "networking.k8s.io/v1"},
                                      "metricName": "hits", "targetValue": "10k",
                                      "selector": {"matchLabels": {"queue": "jobs"}}}},
        {"type": "External", "external": {"metricName": "queue_depth",
                                          "metricSelector": {"matchLabels": {"queue": "jobs"}},
                                          "targetAverageValue": "30"}},
    ]
    statuses = orjson.loads(annotations[METRIC_STATUSES_ANNOTATION])
    assert len(statuses) == 6
    assert statuses[-1] == {"type": "Resource", "resource": {"name": "cpu", "currentAverageUtilization": 75,
                                                             "currentAverageValue": "300m"}}
    assert statuses[4]["external"] == {"metricName": "queue_depth",
                                       "metricSelector": {"matchLabels": {"queue": "jobs"}},
                                       "currentValue": "0", "currentAverageValue": "25"}
    # The behavior is the internal Go struct marshalled without json tags.
    assert annotations[BEHAVIOR_SPECS_ANNOTATION] == (
        '{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":['
        '{"Type":"Pods","Value":4,"PeriodSeconds":15},{"Type":"Percent","Value":100,"PeriodSeconds":15}],'
        '"Tolerance":null},"ScaleDown":{"StabilizationWindowSeconds":300,"SelectPolicy":"Min","Policies":['
        '{"Type":"Percent","Value":10,"PeriodSeconds":60}],"Tolerance":"50m"}}'
    )
    assert orjson.loads(annotations[CONDITIONS_ANNOTATION])[1] == {
        "type": "ScalingActive", "status": "True", "lastTransitionTime": "2024-05-01T08:00:00Z",
        "reason": "ValidMetricFound"}


def test_hpa_round_trips_v2_v1_v2() -> None:
    original = rich_v2_hpa()
    assert hpa_v1_to_v2(hpa_v2_to_v1(original)) == original


def test_hpa_round_trips_a_freshly_created_cpu_only_hpa() -> None:
    original = {"kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v2", "metadata": {"name": "a"},
                "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "a"}, "minReplicas": 1, "maxReplicas": 3,
                         "metrics": [{"type": "Resource", "resource": {
                             "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]},
                "status": {"desiredReplicas": 0, "currentMetrics": None}}
    v1 = hpa_v2_to_v1(original)
    assert "annotations" not in v1["metadata"]
    assert v1["status"] == {"currentReplicas": 0, "desiredReplicas": 0}
    assert hpa_v1_to_v2(v1) == original


def test_hpa_v1_to_v2_plain_v1_object() -> None:
    v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
          "metadata": {"name": "php-apache", "namespace": "default"},
          "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "php-apache"},
                   "minReplicas": 1, "maxReplicas": 10, "targetCPUUtilizationPercentage": 50},
          "status": {"currentReplicas": 1, "desiredReplicas": 1, "currentCPUUtilizationPercentage": 12}}
    v2 = hpa_v1_to_v2(v1)
    assert v2 == {
        "kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v2",
        "metadata": {"name": "php-apache", "namespace": "default"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "php-apache", "apiVersion": "apps/v1"},
                 "minReplicas": 1, "maxReplicas": 10,
                 "metrics": [{"type": "Resource", "resource": {
                     "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]},
        "status": {"currentReplicas": 1, "desiredReplicas": 1,
                   "currentMetrics": [{"type": "Resource", "resource": {
                       "name": "cpu", "current": {"averageUtilization": 12}}}]},
    }


def test_hpa_v1_without_target_gets_the_implicit_80_percent_cpu_target() -> None:
    v2 = hpa_v1_to_v2({"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 4}})
    assert v2["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    assert "minReplicas" not in v2["spec"]  # defaulting minReplicas is the decoder's job, not conversion's
    assert v2["status"] == {"desiredReplicas": 0, "currentMetrics": None}


def test_hpa_v1_with_other_metrics_annotation_gets_no_implicit_cpu_target() -> None:
    annotation = '[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"5"}}]'
    v2 = hpa_v1_to_v2({"metadata": {"annotations": {METRIC_SPECS_ANNOTATION: annotation}},
                       "spec": {"maxReplicas": 4}})
    assert v2["spec"]["metrics"] == [{"type": "Pods", "pods": {
        "metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "5"}}}]
    assert "metadata" in v2 and "annotations" not in v2["metadata"]


def test_hpa_cpu_target_moves_after_annotation_metrics() -> None:
    original = rich_v2_hpa()
    metrics = original["spec"]["metrics"]
    original["spec"]["metrics"] = [metrics[-1], *metrics[:-1]]  # CPU first
    back = hpa_v1_to_v2(hpa_v2_to_v1(original))
    assert back["spec"]["metrics"] == metrics  # kube appends the CPU target after the others


def test_hpa_only_the_first_cpu_resource_metric_becomes_the_v1_target() -> None:
    cpu_value = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "AverageValue",
                                                                            "averageValue": "200m"}}}
    cpu_util = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                           "averageUtilization": 55}}}
    v1 = hpa_v2_to_v1({"spec": {"metrics": [cpu_value, cpu_util]}})
    # The first CPU metric has no utilization: no v1 target, and the utilization one is dropped.
    assert "targetCPUUtilizationPercentage" not in v1["spec"]
    assert orjson.loads(v1["metadata"]["annotations"][METRIC_SPECS_ANNOTATION]) == [
        {"type": "Resource", "resource": {"name": "cpu", "targetAverageValue": "200m"}}]


def test_hpa_last_cpu_current_utilization_wins() -> None:
    def current(value: int) -> dict[str, Any]:
        return {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": value}}}

    v1 = hpa_v2_to_v1({"status": {"currentMetrics": [current(10), current(30)]}})
    assert v1["status"]["currentCPUUtilizationPercentage"] == 30


def test_hpa_v1_target_type_is_rederived_like_kube() -> None:
    # An object metric with an average-value target comes back with value "0" set as well.
    metric = {"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "s"},
                                           "target": {"type": "AverageValue", "averageValue": "3"},
                                           "metric": {"name": "m"}}}
    back = hpa_v1_to_v2(hpa_v2_to_v1({"spec": {"metrics": [metric]}}))
    assert back["spec"]["metrics"][0]["object"]["target"] == {"type": "AverageValue", "value": "0",
                                                              "averageValue": "3"}


def test_hpa_v2_without_spec_or_status_reads_as_go_zero_values() -> None:
    v1 = hpa_v2_to_v1({"metadata": {"name": "z"}})
    assert v1 == {"kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v1", "metadata": {"name": "z"},
                  "spec": {"scaleTargetRef": {"kind": "", "name": ""}, "maxReplicas": 0},
                  "status": {"currentReplicas": 0, "desiredReplicas": 0}}


def test_hpa_empty_behavior_still_writes_the_annotation() -> None:
    v1 = hpa_v2_to_v1({"spec": {"behavior": {}}})
    assert v1["metadata"]["annotations"][BEHAVIOR_SPECS_ANNOTATION] == '{"ScaleUp":null,"ScaleDown":null}'
    # ...and the zero behavior is not restored on the way back.
    assert "behavior" not in hpa_v1_to_v2(v1)["spec"]


def test_hpa_stale_round_trip_annotations_on_v2_are_replaced() -> None:
    stored = rich_v2_hpa()
    stored["metadata"]["annotations"][METRIC_SPECS_ANNOTATION] = "stale"
    stored["metadata"]["annotations"][TOLERANCE_SCALE_UP_ANNOTATION] = "1"
    stored["spec"]["metrics"] = stored["spec"]["metrics"][-1:]
    annotations = hpa_v2_to_v1(stored)["metadata"]["annotations"]
    assert METRIC_SPECS_ANNOTATION not in annotations  # only the CPU target is left: nothing to park
    assert TOLERANCE_SCALE_UP_ANNOTATION not in annotations


@pytest.mark.parametrize("bad", ["", "abc", "[]", "{}", "null", '[{"type": 5}]', '{"ScaleUp": {"Policies": "x"}}'])
def test_hpa_malformed_annotations_are_ignored_and_dropped(bad: str) -> None:
    keys = (METRIC_SPECS_ANNOTATION, METRIC_STATUSES_ANNOTATION, CONDITIONS_ANNOTATION, BEHAVIOR_SPECS_ANNOTATION,
            TOLERANCE_SCALE_UP_ANNOTATION)
    v1 = {"metadata": {"name": "h", "annotations": {**dict.fromkeys(keys, bad), "keep": "me"}},
          "spec": {"maxReplicas": 2, "targetCPUUtilizationPercentage": 40}}
    v2 = hpa_v1_to_v2(v1)
    assert v2["metadata"]["annotations"] == {"keep": "me"}
    assert v2["spec"]["metrics"][-1]["resource"]["target"]["averageUtilization"] == 40
    assert "behavior" not in v2["spec"]
    assert "conditions" not in v2["status"]


def test_hpa_well_formed_empty_status_annotation_wins_over_cpu_percentage() -> None:
    v2 = hpa_v1_to_v2({"metadata": {"annotations": {METRIC_STATUSES_ANNOTATION: "[]"}},
                       "status": {"currentCPUUtilizationPercentage": 20}})
    assert v2["status"]["currentMetrics"] == []


def test_hpa_annotation_keys_match_case_insensitively_like_go() -> None:
    behavior = '{"scaleDown": {"stabilizationWindowSeconds": 120, "policies": [{"type": "Pods", "value": 1, ' \
               '"periodSeconds": 60}]}}'
    metrics = '[{"Type": "Pods", "Pods": {"MetricName": "qps", "TargetAverageValue": "7", "unknown": 1}}]'
    v2 = hpa_v1_to_v2({"metadata": {"annotations": {BEHAVIOR_SPECS_ANNOTATION: behavior,
                                                    METRIC_SPECS_ANNOTATION: metrics}}})
    assert v2["spec"]["behavior"] == {"scaleDown": {"stabilizationWindowSeconds": 120,
                                                    "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}
    assert v2["spec"]["metrics"] == [{"type": "Pods", "pods": {
        "metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "7"}}}]


def test_hpa_bad_shapes_in_stored_v2_do_not_crash() -> None:
    v1 = hpa_v2_to_v1({"spec": {"metrics": ["cpu", {"type": "Resource", "resource": "cpu"}], "behavior": "fast",
                                "scaleTargetRef": "Deployment/web"},
                       "status": {"currentMetrics": {"not": "a list"}, "conditions": [None]}})
    assert v1["spec"] == {"scaleTargetRef": {"kind": "", "name": ""}, "maxReplicas": 0}
    assert orjson.loads(v1["metadata"]["annotations"][METRIC_SPECS_ANNOTATION]) == [{"type": "Resource"}]
    assert BEHAVIOR_SPECS_ANNOTATION not in v1["metadata"]["annotations"]


def test_hpa_conversions_do_not_mutate_input() -> None:
    stored = rich_v2_hpa()
    snapshot = copy.deepcopy(stored)
    v1 = hpa_v2_to_v1(stored)
    v1["metadata"]["labels"]["app"] = "changed"
    assert stored == snapshot
    v1_snapshot = copy.deepcopy(hpa_v2_to_v1(stored))
    v1_again = hpa_v2_to_v1(stored)
    v2 = hpa_v1_to_v2(v1_again)
    v2["metadata"]["labels"]["app"] = "changed"
    assert v1_again == v1_snapshot


def test_go_json_dumps_escapes_like_encoding_json() -> None:
    assert go_json_dumps({"a": "<b>&"}) == '{"a":"\\u003cb\\u003e\\u0026"}'


def test_decode_shape_rejects_what_go_rejects() -> None:
    with pytest.raises(MalformedJSON):
        decode_shape(2**31, INT32)
    with pytest.raises(MalformedJSON):
        decode_shape(True, INT32)
    with pytest.raises(MalformedJSON):
        decode_shape(1.5, INT32)
    assert decode_shape([None, {"A": 1}], [{"a": INT32}]) == [{}, {"a": 1}]
    assert decode_shape({"a": None, "b": 1}, {"a": INT32}) == {}


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------

def test_registry_entries() -> None:
    assert CONVERSIONS[("events.k8s.io", "v1", "events")] == (
        "", "v1", event_events_v1_to_core, event_core_to_events_v1)
    assert CONVERSIONS[("autoscaling", "v1", "horizontalpodautoscalers")] == (
        "autoscaling", "v2", hpa_v1_to_v2, hpa_v2_to_v1)
    assert storage_conversion("", "v1", "events") is None
    assert storage_conversion("autoscaling", "v2", "horizontalpodautoscalers") is None


def test_registry_functions_produce_storage_and_served_versions() -> None:
    for (group, version, _plural), (storage_group, storage_version, to_storage, from_storage) in CONVERSIONS.items():
        served_api_version = f"{group}/{version}"
        storage_api_version = f"{storage_group}/{storage_version}" if storage_group else storage_version
        assert to_storage({})["apiVersion"] == storage_api_version
        assert from_storage({})["apiVersion"] == served_api_version
