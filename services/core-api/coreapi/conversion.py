"""Served versions that are views of another version's storage, and how to convert between them.

kube-apiserver stores some resources once and serves them under several API versions:
``events.k8s.io/v1`` Events are core ``v1`` Events in etcd, and ``autoscaling/v1``
HorizontalPodAutoscalers are stored as ``autoscaling/v2``. Reading through such a version
converts from the stored object; writing converts to it. :data:`CONVERSIONS` tells the
registry which served (group, version, plural) is such a view and gives the two functions.

Every function is pure: it takes a JSON dict, never mutates it, and returns a new dict whose
``apiVersion``/``kind`` are those of the target version. Metadata is shared unchanged,
except the HPA round-trip annotations, which exist only in the ``autoscaling/v1`` view.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coreapi.conversion_events import event_core_to_events_v1, event_events_v1_to_core
from coreapi.conversion_hpa import hpa_v1_to_v2, hpa_v2_to_v1

ObjectConverter = Callable[[dict[str, Any]], dict[str, Any]]

#: served (group, version, plural) -> (storage group, storage version, to_storage, from_storage)
CONVERSIONS: dict[tuple[str, str, str], tuple[str, str, ObjectConverter, ObjectConverter]] = {
    ("events.k8s.io", "v1", "events"): ("", "v1", event_events_v1_to_core, event_core_to_events_v1),
    ("autoscaling", "v1", "horizontalpodautoscalers"): ("autoscaling", "v2", hpa_v1_to_v2, hpa_v2_to_v1),
}


def storage_conversion(
    group: str, version: str, plural: str
) -> tuple[str, str, ObjectConverter, ObjectConverter] | None:
    """The conversion entry of a served resource, or None when it is stored as served."""
    return CONVERSIONS.get((group, version, plural))


__all__ = [
    "CONVERSIONS",
    "ObjectConverter",
    "event_core_to_events_v1",
    "event_events_v1_to_core",
    "hpa_v1_to_v2",
    "hpa_v2_to_v1",
    "storage_conversion",
]
