"""Metric sources, metric statuses, conditions and behavior in their two HPA spellings.

``autoscaling/v2`` describes a metric with a ``target``/``current`` MetricTarget and a
``metric`` identifier; the round-trip annotations of an ``autoscaling/v1`` HPA hold the older
``autoscaling/v1`` MetricSpec/MetricStatus spelling (``metricName``, ``targetAverageValue``,
``currentValue``...). This module converts each piece both ways exactly as the hand-written
functions of ``pkg/apis/autoscaling/v1/conversion.go`` do, including their quirks:

* a v1 object target always yields a v2 ``value`` (``"0"`` when unset) and a v1 pods/object/
  external status always yields a v2 ``value``/``averageValue``: Go copies non-pointer
  quantities by address;
* the v2 MetricTarget ``type`` is not carried: it is re-derived on the way back (object:
  ``AverageValue`` if an average value is set, else ``Value``; pods: ``AverageValue``;
  resource: ``Utilization`` if a utilization is set, else ``AverageValue``; external:
  ``Value`` if a value is set, else ``AverageValue``).

The behavior annotation is ``json.Marshal`` of kube's *internal* behavior type, which has no
json tags, so its keys are Go field names (``ScaleUp``, ``StabilizationWindowSeconds``...).
Quantities are passed through as written, not canonicalised.
"""

from __future__ import annotations

from typing import Any

from coreapi.conversion_gojson import (
    INT32,
    OBJECT,
    QUANTITY,
    STRING,
    JSONDict,
    as_dict,
    or_zero,
    put_omitempty,
    put_pointer,
)

# --- shapes of the annotation payloads, for decode_shape ------------------------------------

_V1_REFERENCE = {"kind": STRING, "name": STRING, "apiVersion": STRING}
_V1_METRIC_SPEC = {
    "type": STRING,
    "object": {"target": _V1_REFERENCE, "metricName": STRING, "targetValue": QUANTITY,
               "selector": OBJECT, "averageValue": QUANTITY},
    "pods": {"metricName": STRING, "targetAverageValue": QUANTITY, "selector": OBJECT},
    "resource": {"name": STRING, "targetAverageUtilization": INT32, "targetAverageValue": QUANTITY},
    "containerResource": {"name": STRING, "targetAverageUtilization": INT32,
                          "targetAverageValue": QUANTITY, "container": STRING},
    "external": {"metricName": STRING, "metricSelector": OBJECT, "targetValue": QUANTITY,
                 "targetAverageValue": QUANTITY},
}
_V1_METRIC_STATUS = {
    "type": STRING,
    "object": {"target": _V1_REFERENCE, "metricName": STRING, "currentValue": QUANTITY,
               "selector": OBJECT, "averageValue": QUANTITY},
    "pods": {"metricName": STRING, "currentAverageValue": QUANTITY, "selector": OBJECT},
    "resource": {"name": STRING, "currentAverageUtilization": INT32, "currentAverageValue": QUANTITY},
    "containerResource": {"name": STRING, "currentAverageUtilization": INT32,
                          "currentAverageValue": QUANTITY, "container": STRING},
    "external": {"metricName": STRING, "metricSelector": OBJECT, "currentValue": QUANTITY,
                 "currentAverageValue": QUANTITY},
}
_V1_CONDITION = {"type": STRING, "status": STRING, "lastTransitionTime": STRING, "reason": STRING,
                 "message": STRING}
_GO_SCALING_RULES = {
    "StabilizationWindowSeconds": INT32,
    "SelectPolicy": STRING,
    "Policies": [{"Type": STRING, "Value": INT32, "PeriodSeconds": INT32}],
    "Tolerance": QUANTITY,
}

METRIC_SPECS_SHAPE: list[Any] = [_V1_METRIC_SPEC]
METRIC_STATUSES_SHAPE: list[Any] = [_V1_METRIC_STATUS]
CONDITIONS_SHAPE: list[Any] = [_V1_CONDITION]
BEHAVIOR_SHAPE: dict[str, Any] = {"ScaleUp": _GO_SCALING_RULES, "ScaleDown": _GO_SCALING_RULES}


def cross_version_reference(value: Any) -> JSONDict:
    """CrossVersionObjectReference (same in v1 and v2): kind and name always, apiVersion if set."""
    source = as_dict(value)
    out: JSONDict = {"kind": or_zero(source.get("kind"), ""), "name": or_zero(source.get("name"), "")}
    put_omitempty(out, "apiVersion", source.get("apiVersion"))
    return out


def _identifier(name: Any, selector: Any) -> JSONDict:
    out: JSONDict = {"name": or_zero(name, "")}
    put_pointer(out, "selector", selector)
    return out


# --- v2 -> v1 (into the annotations) ---------------------------------------------------------

def metric_spec_v2_to_v1(metric: JSONDict) -> JSONDict:
    """An ``autoscaling/v2`` MetricSpec in its ``autoscaling/v1`` spelling."""
    out: JSONDict = {"type": or_zero(metric.get("type"), "")}
    if isinstance(metric.get("object"), dict):
        src = metric["object"]
        ident, target = as_dict(src.get("metric")), as_dict(src.get("target"))
        obj: JSONDict = {"target": cross_version_reference(src.get("describedObject")),
                         "metricName": or_zero(ident.get("name"), ""),
                         "targetValue": or_zero(target.get("value"), "0")}
        put_pointer(obj, "selector", ident.get("selector"))
        put_pointer(obj, "averageValue", target.get("averageValue"))
        out["object"] = obj
    if isinstance(metric.get("pods"), dict):
        src = metric["pods"]
        ident, target = as_dict(src.get("metric")), as_dict(src.get("target"))
        pods: JSONDict = {"metricName": or_zero(ident.get("name"), ""),
                          "targetAverageValue": or_zero(target.get("averageValue"), "0")}
        put_pointer(pods, "selector", ident.get("selector"))
        out["pods"] = pods
    for key in ("resource", "containerResource"):
        if isinstance(metric.get(key), dict):
            src = metric[key]
            target = as_dict(src.get("target"))
            res: JSONDict = {"name": or_zero(src.get("name"), "")}
            put_pointer(res, "targetAverageUtilization", target.get("averageUtilization"))
            put_pointer(res, "targetAverageValue", target.get("averageValue"))
            if key == "containerResource":
                res["container"] = or_zero(src.get("container"), "")
            out[key] = res
    if isinstance(metric.get("external"), dict):
        src = metric["external"]
        ident, target = as_dict(src.get("metric")), as_dict(src.get("target"))
        ext: JSONDict = {"metricName": or_zero(ident.get("name"), "")}
        put_pointer(ext, "metricSelector", ident.get("selector"))
        put_pointer(ext, "targetValue", target.get("value"))
        put_pointer(ext, "targetAverageValue", target.get("averageValue"))
        out["external"] = ext
    return out


def metric_status_v2_to_v1(metric: JSONDict) -> JSONDict:
    """An ``autoscaling/v2`` MetricStatus in its ``autoscaling/v1`` spelling."""
    out: JSONDict = {"type": or_zero(metric.get("type"), "")}
    if isinstance(metric.get("object"), dict):
        src = metric["object"]
        ident, current = as_dict(src.get("metric")), as_dict(src.get("current"))
        obj: JSONDict = {"target": cross_version_reference(src.get("describedObject")),
                         "metricName": or_zero(ident.get("name"), ""),
                         "currentValue": or_zero(current.get("value"), "0")}
        put_pointer(obj, "selector", ident.get("selector"))
        put_pointer(obj, "averageValue", current.get("averageValue"))
        out["object"] = obj
    if isinstance(metric.get("pods"), dict):
        src = metric["pods"]
        ident, current = as_dict(src.get("metric")), as_dict(src.get("current"))
        pods: JSONDict = {"metricName": or_zero(ident.get("name"), ""),
                          "currentAverageValue": or_zero(current.get("averageValue"), "0")}
        put_pointer(pods, "selector", ident.get("selector"))
        out["pods"] = pods
    for key in ("resource", "containerResource"):
        if isinstance(metric.get(key), dict):
            src = metric[key]
            current = as_dict(src.get("current"))
            res: JSONDict = {"name": or_zero(src.get("name"), "")}
            put_pointer(res, "currentAverageUtilization", current.get("averageUtilization"))
            res["currentAverageValue"] = or_zero(current.get("averageValue"), "0")
            if key == "containerResource":
                res["container"] = or_zero(src.get("container"), "")
            out[key] = res
    if isinstance(metric.get("external"), dict):
        src = metric["external"]
        ident, current = as_dict(src.get("metric")), as_dict(src.get("current"))
        ext: JSONDict = {"metricName": or_zero(ident.get("name"), "")}
        put_pointer(ext, "metricSelector", ident.get("selector"))
        ext["currentValue"] = or_zero(current.get("value"), "0")
        put_pointer(ext, "currentAverageValue", current.get("averageValue"))
        out["external"] = ext
    return out


def condition_to_other_version(condition: JSONDict) -> JSONDict:
    """An HPA condition; v1 and v2 spell it the same (``lastTransitionTime`` is a struct: always written)."""
    out: JSONDict = {"type": or_zero(condition.get("type"), ""), "status": or_zero(condition.get("status"), ""),
                     "lastTransitionTime": or_zero(condition.get("lastTransitionTime"), None)}
    put_omitempty(out, "reason", condition.get("reason"))
    put_omitempty(out, "message", condition.get("message"))
    return out


def behavior_v2_to_go(behavior: JSONDict) -> JSONDict:
    """The v2 behavior as ``json.Marshal`` writes the internal Go struct (field names, nulls kept)."""

    def rules(value: Any) -> JSONDict | None:
        if not isinstance(value, dict):
            return None
        policies = value.get("policies")
        return {
            "StabilizationWindowSeconds": value.get("stabilizationWindowSeconds"),
            "SelectPolicy": value.get("selectPolicy"),
            "Policies": None if not isinstance(policies, list) else [
                {"Type": or_zero(p.get("type"), ""), "Value": or_zero(p.get("value"), 0),
                 "PeriodSeconds": or_zero(p.get("periodSeconds"), 0)}
                for p in policies if isinstance(p, dict)
            ],
            "Tolerance": value.get("tolerance"),
        }

    return {"ScaleUp": rules(behavior.get("scaleUp")), "ScaleDown": rules(behavior.get("scaleDown"))}


# --- v1 (decoded annotations) -> v2 ----------------------------------------------------------

def _resource_target(utilization: Any, average_value: Any) -> JSONDict:
    target: JSONDict = {"type": "AverageValue" if utilization is None else "Utilization"}
    put_pointer(target, "averageValue", average_value)
    put_pointer(target, "averageUtilization", utilization)
    return target


def metric_spec_v1_to_v2(metric: JSONDict) -> JSONDict:
    """A decoded ``autoscaling/v1`` MetricSpec in its ``autoscaling/v2`` spelling."""
    out: JSONDict = {"type": or_zero(metric.get("type"), "")}
    if "object" in metric:
        src = metric["object"]
        target: JSONDict = {"type": "Value" if src.get("averageValue") is None else "AverageValue",
                            "value": or_zero(src.get("targetValue"), "0")}
        put_pointer(target, "averageValue", src.get("averageValue"))
        out["object"] = {"describedObject": cross_version_reference(src.get("target")), "target": target,
                         "metric": _identifier(src.get("metricName"), src.get("selector"))}
    if "pods" in metric:
        src = metric["pods"]
        out["pods"] = {"metric": _identifier(src.get("metricName"), src.get("selector")),
                       "target": {"type": "AverageValue",
                                  "averageValue": or_zero(src.get("targetAverageValue"), "0")}}
    if "resource" in metric:
        src = metric["resource"]
        out["resource"] = {"name": or_zero(src.get("name"), ""),
                           "target": _resource_target(src.get("targetAverageUtilization"),
                                                      src.get("targetAverageValue"))}
    if "containerResource" in metric:
        src = metric["containerResource"]
        out["containerResource"] = {"name": or_zero(src.get("name"), ""),
                                    "target": _resource_target(src.get("targetAverageUtilization"),
                                                               src.get("targetAverageValue")),
                                    "container": or_zero(src.get("container"), "")}
    if "external" in metric:
        src = metric["external"]
        ext_target: JSONDict = {"type": "AverageValue" if src.get("targetValue") is None else "Value"}
        put_pointer(ext_target, "value", src.get("targetValue"))
        put_pointer(ext_target, "averageValue", src.get("targetAverageValue"))
        out["external"] = {"metric": _identifier(src.get("metricName"), src.get("metricSelector")),
                           "target": ext_target}
    return out


def metric_status_v1_to_v2(metric: JSONDict) -> JSONDict:
    """A decoded ``autoscaling/v1`` MetricStatus in its ``autoscaling/v2`` spelling."""
    out: JSONDict = {"type": or_zero(metric.get("type"), "")}
    if "object" in metric:
        src = metric["object"]
        current: JSONDict = {"value": or_zero(src.get("currentValue"), "0")}
        put_pointer(current, "averageValue", src.get("averageValue"))
        out["object"] = {"metric": _identifier(src.get("metricName"), src.get("selector")), "current": current,
                         "describedObject": cross_version_reference(src.get("target"))}
    if "pods" in metric:
        src = metric["pods"]
        out["pods"] = {"metric": _identifier(src.get("metricName"), src.get("selector")),
                       "current": {"averageValue": or_zero(src.get("currentAverageValue"), "0")}}
    for key in ("resource", "containerResource"):
        if key in metric:
            src = metric[key]
            res_current: JSONDict = {"averageValue": or_zero(src.get("currentAverageValue"), "0")}
            put_pointer(res_current, "averageUtilization", src.get("currentAverageUtilization"))
            res: JSONDict = {"name": or_zero(src.get("name"), ""), "current": res_current}
            if key == "containerResource":
                res["container"] = or_zero(src.get("container"), "")
            out[key] = res
    if "external" in metric:
        src = metric["external"]
        ext_current: JSONDict = {"value": or_zero(src.get("currentValue"), "0")}
        put_pointer(ext_current, "averageValue", src.get("currentAverageValue"))
        out["external"] = {"metric": _identifier(src.get("metricName"), src.get("metricSelector")),
                           "current": ext_current}
    return out


def behavior_go_to_v2(behavior: JSONDict) -> JSONDict | None:
    """A decoded internal-Go behavior in v2 spelling; None for the zero behavior (kube drops it)."""
    out: JSONDict = {}
    for go_key, key in (("ScaleUp", "scaleUp"), ("ScaleDown", "scaleDown")):
        rules = behavior.get(go_key)
        if rules is None:
            continue
        converted: JSONDict = {}
        put_pointer(converted, "stabilizationWindowSeconds", rules.get("StabilizationWindowSeconds"))
        put_pointer(converted, "selectPolicy", rules.get("SelectPolicy"))
        policies = rules.get("Policies")
        if policies:
            converted["policies"] = [
                {"type": or_zero(p.get("Type"), ""), "value": or_zero(p.get("Value"), 0),
                 "periodSeconds": or_zero(p.get("PeriodSeconds"), 0)}
                for p in policies
            ]
        put_pointer(converted, "tolerance", rules.get("Tolerance"))
        out[key] = converted
    return out or None

