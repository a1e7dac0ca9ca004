"""Serving OpenAPI: ``/openapi/v2`` (JSON or gnostic protobuf) and ``/openapi/v3`` (index + per
group-version documents addressed by content hash, cached immutably as kube-apiserver does).

Documents are encoded once per change of the served set, off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from genericapi.apimachinery import openapi
from genericapi.apimachinery.openapi_proto import openapi_v2_to_protobuf
from genericapi.apimachinery.resources import ResourceInfo

PROTO_TYPE = openapi.OPENAPI_V2_PROTOBUF_CONTENT_TYPE


@dataclass
class _Encoded:
    v2_doc: dict[str, Any] = field(default_factory=dict)
    v2_json: bytes = b""
    v2_etag: str = ""
    v2_proto: bytes | None = None
    v3: dict[str, bytes] = field(default_factory=dict)
    v3_hash: dict[str, str] = field(default_factory=dict)
    v3_index: bytes = b""


class OpenAPIService:
    """Holds the encoded documents of one served set of resources."""

    def __init__(self, resources: Sequence[ResourceInfo], definitions: dict[str, Any],
                 info_version: str = "v1.33.0") -> None:
        self._resources = tuple(resources)
        self._definitions = definitions
        self._info_version = info_version
        self._enc: _Encoded | None = None
        self._lock = asyncio.Lock()

    def update(self, resources: Sequence[ResourceInfo], definitions: dict[str, Any]) -> None:
        self._resources = tuple(resources)
        self._definitions = definitions
        self._enc = None

    def _encode(self) -> _Encoded:
        enc = _Encoded()
        v2 = openapi.build_openapi_v2(self._resources, self._definitions, self._info_version)
        enc.v2_json = openapi.serialize_openapi(v2)
        enc.v2_etag = openapi.openapi_etag(enc.v2_json)
        for gv, doc in openapi.build_all_openapi_v3(self._resources, self._definitions).items():
            key = openapi.openapi_v3_path_key(gv)
            data = openapi.serialize_openapi(doc)
            enc.v3[key] = data
            enc.v3_hash[key] = openapi.openapi_etag(data)
        enc.v3_index = openapi.serialize_openapi(openapi.build_openapi_v3_index(list(enc.v3), enc.v3_hash))
        enc.v2_doc = v2
        return enc

    async def encoded(self) -> _Encoded:
        if self._enc is None:
            async with self._lock:
                if self._enc is None:
                    self._enc = await asyncio.to_thread(self._encode)
        return self._enc

    async def warm(self) -> None:
        await self.encoded()

    async def v2(self, request: Request) -> Response:
        enc = await self.encoded()
        accept = request.headers.get("accept", "")
        if any(sub in accept for sub in openapi.OPENAPI_V2_PROTOBUF_SUBTYPES):
            proto = enc.v2_proto
            if proto is None:
                proto = enc.v2_proto = await asyncio.to_thread(openapi_v2_to_protobuf, enc.v2_doc)
            return _cached(request, proto, PROTO_TYPE, enc.v2_etag)
        return _cached(request, enc.v2_json, "application/json", enc.v2_etag)

    async def v3_index(self, request: Request) -> Response:
        enc = await self.encoded()
        return Response(enc.v3_index, media_type="application/json")

    async def v3(self, request: Request) -> Response:
        enc = await self.encoded()
        key = request.path_params["path"].strip("/")
        data = enc.v3.get(key)
        if data is None:
            return Response("404 page not found\n", status_code=404, media_type="text/plain")
        digest = enc.v3_hash[key]
        resp = _cached(request, data, "application/json", digest)
        if request.query_params.get("hash") == digest:
            resp.headers["Cache-Control"] = "public, immutable"
            resp.headers["Expires"] = "Thu, 01 Jan 2099 00:00:00 GMT"
        return resp

    def known_v3(self) -> list[str]:
        return list(self._enc.v3) if self._enc else []


def _cached(request: Request, data: bytes, media_type: str, etag: str) -> Response:
    quoted = f'"{etag}"'
    if request.headers.get("if-none-match") == quoted:
        return Response(status_code=304, headers={"ETag": quoted})
    return Response(data, media_type=media_type, headers={"ETag": quoted, "Vary": "Accept"})
