"""Client certificates in the ASGI scope: uvicorn does not expose them, so its HTTP protocol is
extended to record the verified peer certificate of each TLS connection in
``scope["extensions"]["tls"]`` (the ASGI TLS extension's place for it).
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

from .corking import CorkedHttpToolsProtocol

#: Parsed client certificates by their DER bytes. Every connection of one client presents the same
#: certificate, so they share one parsed dict (only read) instead of ~1.2 KiB each: a thousand watches
#: of one user held a thousand copies. Cleared when full.
_PEERS: dict[bytes, dict[str, Any]] = {}
_PEERS_MAX = 1024


def parsed_peer(ssl_object: Any) -> dict[str, Any] | None:
    """The verified peer certificate of a TLS connection, parsed (shared by its other connections)."""
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    peer = _PEERS.get(der)
    if peer is None:
        if len(_PEERS) >= _PEERS_MAX:
            _PEERS.clear()
        peer = _PEERS[der] = ssl_object.getpeercert()
    return peer


class ClientCertProtocol(CorkedHttpToolsProtocol):
    _peer: dict[str, Any] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        self._peer = parsed_peer(ssl_object) if ssl_object is not None else None

    def shutdown(self) -> None:
        """On graceful stop an idle keep-alive connection is dropped at once, as Go's server closes
        idle connections. A TLS close would wait for the client's close_notify, which an idle pooled
        client never sends: the whole stop then waited out its 10 s grace."""
        if self.cycle is None or self.cycle.response_complete:
            self.transport.abort()
        else:
            super().shutdown()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._peer:
            self.scope["extensions"] = {"tls": {"peercert": self._peer}}  # type: ignore[typeddict-unknown-key]



def peer_identity(scope: MutableMapping[str, Any]) -> tuple[str, list[str]] | None:
    """(common name, organizations) of the verified client certificate, if any."""
    peer = ((scope.get("extensions") or {}).get("tls") or {}).get("peercert")
    if not peer:
        return None
    cn = ""
    orgs: list[str] = []
    for rdn in peer.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                cn = value
            elif key == "organizationName":
                orgs.append(value)
    return cn, orgs
