"""The project's one HTTP client session factory.

Every outbound HTTP client of the chain (the gateway's reverse proxy, the controllers' transport
to other members, core-api's upstream proxy for connect subresources, APIService availability
probes, conversion and admission webhooks, the audit webhook) is an aiohttp session made here, so
that they agree on what matters across the project: pooled keep-alive connections (unbounded
unless a caller bounds them: an open watch holds one), a connect timeout so an unreachable peer
fails fast, no overall timeout unless asked (watches and long LISTs stream), and for proxies the
bytes passed through as they came (no decompression, no headers of aiohttp's own). The one
exception is ``new_http2_client``, for the peers kube reaches over HTTP/2 (admission webhooks).

aiohttp is imported by the first session made, not when a service starts (issue 15: ~0.4 s of
the fork server's import CPU, and nothing on the way to a first ``/readyz`` needs it); modules name
its types under ``TYPE_CHECKING`` and catch its errors with ``client_errors()``.
"""

from __future__ import annotations

import ssl
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import aiohttp
    import httpx

__all__ = ["CONNECT_TIMEOUT", "KEEPALIVE_SECONDS", "client_errors", "new_http2_client", "new_session"]

#: Seconds to open a connection (TCP and TLS handshake) before the call fails.
CONNECT_TIMEOUT = 5.0
#: Seconds an idle pooled connection is kept.
KEEPALIVE_SECONDS = 60.0


def new_session(*, ssl_context: ssl.SSLContext | bool | None = None, unix_path: str | None = None,
                limit: int = 0, force_close: bool = False, total_timeout: float | None = None,
                connect_timeout: float = CONNECT_TIMEOUT, passthrough: bool = False) -> aiohttp.ClientSession:
    """A pooled session: TCP (TLS with ``ssl_context``; None or False: plain, or TLS without
    verification for https URLs as aiohttp's ``ssl=False``) or one Unix socket (``unix_path``).

    ``limit``: connections at most (0: unbounded). ``force_close``: one connection per request
    (probes that must see a fresh handshake). ``total_timeout``: a bound on every call (None:
    none; callers may pass their own per call). ``passthrough``: a proxy's session, bodies
    left compressed and no User-Agent, Accept-Encoding or Content-Type added by aiohttp.
    """
    import aiohttp  # the first session loads it (see the module's docstring)

    keepalive = None if force_close else KEEPALIVE_SECONDS
    connector: aiohttp.BaseConnector
    if unix_path is not None:
        connector = aiohttp.UnixConnector(path=unix_path, limit=limit, keepalive_timeout=keepalive,
                                          force_close=force_close)
    else:
        connector = aiohttp.TCPConnector(limit=limit, ssl=ssl_context if ssl_context else False,
                                         keepalive_timeout=keepalive, force_close=force_close,
                                         ttl_dns_cache=300)
    timeout = aiohttp.ClientTimeout(total=total_timeout, sock_connect=connect_timeout)
    if passthrough:
        return aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False,
                                     skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"))
    return aiohttp.ClientSession(connector=connector, timeout=timeout)


_WITHOUT_AIOHTTP: tuple[type[Exception], ...] = (TimeoutError, OSError)


def client_errors(*more: type[Exception]) -> tuple[type[Exception], ...]:
    """What a failed call of a session raises, for ``except client_errors() as err``: TimeoutError,
    OSError and aiohttp's ClientError (and ``more``). Before aiohttp is loaded no session exists and
    none of its errors can be raised, so it is not imported for this (an except clause evaluates
    its types only when an exception arrives: the calls that succeed pay nothing)."""
    aiohttp = sys.modules.get("aiohttp")
    errors = _WITHOUT_AIOHTTP if aiohttp is None else (TimeoutError, OSError, aiohttp.ClientError)
    return errors + more if more else errors


def new_http2_client(*, ssl_context: ssl.SSLContext, limit: int = 0,
                     connect_timeout: float = CONNECT_TIMEOUT) -> httpx.AsyncClient:
    """A pooled client that offers HTTP/2 by ALPN, as Go's ``net/http`` does over TLS, and speaks
    HTTP/1.1 to a server that picks it: for callers kube reaches with Go's client whose peers may
    speak HTTP/2 (admission webhooks). aiohttp speaks HTTP/1.1 only, so this one is httpx (its
    HTTP/2 is the ``h2`` package). ``limit``: connections at most (0: unbounded); over HTTP/2 one
    connection carries every call at once. No overall timeout (callers bound each call); redirects
    are not followed and the environment's proxies are not used, as kube's webhook client.
    """
    import httpx  # only the services that call webhooks pay for importing it

    bound = limit or None
    return httpx.AsyncClient(
        http2=True, verify=ssl_context, trust_env=False, follow_redirects=False,
        limits=httpx.Limits(max_connections=bound, max_keepalive_connections=bound,
                            keepalive_expiry=KEEPALIVE_SECONDS),
        timeout=httpx.Timeout(None, connect=connect_timeout))
