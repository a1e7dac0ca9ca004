"""The built-in resource catalog against real kube-apiserver discovery and the 1.33 schemas.

Reference discovery documents live in the shared directory (``KUBECHAIN_SHARED_DIR``, by default
``../shared`` beside the repository). They were captured from several Kubernetes releases
(about 1.31 to 1.35), so where they describe something newer than 1.33 the differences are
listed here explicitly and the 1.33 schema decides.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from coreapi.catalog import (
    BUILTIN_RESOURCES,
    BUILTIN_SCALE_PATHS,
    GROUP_PRIORITIES,
    STORAGE_VERSION_HASH_KEY,
    compare_kube_aware_versions,
    find_resource,
    find_resource_by_kind,
    ordered_group_versions,
    resources_in,
    served_group_versions,
    storage_group_version,
    storage_version_hash,
)
from coreapi.catalog_priorities import sort_group_versions, sort_versions_by_kube_priority
from genericapi.apimachinery.resources import STANDARD_VERBS, ResourceInfo
from support.reference import DISCOVERY_DIR

#: Subresources the catalog models; the reference's others (ephemeralcontainers, resize, token...) are not served.
MODELLED_SUBRESOURCES = {"status", "scale", "approval", "finalize", "binding", "eviction",
                         "attach", "exec", "log", "portforward", "proxy", "token"}

#: Reference facts newer than 1.33, replaced by what 1.33 serves.
#: HPA joined the "podautoscalers" category long after 1.33.
NEWER_THAN_133: dict[tuple[str, str, str], dict[str, Any]] = {
    ("autoscaling", "v2", "horizontalpodautoscalers"): {"categories": ("all",)},
}

#: Resources GA in 1.33 that the reference only has at an older version (same resource).
REFERENCE_FALLBACK_VERSION = {("networking.k8s.io", "v1"): "v1beta1"}

#: Resources a reference group-version lists that core-api deliberately does not serve.
NOT_SERVED: set[tuple[str, str, str]] = set()

#: Kinds with a 1.33 schema in a served group-version that are not catalog resources.
SCHEMA_KINDS_NOT_RESOURCES = {
    ("autoscaling", "v1", "Scale"),  # the scale subresource's body
    ("policy", "v1", "Eviction"),  # pods/eviction: create-only
}

#: apimachinery kinds every group-version carries (options, discovery, status): not resources.
META_KINDS = {
    "DeleteOptions",
    "WatchEvent",
    "Status",
    "APIGroup",
    "APIGroupList",
    "APIResourceList",
    "APIVersions",
}

#: Reference storage hashes captured from a release that stored the resource in another
#: version than 1.33 does, mapped to that other (group, version). The 1.33 values are checked
#: separately against kube's own storage-version-hash test data (see below).
REFERENCE_HASH_FROM_OTHER_RELEASE: dict[tuple[str, str, str], tuple[str, str]] = {
    # captured before EndpointSlice storage moved to v1
    ("discovery.k8s.io", "v1", "endpointslices"): ("discovery.k8s.io", "v1beta1"),
    # captured while flow control was still stored as v1beta3
    ("flowcontrol.apiserver.k8s.io", "v1", "flowschemas"): ("flowcontrol.apiserver.k8s.io", "v1beta3"),
    ("flowcontrol.apiserver.k8s.io", "v1", "prioritylevelconfigurations"): (
        "flowcontrol.apiserver.k8s.io",
        "v1beta3",
    ),
    # captured after 1.33, once a 1.33 peer (which knows v1) made v1 storage safe
    ("networking.k8s.io", "v1", "ipaddresses"): ("networking.k8s.io", "v1"),
    ("networking.k8s.io", "v1", "servicecidrs"): ("networking.k8s.io", "v1"),
}

#: Storage version hashes a 1.33 kube-apiserver publishes for the resources above, as recorded in
#: kube's own storage-version-hash test data for that release line.
HASHES_AT_133 = {
    ("discovery.k8s.io", "v1", "endpointslices"): "qgS0xkrxYAI=",
    ("flowcontrol.apiserver.k8s.io", "v1", "flowschemas"): "GJVAJZSZBIw=",
    ("flowcontrol.apiserver.k8s.io", "v1", "prioritylevelconfigurations"): "Kir5PVfvNeI=",
    ("networking.k8s.io", "v1", "ipaddresses"): "O4H8VxQhW5Y=",
    ("networking.k8s.io", "v1", "servicecidrs"): "8ufAXOnr3Yg=",
}


# --------------------------------------------------------------------------- reference loading


@dataclass(frozen=True)
class RefResource:
    kind: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...]
    categories: tuple[str, ...]
    verbs: tuple[str, ...]
    subresources: frozenset[str]
    storage_version_hash: str | None
    lists_watch: bool  # False for the older captures that dropped "watch" everywhere


def _read_json(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def _legacy_file(group: str, version: str) -> Path:
    return DISCOVERY_DIR / ("api__v1.json" if not group else f"apis__{group}__{version}.json")


def _load_legacy(group: str, version: str) -> dict[str, RefResource]:
    path = _legacy_file(group, version)
    if not path.exists():
        return {}
    entries = _read_json(path)["resources"]
    # A group that lists nothing (the create-only authorization reviews) has nothing to watch.
    lists_watch = any("watch" in entry["verbs"] for entry in entries) or not any(
        "list" in entry["verbs"] for entry in entries
    )
    subresources: dict[str, set[str]] = {}
    for entry in entries:
        parent, _, sub = entry["name"].partition("/")
        if sub:
            subresources.setdefault(parent, set()).add(sub)
    return {
        entry["name"]: RefResource(
            kind=entry["kind"],
            singular=entry["singularName"],
            namespaced=entry["namespaced"],
            short_names=tuple(entry.get("shortNames", ())),
            categories=tuple(entry.get("categories", ())),
            verbs=tuple(entry["verbs"]),
            subresources=frozenset(subresources.get(entry["name"], ())),
            storage_version_hash=entry.get("storageVersionHash"),
            lists_watch=lists_watch,
        )
        for entry in entries
        if "/" not in entry["name"]
    }


def _load_aggregated() -> dict[tuple[str, str, str], RefResource]:
    document = _read_json(DISCOVERY_DIR / "aggregated_v2.json")
    found: dict[tuple[str, str, str], RefResource] = {}
    for group in document["items"]:
        for version in group["versions"]:
            for entry in version["resources"]:
                key = (group["metadata"]["name"], version["version"], entry["resource"])
                found[key] = RefResource(
                    kind=entry["responseKind"]["kind"],
                    singular=entry["singularResource"],
                    namespaced=entry["scope"] == "Namespaced",
                    short_names=tuple(entry.get("shortNames", ())),
                    categories=tuple(entry.get("categories", ())),
                    verbs=tuple(entry["verbs"]),
                    subresources=frozenset(s["subresource"] for s in entry.get("subresources", ())),
                    storage_version_hash=None,
                    lists_watch=True,
                )
    return found


@pytest.fixture(scope="module")
def discovery_dir() -> Path:
    if not DISCOVERY_DIR.is_dir():
        pytest.skip(
            f"reference discovery documents not found at {DISCOVERY_DIR}; "
            "set KUBECHAIN_SHARED_DIR to the shared/ directory to run this comparison"
        )
    return DISCOVERY_DIR


@pytest.fixture(scope="module")
def legacy_reference(discovery_dir: Path) -> dict[tuple[str, str], dict[str, RefResource]]:
    wanted = set(served_group_versions())
    wanted |= {
        (g, REFERENCE_FALLBACK_VERSION[(g, v)]) for g, v in wanted if (g, v) in REFERENCE_FALLBACK_VERSION
    }
    return {gv: _load_legacy(*gv) for gv in wanted}


@pytest.fixture(scope="module")
def aggregated_reference(discovery_dir: Path) -> dict[tuple[str, str, str], RefResource]:
    return _load_aggregated()


def _references_for(
    info: ResourceInfo,
    legacy: dict[tuple[str, str], dict[str, RefResource]],
    aggregated: dict[tuple[str, str, str], RefResource],
) -> list[RefResource]:
    """Reference entries for ``info``; for a kind new at this version, those of its older version."""
    fallback = REFERENCE_FALLBACK_VERSION.get((info.group, info.version))
    for version in (info.version, fallback):
        if version is None:
            continue
        found = (
            [legacy[(info.group, version)][info.plural]]
            if info.plural in legacy.get((info.group, version), {})
            else []
        )
        if (info.group, version, info.plural) in aggregated:
            found.append(aggregated[(info.group, version, info.plural)])
        if found:
            return found
    return []


def _ids(info: ResourceInfo) -> str:
    return f"{info.group_version}/{info.plural}"


# --------------------------------------------------------------------------- catalog vs reference


@pytest.mark.parametrize("info", BUILTIN_RESOURCES, ids=_ids)
def test_catalog_matches_reference_discovery(
    info: ResourceInfo,
    legacy_reference: dict[tuple[str, str], dict[str, RefResource]],
    aggregated_reference: dict[tuple[str, str, str], RefResource],
) -> None:
    references = _references_for(info, legacy_reference, aggregated_reference)
    assert references, f"{_ids(info)} appears in no reference discovery document"
    overrides = NEWER_THAN_133.get((info.group, info.version, info.plural), {})
    for ref in references:
        assert info.kind == ref.kind
        assert info.singular == ref.singular
        assert info.namespaced == ref.namespaced
        assert info.short_names == ref.short_names
        assert info.categories == overrides.get("categories", ref.categories)
        expected_verbs = set(ref.verbs) if ref.lists_watch else set(ref.verbs) | {"watch"}
        assert set(info.verbs) == expected_verbs
        assert set(info.subresources) == ref.subresources & MODELLED_SUBRESOURCES


@pytest.mark.parametrize("info", BUILTIN_RESOURCES, ids=_ids)
def test_storage_version_hash_matches_reference(
    info: ResourceInfo, legacy_reference: dict[tuple[str, str], dict[str, RefResource]]
) -> None:
    hashes = [
        ref.storage_version_hash
        for ref in _references_for(info, legacy_reference, {})
        if ref.storage_version_hash is not None
    ]
    if STORAGE_VERSION_HASH_KEY not in info.extra:
        # Nothing stored (componentstatuses, bindings, the reviews): kube publishes no hash either.
        assert hashes == [], f"{_ids(info)} has a reference storageVersionHash"
        return
    assert hashes, f"no reference storageVersionHash for {_ids(info)}"
    ours = info.extra[STORAGE_VERSION_HASH_KEY]
    other_release = REFERENCE_HASH_FROM_OTHER_RELEASE.get((info.group, info.version, info.plural))
    if other_release is None:
        assert ours in hashes
    else:
        # The reference differs only because its release stored the kind in another version.
        assert hashes == [storage_version_hash(*other_release, info.kind)]
        assert ours != hashes[0]


@pytest.mark.parametrize(("key", "expected"), sorted(HASHES_AT_133.items()))
def test_storage_version_hash_at_133(key: tuple[str, str, str], expected: str) -> None:
    info = find_resource(*key)
    assert info is not None
    assert info.extra[STORAGE_VERSION_HASH_KEY] == expected


def test_every_reference_resource_of_a_served_group_version_is_served_or_excused(
    legacy_reference: dict[tuple[str, str], dict[str, RefResource]], schema_kinds: set[tuple[str, str, str]]
) -> None:
    served = {(info.group, info.version, info.plural) for info in BUILTIN_RESOURCES}
    for group, version in served_group_versions():
        for plural, ref in legacy_reference[(group, version)].items():
            key = (group, version, plural)
            if key in served or key in NOT_SERVED:
                continue
            # Anything else must be newer than 1.33, which the 1.33 schema shows.
            assert (group, version, ref.kind) not in schema_kinds, f"{key} exists in 1.33 but is not served"


def test_reference_newer_than_133_overrides_are_still_needed(
    legacy_reference: dict[tuple[str, str], dict[str, RefResource]],
) -> None:
    for (group, version, plural), fields in NEWER_THAN_133.items():
        ref = legacy_reference[(group, version)][plural]
        assert ref.categories != fields["categories"], f"drop the stale override for {plural}"


# --------------------------------------------------------------------------- catalog vs 1.33 schema


@pytest.fixture(scope="module")
def schema_kinds() -> set[tuple[str, str, str]]:
    package = importlib.resources.files("kubernetes_validate")
    definitions = package / "kubernetes-json-schema" / "v1.33.0-local" / "_definitions.json"
    kinds: set[tuple[str, str, str]] = set()
    for schema in orjson.loads(definitions.read_bytes())["$defs"].values():
        for gvk in schema.get("x-kubernetes-group-version-kind", ()):
            kinds.add((gvk["group"], gvk["version"], gvk["kind"]))
    return kinds


def test_every_catalog_kind_has_a_133_schema(schema_kinds: set[tuple[str, str, str]]) -> None:
    missing = [_ids(i) for i in BUILTIN_RESOURCES if (i.group, i.version, i.kind) not in schema_kinds]
    assert missing == []


def test_every_133_kind_of_a_served_group_version_is_catalogued(
    schema_kinds: set[tuple[str, str, str]],
) -> None:
    served_gvs = set(served_group_versions())
    uncatalogued = {
        (group, version, kind)
        for group, version, kind in schema_kinds
        if (group, version) in served_gvs
        and not kind.endswith("List")
        and find_resource_by_kind(group, version, kind) is None
    }
    uncatalogued = {gvk for gvk in uncatalogued if gvk[2] not in META_KINDS}
    assert uncatalogued == SCHEMA_KINDS_NOT_RESOURCES


# --------------------------------------------------------------------------- catalog shape


def test_rows_are_unique_by_plural_and_by_kind() -> None:
    assert len({(i.group, i.version, i.plural) for i in BUILTIN_RESOURCES}) == len(BUILTIN_RESOURCES)
    assert len({(i.group, i.version, i.kind) for i in BUILTIN_RESOURCES}) == len(BUILTIN_RESOURCES)


def test_short_names_are_unique_within_a_group_version() -> None:
    for group, version in served_group_versions():
        names = [n for info in resources_in(group, version) for n in (info.plural, *info.short_names)]
        assert len(names) == len(set(names)), (group, version)


def test_all_category_is_what_kubectl_get_all_shows() -> None:
    in_all = {info.qualified_resource for info in BUILTIN_RESOURCES if "all" in info.categories}
    assert in_all == {
        "pods",
        "services",
        "replicationcontrollers",
        "daemonsets.apps",
        "deployments.apps",
        "replicasets.apps",
        "statefulsets.apps",
        "jobs.batch",
        "cronjobs.batch",
        "horizontalpodautoscalers.autoscaling",
    }


def test_scale_paths_accompany_exactly_the_scale_subresource() -> None:
    scalable = {info.qualified_resource for info in BUILTIN_RESOURCES if "scale" in info.subresources}
    assert scalable == {"replicationcontrollers", "deployments.apps", "replicasets.apps", "statefulsets.apps"}
    for info in BUILTIN_RESOURCES:
        expected = BUILTIN_SCALE_PATHS if "scale" in info.subresources else None
        assert info.scale_paths == expected, _ids(info)
    assert BUILTIN_SCALE_PATHS == (".spec.replicas", ".status.replicas", ".spec.selector")


def test_verbs_are_standard_and_sorted_like_discovery() -> None:
    for info in BUILTIN_RESOURCES:
        assert list(info.verbs) == sorted(info.verbs), _ids(info)
        assert set(info.verbs) <= set(STANDARD_VERBS)
    assert "deletecollection" not in find_resource("", "v1", "namespaces").verbs  # type: ignore[union-attr]
    assert find_resource("", "v1", "pods").verbs == STANDARD_VERBS  # type: ignore[union-attr]


def test_csr_has_approval_and_status_subresources() -> None:
    csr = find_resource("certificates.k8s.io", "v1", "certificatesigningrequests")
    assert csr is not None
    assert set(csr.subresources) == {"approval", "status"}
    assert not csr.namespaced


def test_lookups() -> None:
    pod = find_resource("", "v1", "pods")
    assert pod is not None and pod.kind == "Pod" and pod.namespaced
    assert find_resource_by_kind("apps", "v1", "Deployment") is find_resource("apps", "v1", "deployments")
    assert find_resource("", "v1", "Pod") is None  # plural, not kind
    assert find_resource("apps", "v1beta1", "deployments") is None
    assert find_resource("nope.example.com", "v1", "widgets") is None
    assert resources_in("nope.example.com", "v1") == ()
    assert {i.plural for i in resources_in("autoscaling", "v1")} == {"horizontalpodautoscalers"}
    assert ("", "v1") in served_group_versions()


def test_newly_ga_networking_kinds_are_served_at_v1() -> None:
    for plural, kind in (("ipaddresses", "IPAddress"), ("servicecidrs", "ServiceCIDR")):
        info = find_resource("networking.k8s.io", "v1", plural)
        assert info is not None and info.kind == kind and not info.namespaced


# --------------------------------------------------------------------------- storage versions


def test_storage_version_hash_known_values() -> None:
    assert storage_version_hash("", "v1", "ConfigMap") == "qFsyl6wFWjQ="
    assert storage_version_hash("apps", "v1", "Deployment") == "8aSe+NMegvE="
    assert storage_version_hash("autoscaling", "v2", "HorizontalPodAutoscaler") == "qwQve8ut294="
    # every input part matters
    assert storage_version_hash("", "v1", "Event") != storage_version_hash("events.k8s.io", "v1", "Event")
    assert storage_version_hash("", "v1", "Pod") != storage_version_hash("", "v2", "Pod")
    assert storage_version_hash("", "v1", "Pod") != storage_version_hash("", "v1", "pod")


def test_storage_version_hash_shape_for_odd_input() -> None:
    for group, version, kind in (("", "", ""), ("ünïcode.example", "v1", "Ding"), ("g", "v", "K" * 1000)):
        value = storage_version_hash(group, version, kind)
        assert len(value) == 12 and value.endswith("=")


def test_cohabiting_resources_share_storage() -> None:
    core_event = find_resource("", "v1", "events")
    events_event = find_resource("events.k8s.io", "v1", "events")
    assert core_event is not None and events_event is not None
    assert storage_group_version(events_event) == ("", "v1") == storage_group_version(core_event)
    assert events_event.extra[STORAGE_VERSION_HASH_KEY] == core_event.extra[STORAGE_VERSION_HASH_KEY]
    hpa_v1 = find_resource("autoscaling", "v1", "horizontalpodautoscalers")
    assert hpa_v1 is not None and storage_group_version(hpa_v1) == ("autoscaling", "v2")
    deployment = find_resource("apps", "v1", "deployments")
    assert deployment is not None and storage_group_version(deployment) == ("apps", "v1")
    ip_address = find_resource("networking.k8s.io", "v1", "ipaddresses")
    assert ip_address is not None and storage_group_version(ip_address) == ("networking.k8s.io", "v1beta1")


# --------------------------------------------------------------------------- discovery ordering


def test_every_served_group_version_has_a_priority() -> None:
    assert [gv for gv in served_group_versions() if gv not in GROUP_PRIORITIES] == []


def _reference_group_order(
    group_names: list[str], versions_of: dict[str, list[str]]
) -> list[tuple[str, str]]:
    served = set(served_group_versions())
    return [(g, v) for g in group_names for v in versions_of[g] if (g, v) in served]


def test_apis_order_matches_reference(discovery_dir: Path) -> None:
    groups = _read_json(discovery_dir / "apis.json")["groups"]
    names = [g["name"] for g in groups]
    versions_of = {g["name"]: [v["version"] for v in g["versions"]] for g in groups}
    assert ordered_group_versions() == _reference_group_order(names, versions_of)
    for group in groups:  # the preferred version is the first one listed
        assert group["preferredVersion"]["version"] == versions_of[group["name"]][0]


def test_aggregated_order_matches_reference(discovery_dir: Path) -> None:
    items = _read_json(discovery_dir / "aggregated_v2.json")["items"]
    names = [item["metadata"]["name"] for item in items]
    versions_of = {item["metadata"]["name"]: [v["version"] for v in item["versions"]] for item in items}
    assert ordered_group_versions(aggregated=True) == _reference_group_order(names, versions_of)


def test_order_excludes_core_and_puts_autoscaling_v2_first() -> None:
    order = ordered_group_versions()
    assert ("", "v1") not in order
    assert order[0] == ("apps", "v1")
    assert order.index(("autoscaling", "v2")) + 1 == order.index(("autoscaling", "v1"))


def test_unregistered_group_versions_sort_after_builtins() -> None:
    order = ordered_group_versions([("apps", "v1"), ("stable.example.com", "v1"), ("policy", "v1")])
    assert order == [("apps", "v1"), ("policy", "v1"), ("stable.example.com", "v1")]
    assert ordered_group_versions([]) == []


def test_group_tie_breaks_differ_between_apis_and_aggregated() -> None:
    priorities = {("a.example", "v2"): (100, 15), ("b.example", "v1"): (100, 15)}
    # /apis breaks ties by APIService name: "v1.b.example" < "v2.a.example"
    assert sort_group_versions(priorities) == [("b.example", "v1"), ("a.example", "v2")]
    # aggregated discovery breaks ties by group name
    assert sort_group_versions(priorities, aggregated=True) == [("a.example", "v2"), ("b.example", "v1")]


def test_group_position_follows_its_highest_priority_version() -> None:
    priorities = {
        ("low.example", "v1"): (50, 15),
        ("mixed.example", "v1alpha1"): (10, 1),
        ("mixed.example", "v1"): (90, 15),
    }
    for aggregated in (False, True):
        assert sort_group_versions(priorities, aggregated=aggregated) == [
            ("mixed.example", "v1"),
            ("mixed.example", "v1alpha1"),
            ("low.example", "v1"),
        ]


def test_versions_with_equal_priority_use_kube_aware_order() -> None:
    priorities = {("x.example", v): (100, 15) for v in ("v1beta1", "v2", "v1", "v10alpha1", "foo")}
    assert [v for _, v in sort_group_versions(priorities)] == ["v2", "v1", "v1beta1", "v10alpha1", "foo"]


def test_kube_aware_version_order() -> None:
    expected = [
        "v10",
        "v2",
        "v1",
        "v11beta2",
        "v10beta3",
        "v3beta1",
        "v12alpha1",
        "v11alpha2",
        "foo1",
        "foo10",
    ]
    assert sort_versions_by_kube_priority(reversed(expected)) == expected
    assert compare_kube_aware_versions("v1", "v1") == 0
    assert compare_kube_aware_versions("v1", "v2beta1") > 0
    assert compare_kube_aware_versions("v1beta1", "v1alpha9") > 0
    assert compare_kube_aware_versions("v1alpha", "v1alpha1") < 0  # no minor number: not kube-like
    assert compare_kube_aware_versions("V1", "v1") < 0  # upper case is not kube-like
    assert compare_kube_aware_versions("v1\n", "v1") < 0  # trailing newline is not kube-like
    assert compare_kube_aware_versions("v\u0661", "v1") < 0  # only ASCII digits count
    assert compare_kube_aware_versions("v" + "9" * 30, "v1") < 0  # overflows kube's int parse
