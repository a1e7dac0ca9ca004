"""Calling one webhook: where to POST, TLS against ``caBundle``, a pooled session, Go's error words.

As kube-apiserver's webhook ``ClientManager``: a ``url`` clientConfig is posted to as is; a
``service`` one is addressed as ``https://<name>.<namespace>.svc:<port><path>`` (the name the
serving certificate is verified against) while the connection goes to the address the project's
``ServiceResolver`` gives (a ready endpoint, else the clusterIP), as the aggregator resolves
APIService services. Each configuration's webhook gets one ``WebhookClient`` with its own pooled
client (verifying against its ``caBundle``) and a bound on requests in flight, so a slow webhook
cannot wedge the server. Calls go over HTTP/1.1 (the project's aiohttp session) unless HTTP/2 is
offered by ALPN as Go's client does (``KUBECHAIN_WEBHOOK_HTTP2=true``; then a webhook that picks
``h2`` gets every call multiplexed on one connection). Failures are worded as Go's ``net/http``
and client-go word them (``Post "<url>": ...``): clients see that text.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import errno
import os
import socket
import ssl
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from genericapi.apimachinery import deepjson
from genericapi.apimachinery.go_json_errors import go_syntax_error
from genericapi.apimachinery.serviceresolver import ServiceResolutionError, ServiceResolver, host_port
from genericapi.httpclient import new_http2_client, new_session

if TYPE_CHECKING:
    import aiohttp  # loaded by the first session (genericapi.httpclient), not at start-up
    import httpx  # loaded by new_http2_client, only when a webhook picks HTTP/2 (start-up CPU)

#: Requests in flight to one webhook; more wait (within their timeout) rather than pile up.
MAX_IN_FLIGHT = 64
_MAX_ERROR_BODY = 2048


class CallError(Exception):
    """The webhook could not be called or answered no AdmissionReview (``str()``: Go's words)."""


@dataclass(frozen=True)
class Target:
    display_base: str  # https://host:port as the configuration names it (errors, Host header)
    path: str
    server_name: str
    service: tuple[str, str, int] | None  # (namespace, name, port), resolved per call


def target_for(client_config: dict[str, Any]) -> Target:
    service = client_config.get("service")
    if isinstance(service, dict):
        namespace, name = str(service.get("namespace") or ""), str(service.get("name") or "")
        port = int(service.get("port") or 443)
        server_name = f"{name}.{namespace}.svc"
        return Target("https://" + host_port(server_name, port), str(service.get("path") or ""), server_name,
                      (namespace, name, port))
    from yarl import URL  # aiohttp's URL type: loaded with it, by the first webhook (start-up CPU)

    parsed = URL(str(client_config.get("url") or ""))
    host = parsed.raw_host or ""
    explicit = parsed.explicit_port
    base = f"{parsed.scheme}://" + (host_port(host, explicit) if explicit else (f"[{host}]" if ":" in host else host))
    return Target(base, parsed.raw_path, host, None)


def ssl_context(ca_bundle: Any) -> ssl.SSLContext:
    """Verify the webhook with ``caBundle`` (base64 of PEM in JSON), else the system roots."""
    if ca_bundle:
        try:
            pem = base64.b64decode(str(ca_bundle), validate=True).decode("ascii", "replace")
            return ssl.create_default_context(cadata=pem)
        except (binascii.Error, ValueError, ssl.SSLError) as err:
            raise CallError("unable to load root certificates: unable to parse bytes as PEM block") from err
    return ssl.create_default_context()


def go_duration(seconds: int) -> str:
    return f"{seconds}s" if seconds < 60 else f"{seconds // 60}m{seconds % 60}s"


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from (httpx wraps httpcore's error, which wraps the socket's)."""
    out: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in out:
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def _errors_of(package: str, *names: str) -> tuple[type[BaseException], ...]:
    """``package``'s exception classes ``names`` once something loaded it (the HTTP/1.1 session
    aiohttp, the HTTP/2 path httpx); none before, when none of them can have been raised (so
    importing this module imports neither)."""
    module = sys.modules.get(package)
    return tuple(getattr(module, name) for name in names) if module is not None else ()


def _httpx_errors(*names: str) -> tuple[type[BaseException], ...]:
    return _errors_of("httpx", *names)


def _transport_errors() -> tuple[type[BaseException], ...]:
    """What a call raises when it got no HTTP answer (evaluated only when something was raised)."""
    return (*_errors_of("aiohttp", "ClientError"), OSError, *_httpx_errors("HTTPError"))


def _transport_message(exc: BaseException, host: str, port: int) -> str:
    """Go's ``net/http`` words for a call that got no HTTP answer (aiohttp's, httpx's or the socket's
    own exception, whatever it was raised from)."""
    causes = _causes(exc)
    timeouts: tuple[type[BaseException], ...] = (TimeoutError, *_httpx_errors("TimeoutException"))
    if any(isinstance(c, timeouts) for c in causes):
        return "context deadline exceeded"
    for cause in causes:
        if isinstance(cause, ssl.SSLCertVerificationError):
            code = cause.verify_code
            if code in (2, 18, 19, 20, 21, 27):
                text = "x509: certificate signed by unknown authority"
            elif code == 62:
                text = f"x509: certificate is not valid for {host}"
            else:
                text = "x509: " + str(cause.verify_message or cause)
            return "tls: failed to verify certificate: " + text
    if any(isinstance(c, socket.gaierror) for c in causes):
        return f"dial tcp: lookup {host}: no such host"
    refused = next((c for c in causes if isinstance(c, OSError) and c.errno is not None), None)
    if refused is not None:
        if refused.errno == errno.ECONNREFUSED:
            return f"dial tcp {host_port(host, port)}: connect: connection refused"
        return f"dial tcp {host_port(host, port)}: {refused.strerror}"
    eof: tuple[type[BaseException], ...] = (*_errors_of("aiohttp", "ServerDisconnectedError"), ConnectionResetError,
                                            *_httpx_errors("RemoteProtocolError"))
    if isinstance(exc, eof):
        return "EOF"
    return str(exc) or type(exc).__name__


def _status_message(status: int, body: bytes, content_type: str) -> str:
    """client-go's error for a non-2xx answer: its Status message, else the generic text."""
    if body[:1] == b"{":
        try:
            doc = deepjson.loads(body)
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and doc.get("kind") == "Status" and doc.get("message"):
            return str(doc["message"])
    server_message = body[:_MAX_ERROR_BODY].decode("utf-8", "replace").strip() \
        if content_type.startswith("text/") else "unknown"
    fixed = {400: "the server rejected our request for an unknown reason",
             401: "the server has asked for the client to provide credentials",
             404: "the server could not find the requested resource",
             405: "the server does not allow this method on the requested resource",
             409: "the server reported a conflict",
             422: "the server rejected our request due to an error in our request",
             429: "the server has received too many requests and has asked us to try again later",
             503: "the server is currently unable to handle the request",
             504: "the server was unable to return a response in the time allotted, but may still be "
                  "processing the request"}
    if status in (403, 406, 415):
        return server_message
    if status in fixed:
        return fixed[status]
    if status >= 500:
        escaped = server_message.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'an error on the server ("{escaped}") has prevented the request from succeeding'
    return f"the server responded with the status code {status} but did not return more information"


def decode_review(body: bytes) -> Any:
    """The answer as client-go decodes it; malformed JSON is worded as its decoder words it."""
    try:
        return deepjson.loads(body)
    except orjson.JSONDecodeError:
        reason = go_syntax_error(body) or "unexpected end of JSON input"
        raise CallError(f"couldn't get version/kind; json parse error: {reason}") from None


#: What the client offers by ALPN when HTTP/2 is on, in Go's order.
ALPN = ("h2", "http/1.1")
#: ``true`` in the environment of core-api / extensions-api offers HTTP/2 to webhooks.
HTTP2_ENV = "KUBECHAIN_WEBHOOK_HTTP2"


def http2_offered() -> bool:
    """Whether webhook calls offer ``h2`` by ALPN (off by default: see ``WebhookClient``)."""
    return os.environ.get(HTTP2_ENV, "").strip().lower() in ("1", "true", "yes")


class WebhookClient:
    """POSTs AdmissionReviews to one webhook over a pooled client (``close()`` when dropped).

    Go's client offers ``h2`` and ``http/1.1`` by ALPN and speaks what the server picks. Here that
    is an option (``KUBECHAIN_WEBHOOK_HTTP2=true``): the Python HTTP/2 client (httpx over ``h2``)
    costs several times the CPU per call of the project's aiohttp session over HTTP/1.1 (4.0 vs
    0.7 ms against the same hypercorn webhook, 16 calls in flight, on the loaded 2-core dev
    machine; 47 vs 204 calls/s), so by default every webhook is called over HTTP/1.1, which every
    webhook server speaks. With the option on, the first call (and the first
    after a transport failure) makes one TLS handshake offering both to learn the pick: a webhook
    that picks ``h2`` is called over HTTP/2 (``new_http2_client``, every call on one connection),
    one that picks ``http/1.1`` (or nothing, or a plain ``http`` URL) over the aiohttp session.
    """

    def __init__(self, client_config: dict[str, Any], resolver: ServiceResolver | None) -> None:
        self.target = target_for(client_config)
        self.resolver = resolver
        self._ca_bundle = client_config.get("caBundle")
        self._session: aiohttp.ClientSession | None = None
        self._client: httpx.AsyncClient | None = None
        self.http2 = http2_offered()
        #: The protocol the webhook picked by ALPN ("" until known).
        self.protocol = "" if self.http2 else "http/1.1"
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._negotiating = asyncio.Lock()

    def display_url(self, timeout: int) -> str:
        return f"{self.target.display_base}{self.target.path}?timeout={go_duration(timeout)}"

    def _session_for(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = new_session(ssl_context=ssl_context(self._ca_bundle), limit=MAX_IN_FLIGHT)
        return self._session

    def _client_for(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            self._client = new_http2_client(ssl_context=ssl_context(self._ca_bundle), limit=MAX_IN_FLIGHT)
        return self._client

    def _base(self) -> str:
        if self.target.service is None:
            return self.target.display_base
        if self.resolver is None:
            raise ServiceResolutionError("NoResolver", "no service resolver configured")
        namespace, name, port = self.target.service
        return self.resolver.resolve(namespace, name, port)

    async def _negotiate(self, host: str, port: int) -> str:
        """The protocol the webhook picks by ALPN from Go's offer (one TLS handshake)."""
        ctx = ssl_context(self._ca_bundle)
        ctx.set_alpn_protocols(list(ALPN))
        _reader, writer = await asyncio.open_connection(host, port, ssl=ctx,
                                                        server_hostname=self.target.server_name or None)
        try:
            ssl_object = writer.get_extra_info("ssl_object")
            picked = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        finally:
            writer.close()
        return "h2" if picked == "h2" else "http/1.1"

    async def post(self, body: bytes, seconds: int) -> bytes:
        """The 2xx answer's body within ``seconds``; else ``CallError`` in client-go's words."""
        url = self.display_url(seconds)
        try:
            async with asyncio.timeout(seconds):
                async with self._slots:
                    return await self._post(body, url, seconds)
        except TimeoutError:
            raise CallError(f'Post "{url}": context deadline exceeded') from None

    async def _post(self, body: bytes, url: str, seconds: int) -> bytes:
        try:
            base = self._base()
        except ServiceResolutionError as err:
            raise CallError(f'Post "{url}": {err.message}') from err
        from yarl import URL

        parsed = URL(base)
        host, port = parsed.raw_host or "", parsed.port or 443
        headers = {"Content-Type": "application/json", "Accept": "application/json, */*",
                   "Host": self.target.display_base.split("://", 1)[-1]}
        request_url = f"{base}{self.target.path or '/'}?timeout={go_duration(seconds)}"
        try:
            if not self.protocol:
                async with self._negotiating:  # one handshake, not one per waiting call
                    if not self.protocol:
                        self.protocol = await self._negotiate(host, port) if parsed.scheme == "https" \
                            else "http/1.1"
            if self.protocol == "h2":
                status, payload, content_type = await self._post_h2(request_url, body, headers)
            else:
                status, payload, content_type = await self._post_http1(request_url, body, headers)
        except TimeoutError:
            raise
        except _transport_errors() as exc:
            if self.http2:
                self.protocol = ""  # learn it again: the webhook may have been replaced
            raise CallError(f'Post "{url}": {_transport_message(exc, host, port)}') from exc
        if 200 <= status < 300:
            return payload
        raise CallError(_status_message(status, payload, content_type))

    async def _post_http1(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, str]:
        async with self._session_for().post(url, data=body, headers=headers,
                                            server_hostname=self.target.server_name or None) as resp:
            return resp.status, await resp.read(), resp.headers.get("Content-Type", "")

    async def _post_h2(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, str]:
        extensions = {"sni_hostname": self.target.server_name} if self.target.server_name else None
        resp = await self._client_for().post(url, content=body, headers=headers, extensions=extensions)
        return resp.status_code, resp.content, resp.headers.get("Content-Type", "")

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        if self._client is not None and not self._client.is_closed:
            await self._client.aclose()
        self._session = self._client = None
