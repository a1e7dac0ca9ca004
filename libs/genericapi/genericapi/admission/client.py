"""Calling one webhook: where to POST, TLS against ``caBundle``, a pooled session, Go's error words.

As kube-apiserver's webhook ``ClientManager``: a ``url`` clientConfig is posted to as is; a
``service`` one is addressed as ``https://<name>.<namespace>.svc:<port><path>`` (the name the
serving certificate is verified against) while the connection goes to the address the project's
``ServiceResolver`` gives (a ready endpoint, else the clusterIP), as the aggregator resolves
APIService services. Each configuration's webhook gets one ``WebhookClient`` with its own pooled
session and a bound on requests in flight, so a slow webhook cannot wedge the server. Failures are
worded as Go's ``net/http`` and client-go word them (``Post "<url>": ...``): clients see that text.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import errno
import socket
import ssl
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from yarl import URL

from genericapi.apimachinery import deepjson
from genericapi.apimachinery.go_json_errors import go_syntax_error
from genericapi.apimachinery.serviceresolver import ServiceResolutionError, ServiceResolver, host_port
from genericapi.httpclient import new_session

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


def _transport_message(exc: BaseException, host: str, port: int) -> str:
    if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
        return "context deadline exceeded"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        err = exc.certificate_error
        code = getattr(err, "verify_code", 0)
        if code in (2, 18, 19, 20, 21, 27):
            text = "x509: certificate signed by unknown authority"
        elif code == 62:
            text = f"x509: certificate is not valid for {host}"
        else:
            text = "x509: " + str(getattr(err, "verify_message", "") or err)
        return "tls: failed to verify certificate: " + text
    if isinstance(exc, aiohttp.ClientConnectorError):
        os_error = exc.os_error
        if isinstance(os_error, socket.gaierror):
            return f"dial tcp: lookup {host}: no such host"
        if os_error is not None and os_error.errno == errno.ECONNREFUSED:
            return f"dial tcp {host_port(host, port)}: connect: connection refused"
        return f"dial tcp {host_port(host, port)}: {os_error.strerror if os_error else exc}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
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


class WebhookClient:
    """POSTs AdmissionReviews to one webhook over a pooled session (``close()`` when dropped)."""

    def __init__(self, client_config: dict[str, Any], resolver: ServiceResolver | None) -> None:
        self.target = target_for(client_config)
        self.resolver = resolver
        self._ca_bundle = client_config.get("caBundle")
        self._session: aiohttp.ClientSession | None = None
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)

    def display_url(self, timeout: int) -> str:
        return f"{self.target.display_base}{self.target.path}?timeout={go_duration(timeout)}"

    def _session_for(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = new_session(ssl_context=ssl_context(self._ca_bundle), limit=MAX_IN_FLIGHT)
        return self._session

    def _base(self) -> str:
        if self.target.service is None:
            return self.target.display_base
        if self.resolver is None:
            raise ServiceResolutionError("NoResolver", "no service resolver configured")
        namespace, name, port = self.target.service
        return self.resolver.resolve(namespace, name, port)

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
            session = self._session_for()
            base = self._base()
        except ServiceResolutionError as err:
            raise CallError(f'Post "{url}": {err.message}') from err
        parsed = URL(base)
        host, port = parsed.raw_host or "", parsed.port or 443
        headers = {"Content-Type": "application/json", "Accept": "application/json, */*",
                   "Host": self.target.display_base.split("://", 1)[-1]}
        request_url = f"{base}{self.target.path or '/'}?timeout={go_duration(seconds)}"
        try:
            async with session.post(request_url, data=body, headers=headers,
                                    server_hostname=self.target.server_name or None) as resp:
                payload = await resp.read()
                status, content_type = resp.status, resp.headers.get("Content-Type", "")
        except TimeoutError:
            raise
        except (aiohttp.ClientError, OSError) as exc:
            raise CallError(f'Post "{url}": {_transport_message(exc, host, port)}') from exc
        if 200 <= status < 300:
            return payload
        raise CallError(_status_message(status, payload, content_type))

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
