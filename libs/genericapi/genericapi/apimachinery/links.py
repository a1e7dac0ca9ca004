"""Addresses of links of the chain: ``unix:///run/core-api.sock`` or ``https://host:port``.

Shared by the gateway's proxy and the controllers' HTTP client (which lives below the server
layer), so both read a link's URL the same way.
"""

from __future__ import annotations


def unix_socket_path(base: str) -> str | None:
    """``unix:///run/core-api.sock`` or ``unix:/run/core-api.sock`` -> the socket path."""
    if not base.startswith("unix:"):
        return None
    return "/" + base[len("unix:"):].lstrip("/")


def http_base(base: str) -> str:
    """The URL prefix requests use: a Unix socket upstream is addressed as plain HTTP."""
    return "http://localhost" if base.startswith("unix:") else base
