"""Discovery ordering of API groups and versions, the way kube-apiserver 1.33 orders them.

Shared: core-api orders its own discovery with it, and the aggregator registers the built-in
APIServices with these priorities and orders merged discovery by them.

kube-apiserver registers a local APIService for each built-in group-version with a fixed
``groupPriorityMinimum`` and ``versionPriority`` (the table below, kube's
``apiVersionPriorities``: the generic control-plane groups merged with the kube-only ones).
Discovery then orders by those numbers:

``/apis`` (legacy ``APIGroupList``, kube-aggregator ``SortedByGroupAndVersion``)
    All APIServices are sorted by ``groupPriorityMinimum`` descending, ties broken by the
    APIService name ``<version>.<group>`` ascending; a group takes the position of its first
    APIService in that order (so effectively its highest priority). Inside a group, versions
    sort by ``versionPriority`` descending, ties broken by kube-aware version order
    (GA > beta > alpha, then higher major, then higher minor; non-kube-looking names last,
    alphabetically). The first version listed is the group's preferred version.
    The aggregator puts its own ``apiregistration.k8s.io`` group first, outside the sort.

Aggregated discovery (``apidiscovery.k8s.io/v2``)
    The same, except a group's priority is the maximum ``groupPriorityMinimum`` over its
    versions and ties are broken by the *group* name; a group-version without a registered
    priority counts as (1000, 15).

CRD group-versions get (1000, 100) from kube's CRD registration controller; that is the
caller's input, not part of this table.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping

GroupVersion = tuple[str, str]
Priority = tuple[int, int]

#: (group, version) -> (groupPriorityMinimum, versionPriority), as kube-apiserver 1.33 registers.
GROUP_PRIORITIES: dict[GroupVersion, Priority] = {
    ("", "v1"): (18000, 1),
    ("apps", "v1"): (17800, 15),
    ("events.k8s.io", "v1"): (17750, 15),
    ("events.k8s.io", "v1beta1"): (17750, 5),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authentication.k8s.io", "v1beta1"): (17700, 9),
    ("authentication.k8s.io", "v1alpha1"): (17700, 1),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("autoscaling", "v2"): (17500, 30),
    ("autoscaling", "v1"): (17500, 15),
    ("autoscaling", "v2beta1"): (17500, 9),
    ("autoscaling", "v2beta2"): (17500, 1),
    ("batch", "v1"): (17400, 15),
    ("batch", "v1beta1"): (17400, 9),
    ("batch", "v2alpha1"): (17400, 9),
    ("certificates.k8s.io", "v1"): (17300, 15),
    ("certificates.k8s.io", "v1beta1"): (17300, 9),
    ("certificates.k8s.io", "v1alpha1"): (17300, 1),
    ("networking.k8s.io", "v1"): (17200, 15),
    ("networking.k8s.io", "v1beta1"): (17200, 9),
    ("policy", "v1"): (17100, 15),
    ("policy", "v1beta1"): (17100, 9),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("storage.k8s.io", "v1"): (16800, 15),
    ("storage.k8s.io", "v1beta1"): (16800, 9),
    ("storage.k8s.io", "v1alpha1"): (16800, 1),
    ("apiextensions.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1beta1"): (16700, 12),
    ("admissionregistration.k8s.io", "v1alpha1"): (16700, 9),
    ("scheduling.k8s.io", "v1"): (16600, 15),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("coordination.k8s.io", "v1beta1"): (16500, 13),
    ("coordination.k8s.io", "v1alpha2"): (16500, 12),
    ("node.k8s.io", "v1"): (16300, 15),
    ("node.k8s.io", "v1beta1"): (16300, 9),
    ("node.k8s.io", "v1alpha1"): (16300, 1),
    ("discovery.k8s.io", "v1"): (16200, 15),
    ("discovery.k8s.io", "v1beta1"): (16200, 12),
    ("resource.k8s.io", "v1beta2"): (16200, 15),
    ("resource.k8s.io", "v1beta1"): (16200, 9),
    ("resource.k8s.io", "v1alpha3"): (16200, 1),
    ("flowcontrol.apiserver.k8s.io", "v1"): (16100, 21),
    ("flowcontrol.apiserver.k8s.io", "v1beta3"): (16100, 18),
    ("flowcontrol.apiserver.k8s.io", "v1beta2"): (16100, 15),
    ("flowcontrol.apiserver.k8s.io", "v1beta1"): (16100, 12),
    ("flowcontrol.apiserver.k8s.io", "v1alpha1"): (16100, 9),
    ("internal.apiserver.k8s.io", "v1alpha1"): (16000, 9),
    ("storagemigration.k8s.io", "v1alpha1"): (15800, 9),
}

#: Priority aggregated discovery assumes for a group-version nobody registered a priority for.
AGGREGATED_DEFAULT_PRIORITY: Priority = (1000, 15)
#: Priority kube's CRD registration controller gives every CRD group-version's APIService.
CRD_PRIORITY: Priority = (1000, 100)

_KUBE_VERSION = re.compile(r"v([0-9]+)(?:(alpha|beta)([0-9]+))?")
_STABILITY_RANK = {"alpha": 0, "beta": 1, None: 2}
_GO_MAX_INT = 2**63 - 1


def _parse_kube_version(version: str) -> tuple[int, int, int] | None:
    """(stability rank, major, minor) of a kube-like version (``v1``, ``v2beta3``), else None."""
    match = _KUBE_VERSION.fullmatch(version)
    if match is None:
        return None
    major = int(match.group(1))
    minor = int(match.group(3)) if match.group(3) is not None else 0
    if major > _GO_MAX_INT or minor > _GO_MAX_INT:  # kube's integer parse would fail
        return None
    return _STABILITY_RANK[match.group(2)], major, minor


def compare_kube_aware_versions(a: str, b: str) -> int:
    """Positive when ``a`` ranks above ``b`` (kube's CompareKubeAwareVersionStrings).

    Kube-like versions rank above the rest; among them GA > beta > alpha, then the higher
    major, then the higher minor. Two non-kube names rank in *ascending* string order (the
    smaller string ranks higher), so a descending sort lists ``foo1`` before ``foo10``.
    """
    if a == b:
        return 0
    parsed_a, parsed_b = _parse_kube_version(a), _parse_kube_version(b)
    if parsed_a is None and parsed_b is None:
        return (a < b) - (a > b)
    if parsed_a is None:
        return -1
    if parsed_b is None:
        return 1
    for left, right in zip(parsed_a, parsed_b, strict=True):
        if left != right:
            return 1 if left > right else -1
    return 0


def sort_versions_by_kube_priority(versions: Iterable[str]) -> list[str]:
    """Versions from highest kube-aware rank to lowest: ``v2, v1, v1beta1, v1alpha1, foo``."""
    return sorted(versions, key=functools.cmp_to_key(compare_kube_aware_versions), reverse=True)


def _version_order(
    versions: Iterable[GroupVersion], priorities: Mapping[GroupVersion, Priority]
) -> list[str]:
    def compare(a: GroupVersion, b: GroupVersion) -> int:
        priority_a, priority_b = priorities[a][1], priorities[b][1]
        if priority_a != priority_b:
            return -1 if priority_a > priority_b else 1
        return -compare_kube_aware_versions(a[1], b[1])

    return [version for _, version in sorted(versions, key=functools.cmp_to_key(compare))]


def sort_group_versions(
    priorities: Mapping[GroupVersion, Priority],
    *,
    aggregated: bool = False,
) -> list[GroupVersion]:
    """Group-versions in discovery order: groups by priority, each group's versions together.

    ``priorities`` holds every group-version to list. ``aggregated=False`` follows ``/apis``
    (ties between groups broken by APIService name ``<version>.<group>``); ``True`` follows
    aggregated discovery (ties broken by group name). See the module docstring.
    """
    by_group: dict[str, list[GroupVersion]] = {}
    for group_version in priorities:
        by_group.setdefault(group_version[0], []).append(group_version)

    if aggregated:
        group_rank = {
            group: (-max(priorities[gv][0] for gv in members), group) for group, members in by_group.items()
        }
        group_order = sorted(by_group, key=group_rank.__getitem__)
    else:
        apiservices = sorted(priorities, key=lambda gv: (-priorities[gv][0], f"{gv[1]}.{gv[0]}"))
        group_order = list(dict.fromkeys(group for group, _ in apiservices))

    return [
        (group, version) for group in group_order for version in _version_order(by_group[group], priorities)
    ]


def priorities_for(
    group_versions: Iterable[GroupVersion],
    *,
    table: Mapping[GroupVersion, Priority] = GROUP_PRIORITIES,
    default: Priority = AGGREGATED_DEFAULT_PRIORITY,
) -> dict[GroupVersion, Priority]:
    """The registered priority of each group-version, ``default`` for unregistered ones."""
    return {gv: table.get(gv, default) for gv in group_versions}
