"""Service account issuer discovery routes: ``/.well-known/openid-configuration`` and ``/openid/v1/jwks``.

kube-apiserver serves them from its core (go-restful routes next to ``/api``), so core-api does:
the gateway authenticates and authorizes the request first (RBAC's bootstrap
``system:service-account-issuer-discovery`` ClusterRole, bound to every service account; anonymous
clients only when an admin binds it to ``system:unauthenticated``) and forwards it here. The
documents are rendered once at start (``genericapi.apimachinery.oidcdiscovery``); when kube would
not serve them (an issuer that is not an https URL, ...) they are not installed and the paths are
the chain's 404, as kube logs the reason and skips them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from genericapi.apimachinery import oidcdiscovery
from genericapi.apimachinery import serviceaccount as satoken
from genericapi.server.apiserver import GenericAPIServer
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

log = logging.getLogger(__name__)


def _route(body: bytes, content_type: str) -> Callable[[Request], Awaitable[Response]]:
    async def serve(request: Request) -> Response:
        if request.method != "GET":  # go-restful's answer for a path it knows with another method
            return PlainTextResponse("405: Method Not Allowed", status_code=405)
        return Response(body, media_type=content_type, headers={"Cache-Control": oidcdiscovery.CACHE_CONTROL})

    return serve


def install(server: GenericAPIServer, issuer: str, jwks_uri: str, keys: list[satoken.PublicKey]) -> bool:
    """Serve both documents on ``server`` (False, logged, when kube would not serve them)."""
    try:
        docs = oidcdiscovery.build_documents(issuer, jwks_uri, server.config.advertise_address, keys)
    except oidcdiscovery.DiscoveryError as err:
        log.warning("Could not construct pre-rendered responses for ServiceAccountIssuerDiscovery endpoints. "
                    "Endpoints will not be enabled. Error: %s", err)
        return False
    server.router.extra_routes[oidcdiscovery.CONFIG_PATH] = _route(docs.config, "application/json")
    server.router.extra_routes[oidcdiscovery.JWKS_PATH] = _route(docs.keyset, oidcdiscovery.JWKS_CONTENT_TYPE)
    return True
