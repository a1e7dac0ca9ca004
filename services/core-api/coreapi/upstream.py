"""The HTTP client connect subresources reach pods, service endpoints and kubelets with.

kube-apiserver proxies ``*/proxy`` through an upgrade-aware reverse proxy whose transport turns
a failed round trip into a 503 ``error trying to reach service: <dial error>``, and fetches
``pods/log`` from the kubelet with a plain GET whose failure reaches the client as Go's error
text (a 500 without a reason). This module does both over aiohttp (the project's TCP client,
see ``genericapi.server.proxy``); responses stream back. Kubelets are called over https
without verifying their certificates, as kube-apiserver does when given no kubelet CA.
Upgrades (SPDY/WebSocket) are not proxied.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from genericapi.apimachinery import errors as apierrors
from genericapi.httpclient import new_session
from genericapi.registry.connect import ConnectResponse
from genericapi.server.proxy import HOP_BY_HOP

from .kubeletconn import dial_error

if TYPE_CHECKING:
    import aiohttp  # loaded by the first connect request's session (genericapi.httpclient), not at start-up

#: kube dials with a 30 s timeout; a shorter one keeps an unroutable pod IP from pinning a request.
CONNECT_TIMEOUT = 10.0
_REQUEST_DROP = HOP_BY_HOP | {"authorization", "expect", "x-remote-user", "x-remote-group"}


def _own_header(name: str) -> bool:
    """Headers that stay with the API server: hop-by-hop ones, the client's credentials and the
    chain's identity headers (kube's filters remove them before a proxy sees the request)."""
    return name in _REQUEST_DROP or name.startswith(("x-remote-extra-", "impersonate-"))


class Upstream:
    """One shared aiohttp session, opened on first use and closed with the server."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        # Verifies nothing, so it loads no CA bundle (create_default_context's load of the system's
        # certificates was ~3% of core-api's start-up, issue 15).
        self._insecure = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._insecure.check_hostname = False
        self._insecure.verify_mode = ssl.CERT_NONE

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = new_session(connect_timeout=CONNECT_TIMEOUT, passthrough=True)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _open(self, method: str, url: str, host_port: str, headers: list[tuple[str, str]],
                    body: bytes) -> aiohttp.ClientResponse:
        import aiohttp

        try:
            return await self._client().request(
                method, url, headers=headers, data=body or None, allow_redirects=False,
                ssl=self._insecure if url.startswith("https:") else False)
        except (aiohttp.ClientConnectorError, TimeoutError, OSError) as err:
            raise ConnectionError(dial_error(host_port, err)) from err

    async def proxy(self, method: str, url: str, host_port: str, headers: list[tuple[str, str]],
                    body: bytes) -> ConnectResponse:
        """A proxied request: the upstream's answer, or kube's 503 when it cannot be reached."""
        import aiohttp

        out = [(k, v) for k, v in headers if not _own_header(k.lower())]
        try:
            resp = await self._open(method, url, host_port, out, body)
        except ConnectionError as err:
            raise apierrors.service_unavailable(f"error trying to reach service: {err}") from None
        except aiohttp.ClientError as err:
            raise apierrors.service_unavailable(f"error trying to reach service: {err}") from None
        back = [(k, v) for k, v in resp.headers.items() if k.lower() not in HOP_BY_HOP]
        return ConnectResponse(resp.status, back, _stream(resp))

    async def get_stream(self, url: str, host_port: str, content_type: str) -> ConnectResponse:
        """``LocationStreamer``: GET ``url`` and stream it back; failures are Go's errors (500)."""
        import aiohttp

        try:
            resp = await self._open("GET", url, host_port, [], b"")
        except ConnectionError as err:
            raise apierrors.unknown_error(f'Get "{url}": {err}') from None
        except aiohttp.ClientError as err:
            raise apierrors.unknown_error(f'Get "{url}": {err}') from None
        if not 200 <= resp.status < 300:
            text = (await resp.read()).decode("utf-8", "replace")
            resp.release()
            raise apierrors.APIError(resp.status, "", text)
        return ConnectResponse(resp.status, [("Content-Type", content_type)], _stream(resp))


async def _stream(resp: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    try:
        async for chunk in resp.content.iter_any():
            yield chunk
    finally:
        resp.release()
