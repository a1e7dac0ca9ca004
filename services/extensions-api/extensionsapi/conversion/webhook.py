"""The HTTP side of a conversion webhook: where to POST, TLS, and Go's wording for failures.

As kube-apiserver's webhook ``ClientManager``: a ``url`` clientConfig is posted to as is; a
``service`` one is addressed as ``https://<name>.<namespace>.svc:<port><path>`` (that name is what
the serving certificate is verified against) while the connection goes to the address the
``ServiceResolver`` gives. The server is verified with ``caBundle`` (else the system roots); the
request carries ``?timeout=30s`` and gives up after that long. Failures are reported the way Go's
``net/http`` and client-go print them (``Post "<url>": ...``) because clients see that text.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime
import errno
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from cryptography import x509
from genericapi.apimachinery import deepjson
from genericapi.apimachinery.serviceresolver import ServiceResolutionError, ServiceResolver, host_port
from genericapi.httpclient import new_session

from .review import ReviewError

if TYPE_CHECKING:
    import aiohttp  # loaded by the first CRD conversion's session (genericapi.httpclient), not at start-up

#: kube-apiserver's webhook client timeout (``webhook.defaultRequestTimeout``).
DEFAULT_TIMEOUT = 30.0
_MAX_ERROR_BODY = 2048  # client-go keeps this much of a non-Status error body
_TLS_PREFIX = "tls: failed to verify certificate: "


def go_duration(seconds: float) -> str:
    """``time.Duration.String()`` for the timeouts used here (``30s``, ``1.5s``, ``500ms``)."""
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:g}ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:g}s"
    if minutes:
        hours, minutes = divmod(int(minutes), 60)
        text = (f"{hours}h" if hours else "") + f"{minutes}m" + text
    return text


@dataclass(frozen=True)
class Target:
    """Where one conversion webhook lives."""

    display_base: str  # https://host:port as the URL names it (errors, Host header)
    path: str
    server_name: str  # TLS server name to verify
    service: tuple[str, str, int] | None  # (namespace, name, port) to resolve per call


def target_for(client_config: dict[str, Any]) -> Target:
    """The Target of a CRD's ``spec.conversion.webhook.clientConfig``."""
    service = client_config.get("service")
    if isinstance(service, dict):
        namespace, name = str(service.get("namespace") or ""), str(service.get("name") or "")
        svc_port = int(service.get("port") or 443)
        server_name = f"{name}.{namespace}.svc"
        return Target("https://" + host_port(server_name, svc_port), str(service.get("path") or ""), server_name,
                      (namespace, name, svc_port))
    url = str(client_config.get("url") or "")
    if not url:
        raise ReviewError("webhook configuration must have either service or URL")
    from yarl import URL  # aiohttp's URL type: loaded by the first CRD with a webhook URL

    parsed = URL(url)
    host = parsed.raw_host or ""
    port = parsed.explicit_port
    base = f"{parsed.scheme}://" + (host_port(host, port) if port else (f"[{host}]" if ":" in host else host))
    return Target(base, parsed.raw_path, host, None)


def ssl_context(ca_bundle: str | None, client_cert: tuple[str, str] | None = None) -> ssl.SSLContext:
    """Verify with ``caBundle`` (base64 of PEM, as in the CRD's JSON) or the system roots."""
    if ca_bundle:
        try:
            pem = base64.b64decode(ca_bundle, validate=True).decode("ascii", "replace")
        except (binascii.Error, ValueError) as err:
            raise ReviewError("unable to load root certificates: unable to parse bytes as PEM block") from err
        try:
            ctx = ssl.create_default_context(cadata=pem)
        except (ssl.SSLError, ValueError) as err:
            raise ReviewError("unable to load root certificates: unable to parse bytes as PEM block") from err
    else:
        ctx = ssl.create_default_context()
    if client_cert is not None:
        ctx.load_cert_chain(*client_cert)
    return ctx


async def fetch_peer_certificate(host: str, port: int, server_name: str) -> x509.Certificate | None:
    """The server's leaf certificate, read over an unverified handshake (only to word an error)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(5):
            _reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=server_name)
    except (OSError, TimeoutError):
        return None
    try:
        sslobj = writer.get_extra_info("ssl_object")
        der = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
        return x509.load_der_x509_certificate(der) if der else None
    finally:
        writer.close()


def x509_message(err: ssl.SSLCertVerificationError, host: str, cert: x509.Certificate | None) -> str:
    """Go's ``crypto/x509`` wording for a failed verification."""
    code = getattr(err, "verify_code", 0)
    if code == 62 and cert is not None:
        return _hostname_error(cert, host)
    if code in (9, 10) and cert is not None:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if code == 10:
            limit = cert.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ")
            return f"x509: certificate has expired or is not yet valid: current time {now} is after {limit}"
        limit = cert.not_valid_before_utc.strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"x509: certificate has expired or is not yet valid: current time {now} is before {limit}"
    if code in (2, 18, 19, 20, 21, 27):
        return "x509: certificate signed by unknown authority"
    return "x509: " + str(getattr(err, "verify_message", "") or err)


def _hostname_error(cert: x509.Certificate, host: str) -> str:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = san.get_values_for_type(x509.DNSName)
        ips = [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    except x509.ExtensionNotFound:
        return "x509: certificate relies on legacy Common Name field, use SANs instead"
    try:
        ipaddress.ip_address(host)
        if not ips:
            return f"x509: cannot validate certificate for {host} because it doesn't contain any IP SANs"
        valid = ", ".join(ips)
    except ValueError:
        valid = ", ".join(dns)
    if not valid:
        return f"x509: certificate is not valid for any names, but wanted to match {host}"
    return f"x509: certificate is valid for {valid}, not {host}"


def generic_status_message(status: int, body: bytes, content_type: str) -> str:
    """client-go's ``NewGenericServerResponse`` text for a non-2xx answer that is no Status."""
    server_message = "unknown"
    if content_type.startswith("text/"):
        server_message = body[:_MAX_ERROR_BODY].decode("utf-8", "replace").strip()
    fixed = {
        409: "the server reported a conflict",
        404: "the server could not find the requested resource",
        400: "the server rejected our request for an unknown reason",
        401: "the server has asked for the client to provide credentials",
        405: "the server does not allow this method on the requested resource",
        422: "the server rejected our request due to an error in our request",
        503: "the server is currently unable to handle the request",
        504: "the server was unable to return a response in the time allotted, but may still be processing the request",
        429: "the server has received too many requests and has asked us to try again later",
    }
    if status in (403, 406, 415):
        return server_message
    if status in fixed:
        return fixed[status]
    if status >= 500:
        return f'an error on the server ("{_go_escape(server_message)}") has prevented the request from succeeding'
    return f"the server responded with the status code {status} but did not return more information"


def _go_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")


def transport_message(exc: BaseException, host: str, port: int) -> str:
    """What Go's dialer/transport says for a connection-level failure."""
    import aiohttp  # loaded already: the failure came from a session

    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, aiohttp.ServerTimeoutError)):
        return "context deadline exceeded"
    if isinstance(exc, aiohttp.ClientConnectorError):
        os_error = exc.os_error
        if isinstance(os_error, socket.gaierror):
            return f"dial tcp: lookup {host}: no such host"
        if os_error is not None and os_error.errno == errno.ECONNREFUSED:
            return f"dial tcp {host_port(host, port)}: connect: connection refused"
        if os_error is not None and os_error.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
            return f"dial tcp {host_port(host, port)}: connect: no route to host"
        return f"dial tcp {host_port(host, port)}: {os_error.strerror if os_error else exc}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "EOF"
    return str(exc)


class WebhookClient:
    """POSTs ConversionReviews for one CRD over a pooled session (``close()`` on shutdown)."""

    def __init__(self, client_config: dict[str, Any], resolver: ServiceResolver | None,
                 client_cert: tuple[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.target = target_for(client_config)
        self.resolver = resolver
        self.timeout = timeout
        self._ca_bundle = client_config.get("caBundle")
        self._client_cert = client_cert
        self._ssl: ssl.SSLContext | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def display_url(self) -> str:
        return f"{self.target.display_base}{self.target.path}?timeout={go_duration(self.timeout)}"

    def _session_for(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            if self._ssl is None:
                self._ssl = ssl_context(self._ca_bundle, self._client_cert)
            self._session = new_session(ssl_context=self._ssl, limit=64)
        return self._session

    def _base(self) -> str:
        """The base URL to connect to (a service reference resolved now)."""
        if self.target.service is None:
            return self.target.display_base
        if self.resolver is None:
            raise ServiceResolutionError("NoResolver", "no service resolver configured")
        namespace, name, port = self.target.service
        return self.resolver.resolve(namespace, name, port)

    async def post(self, body: bytes) -> bytes:
        """The 2xx answer's body; else ReviewError worded as client-go reports the failure."""
        import aiohttp
        from yarl import URL  # aiohttp's URL type, loaded with it

        session = self._session_for()
        url = self.display_url
        try:
            base = self._base()
        except ServiceResolutionError as err:
            raise ReviewError(f'Post "{url}": {err.message}') from err
        parsed = URL(base)
        host, port = parsed.raw_host or "", parsed.port or 443
        headers = {"Content-Type": "application/json", "Accept": "application/json, */*",
                   "Host": self.target.display_base.removeprefix("https://").removeprefix("http://")}
        request_url = f"{base}{self.target.path or '/'}?timeout={go_duration(self.timeout)}"
        try:
            async with asyncio.timeout(self.timeout):
                async with session.post(request_url, data=body, headers=headers,
                                        server_hostname=self.target.server_name) as resp:
                    payload = await resp.read()
                    status, content_type = resp.status, resp.headers.get("Content-Type", "")
        except aiohttp.ClientConnectorCertificateError as exc:
            cert_err = exc.certificate_error
            peer = None
            code = getattr(cert_err, "verify_code", 0)
            if isinstance(cert_err, ssl.SSLCertVerificationError) and code in (9, 10, 62):
                peer = await fetch_peer_certificate(host, port, self.target.server_name)
            text = x509_message(cert_err, self.target.server_name, peer) \
                if isinstance(cert_err, ssl.SSLCertVerificationError) else str(cert_err)
            raise ReviewError(f'Post "{url}": {_TLS_PREFIX}{text}') from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ReviewError(f'Post "{url}": {transport_message(exc, host, port)}') from exc
        if 200 <= status < 300:
            return payload
        raise ReviewError(_error_from_status(status, payload, content_type))

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


def _error_from_status(status: int, body: bytes, content_type: str) -> str:
    """A non-2xx answer: its Status message when the body is a Status, else client-go's text."""
    if "json" in content_type or body[:1] == b"{":
        try:
            doc = deepjson.loads(body)
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and doc.get("kind") == "Status" and doc.get("status") == "Failure":
            return str(doc.get("message") or "")
    return generic_status_message(status, body, content_type)
