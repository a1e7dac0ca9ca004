"""Events seen through ``events.k8s.io/v1`` and through core ``v1``: one stored object, two views.

kube-apiserver keeps every Event as a core ``v1`` Event (etcd ``/registry/events/...``) and
serves ``events.k8s.io/v1`` by converting through the internal core Event
(``pkg/apis/events/v1/conversion.go`` plus the generated conversions). The renames are
``regarding``/``involvedObject``, ``note``/``message``, ``reportingController``/
``reportingComponent`` and the ``deprecated*`` fields; everything else carries over. Each
side has a field for every field of the other, so the conversion loses nothing but Go's
zero-value normalisation.

Output follows ``json.Marshal`` of the target struct: ``omitempty`` strings/counts are
dropped when empty, while non-pointer structs and times are always written (core
``source: {}``, ``eventTime: null``, ``firstTimestamp: null``), and core's
``reportingComponent``/``reportingInstance`` have no ``omitempty`` so they read ``""``.

Bad shapes: Go rejects a body whose ``regarding`` is not an object while decoding it, before
any conversion runs. These functions do not validate; a sub-object of the wrong type
(``regarding``, ``deprecatedSource``, ``related``, ``series``) reads as absent, so the
result holds the zero value Go would have (``involvedObject: {}``) instead of raising.
"""

from __future__ import annotations

import copy
from typing import Any

from coreapi.conversion_gojson import JSONDict, as_dict, or_zero, put_omitempty

EVENTS_V1_API_VERSION = "events.k8s.io/v1"
CORE_V1_API_VERSION = "v1"
EVENT_KIND = "Event"

# core/v1 ObjectReference, in Go field order; every field is an omitempty string.
_OBJECT_REFERENCE_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
_EVENT_SOURCE_FIELDS = ("component", "host")


def _string_struct(value: Any, fields: tuple[str, ...]) -> JSONDict:
    """A struct of omitempty strings (ObjectReference, EventSource), in Go field order."""
    source = as_dict(value)
    out: JSONDict = {}
    for field in fields:
        put_omitempty(out, field, source.get(field))
    return out


def _object_reference(value: Any) -> JSONDict:
    return _string_struct(value, _OBJECT_REFERENCE_FIELDS)


def _event_source(value: Any) -> JSONDict:
    return _string_struct(value, _EVENT_SOURCE_FIELDS)


def _metadata(obj: JSONDict) -> JSONDict:
    return copy.deepcopy(as_dict(obj.get("metadata")))


def _require_object(obj: Any) -> JSONDict:
    if not isinstance(obj, dict):
        raise TypeError(f"an Event must be a JSON object, got {type(obj).__name__}")
    return obj


def event_core_to_events_v1(obj: JSONDict) -> JSONDict:
    """The ``events.k8s.io/v1`` view of a core ``v1`` Event (``Convert_core_Event_To_v1_Event``)."""
    core = _require_object(obj)
    out: JSONDict = {"kind": EVENT_KIND, "apiVersion": EVENTS_V1_API_VERSION, "metadata": _metadata(core)}
    out["eventTime"] = or_zero(core.get("eventTime"), None)
    series = core.get("series")
    if isinstance(series, dict):
        # events.k8s.io/v1 EventSeries has no omitempty: both fields are always written.
        out["series"] = {
            "count": or_zero(series.get("count"), 0),
            "lastObservedTime": or_zero(series.get("lastObservedTime"), None),
        }
    put_omitempty(out, "reportingController", core.get("reportingComponent"))
    put_omitempty(out, "reportingInstance", core.get("reportingInstance"))
    put_omitempty(out, "action", core.get("action"))
    put_omitempty(out, "reason", core.get("reason"))
    out["regarding"] = _object_reference(core.get("involvedObject"))
    if isinstance(core.get("related"), dict):
        out["related"] = _object_reference(core["related"])
    put_omitempty(out, "note", core.get("message"))
    put_omitempty(out, "type", core.get("type"))
    out["deprecatedSource"] = _event_source(core.get("source"))
    out["deprecatedFirstTimestamp"] = or_zero(core.get("firstTimestamp"), None)
    out["deprecatedLastTimestamp"] = or_zero(core.get("lastTimestamp"), None)
    put_omitempty(out, "deprecatedCount", core.get("count"))
    return out


def event_events_v1_to_core(obj: JSONDict) -> JSONDict:
    """The core ``v1`` Event an ``events.k8s.io/v1`` Event is stored as (``Convert_v1_Event_To_core_Event``)."""
    event = _require_object(obj)
    out: JSONDict = {"kind": EVENT_KIND, "apiVersion": CORE_V1_API_VERSION, "metadata": _metadata(event)}
    out["involvedObject"] = _object_reference(event.get("regarding"))
    put_omitempty(out, "reason", event.get("reason"))
    put_omitempty(out, "message", event.get("note"))
    out["source"] = _event_source(event.get("deprecatedSource"))
    out["firstTimestamp"] = or_zero(event.get("deprecatedFirstTimestamp"), None)
    out["lastTimestamp"] = or_zero(event.get("deprecatedLastTimestamp"), None)
    put_omitempty(out, "count", event.get("deprecatedCount"))
    put_omitempty(out, "type", event.get("type"))
    out["eventTime"] = or_zero(event.get("eventTime"), None)
    series = event.get("series")
    if isinstance(series, dict):
        # core/v1 EventSeries: count is omitempty, lastObservedTime is a struct (always written).
        core_series: JSONDict = {}
        put_omitempty(core_series, "count", series.get("count"))
        core_series["lastObservedTime"] = or_zero(series.get("lastObservedTime"), None)
        out["series"] = core_series
    put_omitempty(out, "action", event.get("action"))
    if isinstance(event.get("related"), dict):
        out["related"] = _object_reference(event["related"])
    # No omitempty on these two core fields.
    out["reportingComponent"] = or_zero(event.get("reportingController"), "")
    out["reportingInstance"] = or_zero(event.get("reportingInstance"), "")
    return out
