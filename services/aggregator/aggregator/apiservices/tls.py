"""TLS to an aggregated API server, as kube-aggregator's proxy transport builds it.

The backend's certificate is verified against the APIService's ``caBundle`` (the system roots
when it has none) for the name ``<service>.<namespace>.svc``, whatever address the Service
resolved to; ``insecureSkipTLSVerify`` skips verification. The gateway always presents its proxy
client certificate, so the backend can trust the ``X-Remote-*`` headers it receives.
"""

from __future__ import annotations

import ssl
from typing import Any


class _NamedContext(ssl.SSLContext):
    """An SSLContext that sends SNI for, and verifies, a fixed server name (Go's ``ServerName``)."""

    server_name: str = ""

    def wrap_bio(self, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO, server_side: bool = False,
                 server_hostname: Any = None, session: Any = None) -> ssl.SSLObject:
        name = self.server_name or server_hostname
        return super().wrap_bio(incoming, outgoing, server_side, name, session)


def backend_context(client_cert: tuple[str, str] | None, *, ca_bundle: bytes = b"", insecure: bool = False,
                    server_name: str = "") -> ssl.SSLContext:
    """The client context for one APIService's backend."""
    ctx = _NamedContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif ca_bundle:
        ctx.load_verify_locations(cadata=ca_bundle.decode("ascii", "replace"))
        ctx.server_name = server_name
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        ctx.server_name = server_name
    if client_cert is not None:
        ctx.load_cert_chain(*client_cert)
    return ctx


def probe_context(client_cert: tuple[str, str] | None) -> ssl.SSLContext:
    """The availability check's context: no verification (kube's check is best effort), our cert."""
    return backend_context(client_cert, insecure=True)
