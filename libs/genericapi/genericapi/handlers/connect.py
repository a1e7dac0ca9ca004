"""HTTP side of connect subresources (kube's ``ConnectResource`` handler).

The router finds a ``ConnectSpec`` for ``<object>/<subresource>[/<path>]``; this checks the
method and sub-path as kube's route registration would (a method the connector does not take
is a 405, a path after a subresource that takes none a 404), reads the request and writes the
connector's answer, streaming when the connector streams.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from genericapi.apimachinery import errors as apierrors
from genericapi.registry.connect import ConnectRequest, ConnectSpec

from .body import read_bytes

_METHOD_NOT_ALLOWED = apierrors.APIError(
    405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})


async def serve(spec: ConnectSpec, namespace: str, name: str, subpath: str | None,
                request: Request) -> Response:
    """Answer one connect request; ``subpath`` is ``None`` when the URL ends at the subresource."""
    if subpath is not None and not spec.subpath:
        raise apierrors.path_not_found()
    method = request.method
    if method not in spec.methods:
        raise _METHOD_NOT_ALLOWED
    body = b"" if method in ("GET", "HEAD") else await read_bytes(request)
    req = ConnectRequest(
        namespace=namespace, name=name, method=method,
        path="" if subpath is None else "/" + subpath,
        query=list(request.query_params.multi_items()),
        headers=list(request.headers.items()),
        body=body,
        request_path=request.url.path,
        raw_query=request.url.query,
    )
    answer = await spec.connector(req)
    if isinstance(answer.body, bytes):
        resp = Response(answer.body, status_code=answer.status)
    else:
        resp = StreamingResponse(answer.body, status_code=answer.status)
    for key, value in answer.headers:
        resp.headers.append(key, value)
    if isinstance(answer.body, bytes) and not answer.body and answer.status in (204, 304):
        del resp.headers["content-length"]
    return resp
