"""Reading request bodies: size limit, media type, decoding, apiVersion/kind checks."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request

from genericapi.apimachinery import decoding, k8sproto, plainjson
from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.resources import ResourceInfo

#: kube-apiserver's default limit for request bodies (3 MiB).
MAX_BODY_BYTES = 3 * 1024 * 1024

_OBJECT_TYPES = ("application/json", "application/yaml", "application/x-yaml", "text/yaml", "")
PROTOBUF = "application/vnd.kubernetes.protobuf"


def header(request: Request, name: bytes) -> str | None:
    """The first value of the header ``name`` (lower case, as ASGI servers give header names), what
    ``request.headers.get`` answers, from one pass over the request's raw headers kept on the
    request: a handler reads four or five headers, and each ``Headers.get`` lowered and encoded
    the name and scanned the list again (a missing one raised and caught a KeyError)."""
    found: dict[bytes, bytes] | None = getattr(request, "_first_headers", None)
    if found is None:
        found = {}
        for key, value in request.scope["headers"]:
            if key not in found:
                found[key] = value
        request._first_headers = found  # type: ignore[attr-defined]
    value = found.get(name)
    return value.decode("latin-1") if value is not None else None


async def read_bytes(request: Request) -> bytes:
    length = header(request, b"content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise apierrors.request_entity_too_large(MAX_BODY_BYTES)
    cached: bytes | None = getattr(request, "_body", None)
    if cached is not None:
        return cached
    if getattr(request, "_stream_consumed", False):
        raise RuntimeError("Stream consumed")  # as request.stream(): read elsewhere, not kept
    # The ASGI messages read here rather than through ``request.stream()``: an async generator per
    # request (and the event loop's bookkeeping of it) cost more than reading a small body. What
    # Starlette's stream records is recorded too, so ``request.body()`` answers the same bytes.
    chunks: list[bytes] = []
    size = 0
    receive = request.receive
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise apierrors.request_entity_too_large(MAX_BODY_BYTES)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        elif message["type"] == "http.disconnect":
            request._is_disconnected = True
            raise ClientDisconnect()
    raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    request._stream_consumed = True
    request._body = raw
    return raw


def media_type(request: Request) -> str:
    return (header(request, b"content-type") or "").split(";", 1)[0].strip().lower()


async def read_object(request: Request, info: ResourceInfo | None, detect_duplicates: bool,
                      kind: str | None = None, api_version: str | None = None,
                      also_accepts: tuple[str, ...] = ()) -> tuple[dict[str, Any], list[str]]:
    """The body as an object of the endpoint's kind, and duplicate-field messages."""
    ctype = media_type(request)
    if ctype == PROTOBUF:
        # Typed Go clients (kubectl 1.32+ included) send built-in kinds as protobuf.
        duplicates: list[str] = []
        obj = k8sproto.decode_protobuf_body(await read_bytes(request))
    else:
        if ctype not in _OBJECT_TYPES:
            raise apierrors.unsupported_media_type(ctype)
        raw = await read_bytes(request)
        if not raw.strip():
            raise apierrors.bad_request("Object 'Kind' is missing in ''")
        obj, duplicates = decode_request_body(raw, ctype or "application/json", detect_duplicates,
                                              kind or (info.kind if info else ""))
    want_kind = kind or (info.kind if info else "")
    want_version = api_version or (info.api_version if info else "")
    if obj.get("apiVersion") in also_accepts:
        want_version = str(obj["apiVersion"])  # another version the endpoint converts from
    check_type(obj, want_kind, want_version)
    return obj, duplicates


def decode_request_body(raw: bytes, ctype: str, detect_duplicates: bool, kind: str) -> tuple[dict[str, Any], list[str]]:
    """``decoding.decode_body``, with orjson's parse kept when it is what the duplicate-tracking
    parse would give (no repeated key, no integer past int64: plainjson): the default
    ``fieldValidation=Warn`` asked for that slow parse on every create and update."""
    if decoding.is_json(ctype):
        # orjson's parse as it is, when it is an object and what the long way gives too; anything
        # else (a syntax error, not an object, a repeated key, an integer past int64) takes the
        # long way, which words its errors as kube does. The media type is read once here, not
        # again at each step of ``decode_body``.
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and not (detect_duplicates and plainjson.needs_slow_parse(raw, obj)):
            return obj, []
    return decoding.decode_body(raw, ctype, detect_duplicates=detect_duplicates, kind=kind)


def check_type(obj: dict[str, Any], kind: str, api_version: str) -> None:
    """Fill a missing apiVersion/kind from the endpoint; reject a different one as k8s does."""
    got_kind = obj.get("kind")
    got_version = obj.get("apiVersion")
    if got_version and got_version != api_version:
        raise apierrors.bad_request(
            f"the API version in the data ({got_version}) does not match the expected API version "
            f"({api_version})")
    if got_kind and got_kind != kind:
        raise apierrors.bad_request(
            f"the kind in the data ({got_kind}) does not match the expected kind ({kind})")
    obj["apiVersion"] = api_version
    obj["kind"] = kind
