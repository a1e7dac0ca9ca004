"""Discovery ordering of API groups and versions: kube-apiserver's priority table and sorts.

The logic lives in the shared library (``genericapi.apimachinery.apipriorities``) because the
aggregator registers built-in APIServices with the same priorities; this module keeps core-api's
names for it.
"""

from __future__ import annotations

from genericapi.apimachinery.apipriorities import (
    AGGREGATED_DEFAULT_PRIORITY,
    CRD_PRIORITY,
    GROUP_PRIORITIES,
    GroupVersion,
    Priority,
    compare_kube_aware_versions,
    priorities_for,
    sort_group_versions,
    sort_versions_by_kube_priority,
)

__all__ = [
    "AGGREGATED_DEFAULT_PRIORITY",
    "CRD_PRIORITY",
    "GROUP_PRIORITIES",
    "GroupVersion",
    "Priority",
    "compare_kube_aware_versions",
    "priorities_for",
    "sort_group_versions",
    "sort_versions_by_kube_priority",
]
