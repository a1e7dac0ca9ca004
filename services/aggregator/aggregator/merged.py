"""Documents the gateway answers by merging what every chain member serves.

``/apis`` (legacy APIGroupList and aggregated APIGroupDiscoveryList) and the ``/openapi/v3``
index list the groups of every member: core-api's built-ins and extensions-api's CRD groups,
built from the aggregated documents each member streams over the gRPC control channel
(``streamed_*``), so a CRD group appears the moment its member publishes it, without a request
to any member. Only while a member's stream has not delivered yet are the documents fetched
from the members at request time (``fetch_all``/``merge_*``). The per-group-version OpenAPI
documents are routed to the member serving that group-version.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import orjson
from genericapi.server.discovery import AGGREGATED_V2, AGGREGATED_V2BETA1, aggregated_body
from genericapi.server.proxy import ReverseProxy, http_base

from .control import MemberDiscovery


async def _get(proxy: ReverseProxy, replicas: Sequence[str], path: str,
               accept: str) -> tuple[int, str, bytes] | None:
    import aiohttp  # only while a member's stream has not delivered: off the start path

    for base in replicas:
        try:
            async with proxy.session(base).get(http_base(base) + path, headers={"Accept": accept} if accept else {},
                                               timeout=aiohttp.ClientTimeout(total=5)) as resp:
                return resp.status, resp.headers.get("Content-Type", "application/json"), await resp.read()
        except (aiohttp.ClientError, TimeoutError, OSError):
            continue
    return None


async def fetch_all(proxy: ReverseProxy, members: Sequence[Sequence[str]], path: str,
                    accept: str) -> list[tuple[int, str, bytes] | None]:
    return list(await asyncio.gather(*(_get(proxy, m, path, accept) for m in members)))


def merge_apis(answers: list[tuple[int, str, bytes] | None]) -> tuple[str, bytes, list[list[tuple[str, str]]]] | None:
    """Merge ``/apis`` answers (legacy or aggregated, whichever the members sent).

    Returns the content type, body and, per member, the group-versions it listed.
    """
    merged: dict[str, Any] | None = None
    ctype = "application/json"
    seen: set[str] = set()
    served: list[list[tuple[str, str]]] = []
    for answer in answers:
        gvs: list[tuple[str, str]] = []
        served.append(gvs)
        if answer is None or answer[0] != 200:
            continue
        try:
            doc = orjson.loads(answer[2])
        except orjson.JSONDecodeError:
            continue
        key = "items" if doc.get("kind") == "APIGroupDiscoveryList" else "groups"
        if merged is None:
            merged, ctype = {**doc, key: []}, answer[1]
        if key not in merged:
            continue
        for entry in doc.get(key) or []:
            name = (entry.get("metadata") or {}).get("name", "") if key == "items" else entry.get("name", "")
            versions = [v.get("version", "") for v in entry.get("versions") or []]
            gvs.extend((name, v) for v in versions)
            if name in seen:
                continue
            seen.add(name)
            merged[key].append(entry)
    if merged is None:
        return None
    return ctype, orjson.dumps(merged), served


def merge_openapi_index(answers: list[tuple[int, str, bytes] | None]) -> bytes | None:
    paths: dict[str, Any] = {}
    found = False
    for answer in answers:
        if answer is None or answer[0] != 200:
            continue
        try:
            doc = orjson.loads(answer[2])
        except orjson.JSONDecodeError:
            continue
        found = True
        for key, value in (doc.get("paths") or {}).items():
            paths.setdefault(key, value)
    if not found:
        return None
    return orjson.dumps({"paths": paths}, option=orjson.OPT_SORT_KEYS)


def _merge_items(docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One APIGroupDiscoveryList from several, in chain order; the first member listing a group wins it."""
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for doc in docs:
        for item in doc.get("items") or []:
            name = (item.get("metadata") or {}).get("name", "")
            if name in seen:
                continue
            seen.add(name)
            items.append(item)
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}


def streamed_aggregated(latest: Sequence[MemberDiscovery | None], path: str) -> dict[str, Any] | None:
    """The merged aggregated ``/api`` or ``/apis`` from the members' streamed documents; None
    while any member has not delivered one yet (the caller then fetches)."""
    if not latest or any(d is None for d in latest):
        return None
    return _merge_items([(d.api if path == "/api" else d.apis) for d in latest if d is not None])


def legacy_group_list(aggregated: dict[str, Any]) -> dict[str, Any]:
    """The legacy ``APIGroupList`` an aggregated ``/apis`` document describes (versions in the
    same preference order, the first one preferred)."""
    groups = []
    for item in aggregated.get("items") or []:
        name = (item.get("metadata") or {}).get("name", "")
        versions = [{"groupVersion": f"{name}/{v['version']}", "version": v["version"]}
                    for v in item.get("versions") or [] if v.get("version")]
        if name and versions:
            groups.append({"name": name, "versions": versions, "preferredVersion": versions[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def aggregated_response(doc: dict[str, Any], version: str) -> tuple[str, bytes]:
    """Content type and body of an aggregated document at ``v2`` or ``v2beta1``."""
    return (AGGREGATED_V2 if version == "v2" else AGGREGATED_V2BETA1), aggregated_body(doc, version)
