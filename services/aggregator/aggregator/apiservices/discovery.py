"""Discovery with APIServices: ``/apis`` ordered by their priorities, service-backed groups included.

As kube-aggregator: the legacy ``APIGroupList`` is built from the APIService objects (the
aggregator's own group first, then groups by ``groupPriorityMinimum`` descending, ties by
APIService name; versions by ``versionPriority`` then kube-aware version order); aggregated
discovery (``apidiscovery.k8s.io/v2``) takes local groups from the members' documents and fetches
a service-backed group-version's resources from its backend (its aggregated ``/apis`` when it
offers one, else ``/apis/<group>/<version>`` converted), keeping the last answer as ``Stale``
while the backend is unavailable. ``/apis/<group>`` of a group with a service-backed version is
answered from the APIServices too.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterable
from typing import Any

import orjson
from genericapi.apimachinery.apipriorities import AGGREGATED_DEFAULT_PRIORITY, compare_kube_aware_versions

from .routes import ServiceRoute, ServiceRoutes
from .types import name_of, priorities, spec

log = logging.getLogger(__name__)

AGGREGATED_ACCEPT = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                     "application/json;q=0.9")
FETCH_HEADERS = {"X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters"}


def _gv(obj: dict[str, Any]) -> tuple[str, str]:
    s = spec(obj)
    return str(s.get("group") or ""), str(s.get("version") or "")


def sorted_by_group_and_version(apiservices: Iterable[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """kube's ``SortedByGroupAndVersion``: groups in APIService priority order, each sorted by version."""
    ordered = sorted(apiservices, key=lambda o: (-priorities(o)[0], name_of(o)))
    groups: dict[str, list[dict[str, Any]]] = {}
    for obj in ordered:
        groups.setdefault(_gv(obj)[0], []).append(obj)

    def by_version(a: dict[str, Any], b: dict[str, Any]) -> int:
        pa, pb = priorities(a)[1], priorities(b)[1]
        if pa != pb:
            return -1 if pa > pb else 1
        return -compare_kube_aware_versions(_gv(a)[1], _gv(b)[1])

    return [sorted(members, key=functools.cmp_to_key(by_version)) for members in groups.values()]


def group_entry(members: list[dict[str, Any]]) -> dict[str, Any]:
    """A legacy ``APIGroup`` (without kind/apiVersion) from one group's sorted APIServices."""
    group = _gv(members[0])[0]
    versions = [{"groupVersion": f"{group}/{_gv(o)[1]}", "version": _gv(o)[1]} for o in members]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def legacy_apis(doc: dict[str, Any], own: dict[str, Any], apiservices: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``APIGroupList``: our group, the APIServices' groups, then any group a member lists
    that no APIService names yet (registration lags a new CRD by a moment)."""
    groups = [own]
    seen = {own["name"]}
    for members in sorted_by_group_and_version(apiservices):
        group = _gv(members[0])[0]
        if group and group not in seen:
            seen.add(group)
            groups.append(group_entry(members))
    for entry in doc.get("groups") or []:
        if isinstance(entry, dict) and entry.get("name") not in seen:
            seen.add(entry.get("name"))
            groups.append(entry)
    return {**doc, "groups": groups}


def aggregated_apis(doc: dict[str, Any], own: dict[str, Any], apiservices: list[dict[str, Any]],
                    routes: ServiceRoutes, fetched: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``APIGroupDiscoveryList`` with service-backed versions added and everything in kube's order."""
    items: dict[str, dict[str, Any]] = {}
    for item in doc.get("items") or []:
        name = (item.get("metadata") or {}).get("name", "")
        if isinstance(item, dict) and name:
            items[name] = {**item, "versions": list(item.get("versions") or [])}
    for route in routes.by_group_version.values():
        entry = fetched.get(route.name)
        if entry is None:
            continue
        entry = {**entry, "freshness": "Current" if route.available else "Stale"}
        item = items.setdefault(route.group, {"metadata": {"creationTimestamp": None, "name": route.group},
                                              "versions": []})
        item["versions"] = [v for v in item["versions"] if v.get("version") != route.version] + [entry]
    prio = {_gv(o): priorities(o) for o in apiservices}

    def version_key(group: str) -> Any:
        def compare(a: dict[str, Any], b: dict[str, Any]) -> int:
            pa = prio.get((group, a.get("version", "")), AGGREGATED_DEFAULT_PRIORITY)[1]
            pb = prio.get((group, b.get("version", "")), AGGREGATED_DEFAULT_PRIORITY)[1]
            if pa != pb:
                return -1 if pa > pb else 1
            return -compare_kube_aware_versions(a.get("version", ""), b.get("version", ""))
        return functools.cmp_to_key(compare)

    ordered = []
    for group, item in items.items():
        item["versions"] = sorted(item["versions"], key=version_key(group))
        top = max((prio.get((group, v.get("version", "")), AGGREGATED_DEFAULT_PRIORITY)[0]
                   for v in item["versions"]), default=AGGREGATED_DEFAULT_PRIORITY[0])
        ordered.append((-top, group, item))
    ordered.sort(key=lambda t: (t[0], t[1]))
    own_name = own["metadata"]["name"]
    return {**doc, "items": [own] + [item for _p, g, item in ordered if g != own_name]}


def group_document(group: str, apiservices: list[dict[str, Any]]) -> bytes | None:
    """``/apis/<group>`` from the APIServices of ``group`` (None when it has none)."""
    members = [o for o in apiservices if _gv(o)[0] == group]
    if not members:
        return None
    entry = group_entry(sorted_by_group_and_version(members)[0])
    return orjson.dumps({"kind": "APIGroup", "apiVersion": "v1", **entry})


def from_resource_list(version: str, doc: dict[str, Any]) -> dict[str, Any]:
    """A legacy ``APIResourceList`` as one version of an aggregated group (kube's converter)."""
    parents: dict[str, dict[str, Any]] = {}
    subs: list[dict[str, Any]] = []
    for r in doc.get("resources") or []:
        if not isinstance(r, dict):
            continue
        name = str(r.get("name") or "")
        if "/" in name:
            subs.append(r)
            continue
        out: dict[str, Any] = {
            "resource": name,
            "responseKind": {"group": r.get("group", ""), "version": r.get("version", ""), "kind": r.get("kind", "")},
            "scope": "Namespaced" if r.get("namespaced") else "Cluster",
            "singularResource": r.get("singularName", ""),
            "verbs": list(r.get("verbs") or []),
        }
        for key in ("shortNames", "categories"):
            if r.get(key):
                out[key] = list(r[key])
        parents[name] = out
    for r in subs:
        parent, _, sub = str(r.get("name")).partition("/")
        target = parents.get(parent)
        if target is None:
            continue
        target.setdefault("subresources", []).append({
            "subresource": sub,
            "responseKind": {"group": r.get("group", ""), "version": r.get("version", ""), "kind": r.get("kind", "")},
            "verbs": list(r.get("verbs") or []),
        })
    return {"version": version, "resources": list(parents.values()), "freshness": "Current"}


async def fetch_version(route: ServiceRoute, base: str) -> dict[str, Any] | None:
    """One service-backed group-version's aggregated entry, fetched from its backend."""
    if route.proxy is None:
        return None
    import aiohttp  # a service-backed APIService's first discovery loads it, not the start

    session = route.proxy.session(base)
    timeout = aiohttp.ClientTimeout(total=5)
    try:
        async with session.get(base + "/apis", headers={**FETCH_HEADERS, "Accept": AGGREGATED_ACCEPT},
                               timeout=timeout) as resp:
            body = await resp.read()
            if resp.status == 200 and "APIGroupDiscoveryList" in resp.headers.get("Content-Type", ""):
                for item in orjson.loads(body).get("items") or []:
                    if (item.get("metadata") or {}).get("name") == route.group:
                        for version in item.get("versions") or []:
                            if version.get("version") == route.version:
                                return dict(version)
        path = f"/apis/{route.group}/{route.version}" if route.group else f"/api/{route.version}"
        async with session.get(base + path, headers={**FETCH_HEADERS, "Accept": "application/json"},
                               timeout=timeout) as resp:
            if resp.status != 200:
                return None
            return from_resource_list(route.version, orjson.loads(await resp.read()))
    except (aiohttp.ClientError, TimeoutError, OSError, orjson.JSONDecodeError, AttributeError) as err:
        log.info("discovery of %s failed: %s", route.name, err)
        return None


async def fetch_all(routes: Iterable[tuple[ServiceRoute, str]]) -> dict[str, dict[str, Any]]:
    pairs = list(routes)
    results = await asyncio.gather(*(fetch_version(r, base) for r, base in pairs))
    return {r.name: entry for (r, _b), entry in zip(pairs, results, strict=True) if entry is not None}
