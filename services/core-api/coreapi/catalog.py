"""core-api's catalog of built-in resources: the single table discovery, routing and storage read.

Kubernetes keeps this knowledge spread over its registry packages; kubechain keeps it as data.
Every row is a ``ResourceInfo`` describing one resource at one group-version exactly as a
Kubernetes 1.33 kube-apiserver's discovery reports it (kind, plural, singular, scope, short
names, categories, verbs, subresources, storage version hash). The rows live in
``catalog_core`` (``/api/v1``) and ``catalog_groups`` (``/apis/...``); discovery ordering
lives in ``catalog_priorities``. This module joins them and answers look-ups.

Resources without objects of their own (``componentstatuses``, ``bindings``, ``pods/binding``,
``pods/eviction``, the ``authorization.k8s.io`` reviews) have their rows in ``catalog_nodeless``.
The connect subresources (``pods/log``, ``exec``, ``attach``, ``portforward``, ``proxy``,
``nodes/proxy``, ``services/proxy``) are named on their rows with kinds and verbs from
``catalog_connect``. Not served here (yet): ``tokenreviews``, ``serviceaccounts/token``,
``pods/ephemeralcontainers`` and ``pods/resize``.
"""

from __future__ import annotations

from genericapi.apimachinery.resources import ResourceInfo

from coreapi.catalog_build import (
    BUILTIN_SCALE_PATHS,
    STORAGE_GROUP_KEY,
    STORAGE_VERSION_HASH_KEY,
    STORAGE_VERSION_KEY,
    storage_version_hash,
)
from coreapi.catalog_core import CORE_V1_RESOURCES
from coreapi.catalog_groups import GROUP_RESOURCES
from coreapi.catalog_nodeless import AUTHORIZATION_V1_RESOURCES, CORE_V1_NODELESS
from coreapi.catalog_priorities import (
    GROUP_PRIORITIES,
    GroupVersion,
    compare_kube_aware_versions,
    priorities_for,
    sort_group_versions,
)

__all__ = [
    "BUILTIN_RESOURCES",
    "BUILTIN_SCALE_PATHS",
    "GROUP_PRIORITIES",
    "STORAGE_VERSION_HASH_KEY",
    "compare_kube_aware_versions",
    "find_resource",
    "find_resource_by_kind",
    "ordered_group_versions",
    "resources_in",
    "served_group_versions",
    "storage_group_version",
    "storage_version_hash",
]

#: Every built-in resource core-api serves, core group first, then the named groups.
BUILTIN_RESOURCES: tuple[ResourceInfo, ...] = (
    *CORE_V1_RESOURCES, *CORE_V1_NODELESS, *GROUP_RESOURCES, *AUTHORIZATION_V1_RESOURCES)

_BY_PLURAL: dict[tuple[str, str, str], ResourceInfo] = {
    (info.group, info.version, info.plural): info for info in BUILTIN_RESOURCES
}
_BY_KIND: dict[tuple[str, str, str], ResourceInfo] = {
    (info.group, info.version, info.kind): info for info in BUILTIN_RESOURCES
}


def find_resource(group: str, version: str, plural: str) -> ResourceInfo | None:
    """The built-in resource served at ``group/version/plural`` (``""`` for core), if any."""
    return _BY_PLURAL.get((group, version, plural))


def find_resource_by_kind(group: str, version: str, kind: str) -> ResourceInfo | None:
    """The built-in resource whose objects are ``kind`` at ``group/version``, if any."""
    return _BY_KIND.get((group, version, kind))


def resources_in(group: str, version: str) -> tuple[ResourceInfo, ...]:
    """The built-in resources of one group-version, in catalog order (empty if not served)."""
    return tuple(info for info in BUILTIN_RESOURCES if (info.group, info.version) == (group, version))


def served_group_versions() -> list[GroupVersion]:
    """Every group-version with at least one built-in resource (core ``("", "v1")`` included)."""
    return list(dict.fromkeys((info.group, info.version) for info in BUILTIN_RESOURCES))


def storage_group_version(info: ResourceInfo) -> GroupVersion:
    """The group-version objects of ``info`` are persisted as (decides the storage hash).

    Two rows with the same answer and kind are one set of objects seen through two APIs
    (core and events.k8s.io Events; autoscaling v1 and v2 HorizontalPodAutoscalers).
    """
    return info.extra.get(STORAGE_GROUP_KEY, info.group), info.extra.get(STORAGE_VERSION_KEY, info.version)


def ordered_group_versions(
    group_versions: list[GroupVersion] | None = None,
    *,
    aggregated: bool = False,
) -> list[GroupVersion]:
    """Named group-versions in the order kube-apiserver's ``/apis`` lists them.

    By default, the built-in named groups core-api serves (the core group lives at ``/api``
    and is left out). Pass ``group_versions`` to order another set, e.g. merged with other
    services' groups; unregistered ones get the aggregated-discovery default priority.
    ``aggregated=True`` applies aggregated discovery's tie-break instead (see
    ``catalog_priorities``).
    """
    if group_versions is None:
        group_versions = [gv for gv in served_group_versions() if gv[0]]
    return sort_group_versions(priorities_for(group_versions), aggregated=aggregated)
