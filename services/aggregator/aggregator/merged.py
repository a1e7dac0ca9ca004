"""Documents the gateway answers by merging what every chain member serves.

``/apis`` (legacy APIGroupList and aggregated APIGroupDiscoveryList) and the ``/openapi/v3``
index list the groups of every member: core-api's built-ins and extensions-api's CRD groups,
fetched at request time so a CRD group appears as soon as its member publishes it. The
per-group-version OpenAPI documents are routed to the member serving that group-version.
This is a stop-gap for the aggregator issue's discovery stream (gRPC) and APIService-based
merging; it also refreshes the routing table from what it fetched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import aiohttp
import orjson
from genericapi.server.proxy import ReverseProxy, http_base


async def _get(proxy: ReverseProxy, replicas: Sequence[str], path: str,
               accept: str) -> tuple[int, str, bytes] | None:
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
