"""Connections presenting one client certificate share one parsed copy of it (memory per watch).

Real TLS handshakes in memory (ssl.MemoryBIO) with certificates from the chain's own CA.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

from genericapi.server import tls
from genericapi.server.certs import ensure_certificates, issue_client_certificate


def _handshake(paths: Any, client_pair: tuple[str, str] | None) -> ssl.SSLObject:
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(*paths.pair("apiserver"))
    server_ctx.load_verify_locations(paths.ca)
    server_ctx.verify_mode = ssl.CERT_OPTIONAL
    client_ctx = ssl.create_default_context(cafile=paths.ca)
    client_ctx.check_hostname = False
    if client_pair is not None:
        client_ctx.load_cert_chain(*client_pair)
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    client = client_ctx.wrap_bio(c_in, c_out)
    done = {"server": False, "client": False}
    for _ in range(20):
        for name, side in (("client", client), ("server", server)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return server
    raise AssertionError("no handshake")


def test_one_certificate_is_parsed_once_and_shared(tmp_path: Path) -> None:
    paths = ensure_certificates(tmp_path)
    cert, key = issue_client_certificate(tmp_path, "alice", ["dev"])
    (tmp_path / "alice.crt").write_bytes(cert)
    (tmp_path / "alice.key").write_bytes(key)
    alice = (str(tmp_path / "alice.crt"), str(tmp_path / "alice.key"))
    first = tls.parsed_peer(_handshake(paths, alice))
    second = tls.parsed_peer(_handshake(paths, alice))
    assert first is not None and first is second
    assert tls.peer_identity({"extensions": {"tls": {"peercert": first}}}) == ("alice", ["dev"])
    cert, key = issue_client_certificate(tmp_path, "bob")
    (tmp_path / "bob.crt").write_bytes(cert)
    (tmp_path / "bob.key").write_bytes(key)
    bob = tls.parsed_peer(_handshake(paths, (str(tmp_path / "bob.crt"), str(tmp_path / "bob.key"))))
    assert bob is not first and tls.peer_identity({"extensions": {"tls": {"peercert": bob}}}) == ("bob", [])
    assert tls.parsed_peer(_handshake(paths, None)) is None  # no client certificate offered
