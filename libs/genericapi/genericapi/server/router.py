"""Routing of Kubernetes API paths straight on ASGI (the hot path: no framework routing).

Paths follow ``registerResourceHandlers``: ``/api/v1/...`` and ``/apis/<g>/<v>/...``, with
``namespaces/<ns>/`` scoping, ``/watch/`` legacy prefixes and subresources. A group-version
this server does not serve goes to the delegate (the next link of the chain) or 404s.

Per request it does only what the request needs: the Starlette ``Request`` handlers take is built
when a handler or discovery will read it (not for what goes on to the delegate), its query is
parsed on first use and an empty one not at all (``APIRequest``), and a plain ``Response`` is
sent as the two ASGI messages its ``__call__`` would send, without the call (``send_response``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from genericapi.apimachinery import errors as apierrors
from genericapi.handlers import connect as connect_handler
from genericapi.handlers import resource as rest
from genericapi.handlers.responses import error_response, format_warning, json_response
from genericapi.registry.connect import connector_for
from genericapi.registry.store import Store

from . import metrics
from .discovery import (
    AGGREGATED_V2,
    AGGREGATED_V2BETA1,
    DiscoveryDocuments,
    aggregated_body,
    subresource_verbs,
    wants_aggregated,
)

log = logging.getLogger(__name__)

Endpoint = Callable[[rest.Target, Request], Awaitable[Response]]

_METHOD_NOT_ALLOWED = apierrors.APIError(
    405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})

#: What an empty query string parses to (immutable, so one is shared by every request).
_NO_QUERY = QueryParams()


class APIRequest(Request):
    """Starlette's ``Request`` whose query is parsed on first use, an empty one to the shared empty
    ``QueryParams`` without parsing (most GETs carry no query)."""

    @property
    def query_params(self) -> QueryParams:
        try:
            return self._query_params
        except AttributeError:
            query: bytes = self.scope["query_string"]
            params = self._query_params = QueryParams(query) if query else _NO_QUERY
            return params


async def send_response(response: Response, scope: Scope, receive: Receive, send: Send) -> None:
    """Send a response: a plain Starlette ``Response`` as the two messages its ``__call__`` sends
    (start with its raw headers, then its whole body; the server leaves the body out for HEAD), and
    its background task after; any other kind (streams, watches, big lists) through its own call."""
    if type(response) is Response:
        await send({"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers})
        await send({"type": "http.response.body", "body": response.body})
        if response.background is not None:
            await response.background()
    else:
        await response(scope, receive, send)


class APIRouter:
    """Dispatches API requests to the stores of the resources this server serves."""

    def __init__(self, stores: list[Store], discovery: DiscoveryDocuments,
                 delegate: ASGIApp | None = None,
                 extra_routes: dict[str, Callable[[Request], Awaitable[Response]]] | None = None,
                 bookmark_interval: float = 60.0) -> None:
        self.delegate = delegate
        self.bookmark_interval = bookmark_interval
        self.extra_routes = extra_routes or {}
        self.set_stores(stores, discovery)

    def set_stores(self, stores: list[Store], discovery: DiscoveryDocuments) -> None:
        """Replace the served set in one assignment (requests see the old or the new, never half)."""
        table: dict[tuple[str, str], dict[str, Store]] = {}
        for store in stores:
            info = store.info
            table.setdefault((info.group, info.version), {})[info.plural] = store
        self._table = table
        self.discovery = discovery

    def serves(self, group: str, version: str) -> bool:
        return (group, version) in self._table

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if self.delegate is not None:
                await self.delegate(scope, receive, send)
            return
        scope["kubechain.bookmark_interval"] = self.bookmark_interval
        started = time.perf_counter()
        try:
            response = await self._dispatch(scope, receive, send)
        except apierrors.APIError as err:
            response = error_response(err)
        except Exception as err:  # the last line of defence: never leak a traceback as HTML
            log.exception("internal error serving %s %s", scope.get("method"), scope.get("path"))
            response = error_response(apierrors.internal_error(str(err) or type(err).__name__))
        labels: metrics.RequestLabels | None = scope.get("kubechain.metrics")
        if response is None:
            return
        if labels is None:
            await send_response(response, scope, receive, send)
            return
        if labels[0] in ("WATCH", "CONNECT"):
            gauge = metrics.longrunning(labels)
            gauge.inc()
            try:
                await response(scope, receive, send)
            finally:
                gauge.dec()
        else:
            await send_response(response, scope, receive, send)
        metrics.record_request(labels, response.status_code, time.perf_counter() - started,
                               len(getattr(response, "body", b"")))

    async def _not_ours(self, scope: Scope, receive: Receive, send: Send) -> Response | None:
        if self.delegate is not None:
            await self.delegate(scope, receive, send)
            return None
        return error_response(apierrors.path_not_found())

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> Response | None:
        path: str = scope["path"]
        method: str = scope["method"]
        extra = self.extra_routes.get(path.rstrip("/") or "/")
        if extra is not None:
            return await extra(APIRequest(scope, receive))
        parts = [p for p in path.split("/") if p]
        if not parts or parts[0] not in ("api", "apis"):
            return await self._not_ours(scope, receive, send)
        if parts[0] == "api":
            group, rest_parts = "", parts[1:]
        else:
            if len(parts) == 1:
                return self._discovery(scope, "/apis", method)
            group, rest_parts = parts[1], parts[2:]
        if not rest_parts:
            doc_path = "/api" if not group else f"/apis/{group}"
            if doc_path in self.discovery.by_path:
                return self._discovery(scope, doc_path, method)
            return await self._not_ours(scope, receive, send)
        version, rest_parts = rest_parts[0], rest_parts[1:]
        resources = self._table.get((group, version))
        if resources is None:
            return await self._not_ours(scope, receive, send)
        if not rest_parts:
            doc_path = f"/api/{version}" if not group else f"/apis/{group}/{version}"
            return self._discovery(scope, doc_path, method)
        return await self._resource(APIRequest(scope, receive), method, resources, rest_parts)

    def _discovery(self, scope: Scope, doc_path: str, method: str) -> Response:
        if method not in ("GET", "HEAD"):
            raise _METHOD_NOT_ALLOWED
        accept = _header(scope, b"accept")
        if doc_path in ("/api", "/apis"):
            version = wants_aggregated(accept)
            if version:
                doc = self.discovery.aggregated_api if doc_path == "/api" else self.discovery.aggregated_apis
                ctype = AGGREGATED_V2 if version == "v2" else AGGREGATED_V2BETA1
                resp = json_response(aggregated_body(doc, version), content_type=ctype)
                resp.headers["Vary"] = "Accept"
                return resp
        body = self.discovery.by_path.get(doc_path)
        if body is None:
            raise apierrors.path_not_found()
        resp = json_response(body)
        resp.headers["Vary"] = "Accept"
        return resp

    async def _resource(self, request: Request, method: str, resources: dict[str, Store],
                        parts: list[str]) -> Response:
        watch = False
        if parts[0] == "watch":
            watch, parts = True, parts[1:]
            if not parts:
                raise apierrors.path_not_found()
        namespace = ""
        if parts[0] == "namespaces" and len(parts) >= 3:
            candidate = resources.get(parts[2])
            if candidate is not None and candidate.info.namespaced:
                namespace, parts = parts[1], parts[2:]
        store = resources.get(parts[0])
        if store is not None and len(parts) >= 3 and not watch:
            connect = connector_for(store, parts[2])
            if connect is not None:  # pods/exec, pods/log, */proxy[/<path>]
                if store.info.namespaced and not namespace:
                    raise apierrors.path_not_found()
                request.scope["kubechain.metrics"] = _labels(request, "CONNECT", store, parts[2], "resource")
                trailing = "/" if request.url.path.endswith("/") else ""
                subpath = "/".join(parts[3:]) + trailing if len(parts) > 3 or trailing else None
                return await connect_handler.serve(connect, namespace, parts[1], subpath, request)
        if store is None or len(parts) > 3:
            raise apierrors.path_not_found()
        name = parts[1] if len(parts) > 1 else ""
        sub = parts[2] if len(parts) > 2 else ""
        if sub and sub not in store.info.subresources:
            raise apierrors.path_not_found()
        if store.info.namespaced and name and not namespace:
            # /api/v1/pods/<name>: namespaced objects are only addressed within a namespace.
            raise apierrors.path_not_found()
        if watch and not store.info.supports("watch"):
            raise apierrors.path_not_found()  # kube registers no /watch/ route for it
        if method == "GET" and not sub and request.query_params.get("watch") in ("1", "true"):
            if not store.info.supports("watch"):
                # kube's list handler when the storage cannot watch (componentstatuses)
                raise apierrors.method_not_supported(store.info.group, store.info.plural, "watch")
            watch = True  # ?watch on a list path, or on an object's own path (one-object watch)
        is_watch = watch
        scope = metrics.request_scope(name, namespace, method)
        verb = metrics.resource_verb(method, scope, is_watch, sub, request.headers.get("content-type", "")
                                     if method == "PATCH" else "")
        request.scope["kubechain.metrics"] = _labels(request, verb, store, sub, scope)
        target = rest.Target(store, namespace, name, sub, watch)
        handler = _pick(method, bool(name), bool(sub), watch)
        if handler is None or not _allowed(store, handler, sub):
            raise _METHOD_NOT_ALLOWED
        response = await handler(target, request)
        if store.deprecation_warning:
            # kube's deprecated-API warning, on every request of the resource (v1 ComponentStatus).
            response.headers.append("Warning", format_warning(store.deprecation_warning))
        return response


def _header(scope: Scope, name: bytes) -> str:
    """The first value of a header (lower-case ``name``), "" without it, as Starlette's
    ``Headers.get`` reads it (ASGI servers give header names in lower case)."""
    for key, value in scope["headers"]:
        if key == name:
            text: str = value.decode("latin-1")
            return text
    return ""


def _labels(request: Request, verb: str, store: Store, sub: str, scope: str) -> metrics.RequestLabels:
    """kube's request metric labels (component ``apiserver``, as its installer gives every route)."""
    info = store.info
    return (verb, metrics.dry_run_label(request.scope.get("query_string", b"")), info.group, info.version,
            info.plural, sub, scope, metrics.COMPONENT)


_COLLECTION_HANDLERS: dict[str, Endpoint] = {
    "GET": rest.list_or_watch, "POST": rest.create, "DELETE": rest.delete_collection}
_SUBRESOURCE_HANDLERS: dict[str, Endpoint] = {
    "GET": rest.get, "PUT": rest.update, "PATCH": rest.patch, "POST": rest.create_subresource}
_OBJECT_HANDLERS: dict[str, Endpoint] = {
    "GET": rest.get, "PUT": rest.update, "PATCH": rest.patch, "DELETE": rest.delete}


def _pick(method: str, item: bool, sub: bool, watch: bool) -> Endpoint | None:
    if watch:
        return rest.list_or_watch if method == "GET" and not sub else None
    if not item:
        return _COLLECTION_HANDLERS.get(method)
    if sub:
        return _SUBRESOURCE_HANDLERS.get(method)
    return _OBJECT_HANDLERS.get(method)


_VERB_OF: dict[Any, str] = {
    rest.get: "get", rest.list_or_watch: "list", rest.create: "create", rest.update: "update",
    rest.patch: "patch", rest.delete: "delete", rest.delete_collection: "deletecollection",
    rest.create_subresource: "create",
}


def _allowed(store: Store, handler: Endpoint, sub: str = "") -> bool:
    if sub:
        return _VERB_OF[handler] in subresource_verbs(sub, store.info)
    return store.info.supports(_VERB_OF[handler])

