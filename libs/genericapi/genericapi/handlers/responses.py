"""Encoding responses: JSON bodies (``pretty``), Status errors, and the headers they carry."""

from __future__ import annotations

from typing import Any

import orjson
import yaml
from starlette.responses import Response

from genericapi.apimachinery import deepjson
from genericapi.apimachinery.errors import APIError

JSON_TYPE = "application/json"


def dumps(obj: Any, pretty: bool = False) -> bytes:
    """JSON of a response body; deepjson (its fallback) only for values past orjson's 254 levels,
    orjson inline otherwise (no extra call on the hot path)."""
    if pretty:
        return deepjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n"
    try:
        return orjson.dumps(obj)
    except orjson.JSONEncodeError:
        return deepjson.dumps(obj)


def json_response(body: bytes, status: int = 200, warnings: list[str] | None = None,
                  content_type: str = JSON_TYPE) -> Response:
    resp = Response(body, status_code=status, media_type=content_type)
    if warnings:
        for w in warnings:
            resp.headers.append("Warning", format_warning(w))
    return resp


def object_response(obj: Any, status: int = 200, pretty: bool = False, as_yaml: bool = False,
                    warnings: list[str] | None = None) -> Response:
    if as_yaml:
        text = yaml.safe_dump(obj, default_flow_style=False, sort_keys=False)
        return json_response(text.encode(), status, warnings, "application/yaml")
    return json_response(dumps(obj, pretty), status, warnings)


def error_response(err: APIError, pretty: bool = False) -> Response:
    body = dumps(err.status(), pretty) if pretty else err.body()
    resp = Response(body, status_code=err.code, media_type=JSON_TYPE)
    for k, v in err.headers.items():
        resp.headers[k] = v
    return resp


def format_warning(text: str) -> str:
    """An RFC 7234 warning header value as kube-apiserver writes it (code 299, agent "-")."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'
