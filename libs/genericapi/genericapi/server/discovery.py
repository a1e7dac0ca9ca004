"""Discovery documents derived from the served resources: legacy and aggregated (v2, v2beta1).

Everything here is computed from ``ResourceInfo`` values, so routes and discovery cannot
disagree. Documents are built once per change of the served set and kept as bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from genericapi.apimachinery.resources import ResourceInfo

SUBRESOURCE_VERBS = ("get", "patch", "update")
#: Subresources served with other verbs: kube registers ``namespaces/finalize`` for PUT only.
_SUBRESOURCE_VERBS_BY_NAME: dict[str, tuple[str, ...]] = {"finalize": ("update",)}
AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"

#: (group, version) -> sort key; lower sorts first.
OrderFn = Callable[[str, str], tuple[Any, ...]]


def _subresource_kind(info: ResourceInfo, sub: str) -> tuple[str, str, str]:
    spec = info.subresource_spec(sub)
    if spec is not None and spec.kind:
        return (spec.group, spec.version, spec.kind)
    if sub == "scale":
        return ("autoscaling", "v1", "Scale")
    return ("", "", info.kind)


def subresource_verbs(sub: str, info: ResourceInfo | None = None) -> tuple[str, ...]:
    """The verbs a subresource is served with (routes and discovery both ask here)."""
    spec = info.subresource_spec(sub) if info is not None else None
    if spec is not None:
        return spec.verbs
    return _SUBRESOURCE_VERBS_BY_NAME.get(sub, SUBRESOURCE_VERBS)


def api_resource(info: ResourceInfo, storage_hash: str = "") -> dict[str, Any]:
    """One entry of an APIResourceList, keys in the Go struct's order."""
    out: dict[str, Any] = {"name": info.plural, "singularName": info.singular,
                           "namespaced": info.namespaced, "kind": info.kind,
                           "verbs": sorted(info.verbs)}
    if info.short_names:
        out["shortNames"] = list(info.short_names)
    if info.categories:
        out["categories"] = list(info.categories)
    if storage_hash:
        out["storageVersionHash"] = storage_hash
    return out


def api_subresource(info: ResourceInfo, sub: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f"{info.plural}/{sub}", "singularName": "", "namespaced": info.namespaced}
    group, version, kind = _subresource_kind(info, sub)
    if group:
        out["group"] = group
        out["version"] = version
    out["kind"] = kind
    out["verbs"] = sorted(subresource_verbs(sub, info))
    return out


@dataclass
class DiscoveryDocuments:
    """Every discovery document of a set of resources, encoded once."""

    resources: Sequence[ResourceInfo]
    order: OrderFn
    storage_hash: Callable[[ResourceInfo], str] = lambda _i: ""
    #: ``host:port`` clients reach the API at (``/api``'s serverAddressByClientCIDRs).
    server_address: str = ""
    by_path: dict[str, bytes] = field(default_factory=dict)
    aggregated_api: dict[str, Any] = field(default_factory=dict)
    aggregated_apis: dict[str, Any] = field(default_factory=dict)
    group_versions: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rebuild()

    def rebuild(self) -> None:
        by_gv: dict[tuple[str, str], list[ResourceInfo]] = {}
        for info in self.resources:
            by_gv.setdefault((info.group, info.version), []).append(info)
        gvs = sorted(by_gv, key=lambda gv: self.order(*gv))
        self.group_versions = gvs
        paths: dict[str, bytes] = {}
        # Per group-version resource lists.
        for (group, version), infos in by_gv.items():
            gv = f"{group}/{version}" if group else version
            resources: list[dict[str, Any]] = []
            for info in sorted(infos, key=lambda i: i.plural):
                resources.append(api_resource(info, self.storage_hash(info)))
                for sub in sorted(info.subresources):
                    resources.append(api_subresource(info, sub))
            doc = {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
            if not group:
                doc = {"kind": "APIResourceList", "groupVersion": gv, "resources": resources}
            paths[f"/api/{version}" if not group else f"/apis/{group}/{version}"] = orjson.dumps(doc)
        # Groups, in priority order; versions within a group in priority order.
        groups: dict[str, list[str]] = {}
        for group, version in gvs:
            groups.setdefault(group, []).append(version)
        group_docs = []
        for group, versions in groups.items():
            if not group:
                continue
            gdoc = self._group_doc(group, versions)
            group_docs.append(gdoc)
            paths[f"/apis/{group}"] = orjson.dumps({"kind": "APIGroup", "apiVersion": "v1", **gdoc})
        paths["/apis"] = orjson.dumps({"kind": "APIGroupList", "apiVersion": "v1", "groups": group_docs})
        if "" in groups:
            addresses = [{"clientCIDR": "0.0.0.0/0", "serverAddress": self.server_address}] \
                if self.server_address else None
            paths["/api"] = orjson.dumps({"kind": "APIVersions", "versions": groups[""],
                                          "serverAddressByClientCIDRs": addresses})
        self.by_path = paths
        self.aggregated_api = self._aggregated([("", v) for v in groups.get("", [])], by_gv)
        self.aggregated_apis = self._aggregated([(g, v) for g, v in gvs if g], by_gv)

    @staticmethod
    def _group_doc(group: str, versions: list[str]) -> dict[str, Any]:
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": entries, "preferredVersion": entries[0]}

    def _aggregated(self, gvs: Iterable[tuple[str, str]],
                    by_gv: dict[tuple[str, str], list[ResourceInfo]]) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        index: dict[str, dict[str, Any]] = {}
        for group, version in gvs:
            item = index.get(group)
            if item is None:
                meta: dict[str, Any] = {"creationTimestamp": None}
                if group:
                    meta["name"] = group
                item = {"metadata": meta, "versions": []}
                index[group] = item
                items.append(item)
            resources = [aggregated_resource(i) for i in sorted(by_gv[(group, version)], key=lambda i: i.plural)]
            item["versions"].append({"version": version, "resources": resources, "freshness": "Current"})
        return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
                "items": items}


def aggregated_resource(info: ResourceInfo) -> dict[str, Any]:
    out: dict[str, Any] = {
        "resource": info.plural,
        "responseKind": {"group": "", "version": "", "kind": info.kind},
        "scope": "Namespaced" if info.namespaced else "Cluster",
        "singularResource": info.singular,
        "verbs": sorted(info.verbs),
    }
    if info.short_names:
        out["shortNames"] = list(info.short_names)
    if info.categories:
        out["categories"] = list(info.categories)
    subs = []
    for sub in sorted(info.subresources):
        group, version, kind = _subresource_kind(info, sub)
        subs.append({"subresource": sub, "responseKind": {"group": group, "version": version, "kind": kind},
                     "verbs": sorted(subresource_verbs(sub, info))})
    if subs:
        out["subresources"] = subs
    return out


def aggregated_body(doc: dict[str, Any], version: str) -> bytes:
    """The aggregated document at ``v2`` or ``v2beta1`` (same shape, different apiVersion)."""
    if version == "v2beta1":
        doc = {**doc, "apiVersion": "apidiscovery.k8s.io/v2beta1"}
    return orjson.dumps(doc)


def wants_aggregated(accept: str) -> str:
    """``v2``/``v2beta1`` when the Accept header asks for aggregated discovery, else ``""``."""
    if "apidiscovery.k8s.io" not in accept or "APIGroupDiscoveryList" not in accept:
        return ""
    for part in accept.split(","):
        params = {p.split("=", 1)[0].strip(): p.split("=", 1)[1].strip()
                  for p in part.split(";")[1:] if "=" in p}
        if params.get("g") == "apidiscovery.k8s.io" and params.get("as") == "APIGroupDiscoveryList":
            if params.get("v") in ("v2", "v2beta1"):
                return params["v"]
    return ""
