"""Routing of service-backed group-versions: an immutable table rebuilt whole on every APIService change.

Each service-backed APIService gets a route: its Service reference, whether it is available (its
``Available`` condition, as kube-aggregator's proxy handler reads it) and a pooled proxy whose TLS
is built from the APIService (``tls``). A request for that group-version is proxied to the URL the
ServiceResolver gives at that moment (endpoints change without the APIService changing). Local
APIServices are not routed here: those requests go down the delegation chain as before.

Errors are kube-aggregator's: an unavailable APIService or an unresolvable Service answers 503
``service unavailable`` and a TLS configuration error 500 with its text, both as plain text
(Go's ``http.Error``), not as a Status.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from genericapi.apimachinery.serviceresolver import ServiceResolutionError, ServiceResolver
from genericapi.server.proxy import ReverseProxy
from starlette.types import Message, Receive, Scope, Send

from .tls import backend_context
from .types import ServiceRef, ca_bundle, is_available, name_of, service_ref, spec

log = logging.getLogger(__name__)

_UPSTREAM = "kubechain.apiservice.upstream"


@dataclass(frozen=True)
class ServiceRoute:
    name: str
    group: str
    version: str
    ref: ServiceRef
    available: bool
    proxy: ReverseProxy | None
    #: Why no proxy could be built (a caBundle that is not PEM); answered as a 500.
    error: str = ""
    #: What the proxy was built from: an APIService change that keeps it reuses the pool.
    tls_key: tuple[Any, ...] = ()


@dataclass(frozen=True)
class ServiceRoutes:
    """Service-backed group-versions -> their route. Replaced whole, never changed."""

    by_group_version: dict[tuple[str, str], ServiceRoute] = field(default_factory=dict)

    def route_for(self, path: str) -> ServiceRoute | None:
        if not self.by_group_version:
            return None
        parts = path.split("/", 4)
        if len(parts) > 3 and parts[1] == "apis":
            return self.by_group_version.get((parts[2], parts[3]))
        if len(parts) > 2 and parts[1] == "api":
            return self.by_group_version.get(("", parts[2]))
        return None


HeaderSource = Callable[[Scope], list[tuple[str, str]]]


def _pick(scope: Scope) -> list[str]:
    upstream = scope.get(_UPSTREAM)
    return [upstream] if upstream else []


def build_routes(apiservices: Iterable[dict[str, Any]], previous: ServiceRoutes, client_cert: tuple[str, str] | None,
                 header_source: HeaderSource) -> tuple[ServiceRoutes, list[ReverseProxy]]:
    """The table for ``apiservices``, reusing ``previous`` proxies whose TLS settings are unchanged;
    also the proxies no longer used (the caller closes them)."""
    old = {r.name: r for r in previous.by_group_version.values()}
    table: dict[tuple[str, str], ServiceRoute] = {}
    for obj in apiservices:
        ref = service_ref(obj)
        if ref is None:
            continue
        s = spec(obj)
        name = name_of(obj)
        bundle = ca_bundle(obj)
        insecure = s.get("insecureSkipTLSVerify") is True
        key = (ref, bundle, insecure)
        prev = old.get(name)
        proxy: ReverseProxy | None
        error = ""
        if prev is not None and prev.tls_key == key:
            proxy, error = prev.proxy, prev.error
        else:
            try:
                ctx = backend_context(client_cert, ca_bundle=bundle, insecure=insecure, server_name=ref.server_name)
                proxy = ReverseProxy(_pick, ssl_context=ctx, header_source=header_source,
                                     drop_headers=("authorization",))
            except (ssl.SSLError, ValueError, OSError) as err:
                proxy, error = None, f"failed to build the TLS configuration of {name}: {err}"
                log.warning("%s", error)
        gv = (str(s.get("group") or ""), str(s.get("version") or ""))
        table[gv] = ServiceRoute(name, gv[0], gv[1], ref, is_available(obj), proxy, error, key)
    kept = {id(r.proxy) for r in table.values() if r.proxy is not None}
    dropped = [r.proxy for r in old.values() if r.proxy is not None and id(r.proxy) not in kept]
    return ServiceRoutes(table), dropped


async def _plain_error(send: Send, code: int, text: str) -> None:
    body = (text + "\n").encode()
    await send({"type": "http.response.start", "status": code,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"x-content-type-options", b"nosniff"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def proxy_request(route: ServiceRoute, resolver: ServiceResolver, scope: Scope, receive: Receive,
                        send: Send, on_backend_unavailable: Callable[[str], None] | None = None) -> None:
    """Serve one request for a service-backed group-version (kube's ``proxyHandler.ServeHTTP``)."""
    if not route.available:
        await _plain_error(send, 503, "service unavailable")
        return
    if route.proxy is None:
        await _plain_error(send, 500, route.error)
        return
    ref = route.ref
    try:
        upstream = resolver.resolve(ref.namespace, ref.name, ref.port)
    except ServiceResolutionError as err:
        log.warning("error resolving %s/%s: %s", ref.namespace, ref.name, err.message)
        await _plain_error(send, 503, "service unavailable")
        return
    scope[_UPSTREAM] = upstream

    async def watching_send(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] == 503 \
                and on_backend_unavailable is not None:
            on_backend_unavailable(route.name)  # recheck its availability now, not at the next period
        await send(message)

    await route.proxy(scope, receive, watching_send)
