"""What the gateway keeps between requests instead of working it out again (issue 15: CPU per request):
the user of a client certificate (per parsed certificate, as kube's x509 authenticator caches per
certificate) and the RequestInfo of a (method, path, query) seen before. Each gives exactly what the
computation gives, for real certificates parsed by ``ssl`` and for kube's RequestInfo cases."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
from aggregator import auth, filters
from aggregator.auth import Authenticator
from genericapi.apimachinery.requestinfo import RequestInfoError, parse_request_info
from genericapi.apimachinery.user import ANONYMOUS_USER, UserInfo
from genericapi.server.certs import ensure_certificates, issue_client_certificate


def _peer(tmp_path: Path, name: str, groups: list[str]) -> dict[str, Any]:
    """A client certificate the chain's CA signs, parsed as ``ssl`` parses a verified peer's."""
    pki = tmp_path / "pki"
    ensure_certificates(pki)
    crt, _key = issue_client_certificate(pki, name, groups)
    pem = tmp_path / f"{name}.crt"
    pem.write_bytes(crt)
    decoded: dict[str, Any] = ssl._ssl._test_decode_cert(str(pem))  # type: ignore[attr-defined]
    return decoded


def _scope(peer: dict[str, Any] | None, token: str = "") -> dict[str, Any]:
    headers = [(b"authorization", b"Bearer " + token.encode())] if token else []
    scope: dict[str, Any] = {"type": "http", "headers": headers}
    if peer is not None:
        scope["extensions"] = {"tls": {"peercert": peer}}
    return scope


def test_a_certificates_user_is_made_once_and_is_what_the_certificate_says(tmp_path: Path) -> None:
    alice = _peer(tmp_path, "alice", ["devs", "ops"])
    bob = _peer(tmp_path, "bob", [])
    authn = Authenticator({"t": UserInfo("tok", ("g",))}, anonymous=True)
    first = authn.authenticate(_scope(alice))
    assert first == UserInfo("alice", ("devs", "ops", "system:authenticated"))
    assert authn.authenticate(_scope(alice)) is first  # kept with the parsed certificate
    assert authn.authenticate(_scope(bob)) == UserInfo("bob", ("system:authenticated",))
    # The same certificate parsed again (another connection after tls._PEERS was cleared): a new entry.
    again = dict(alice)
    assert authn.authenticate(_scope(again)) == first
    # No certificate: the token, then anonymous, as before.
    assert authn.authenticate(_scope(None, "t")) == UserInfo("tok", ("g", "system:authenticated"))
    assert authn.authenticate(_scope(None)) is ANONYMOUS_USER


def test_a_certificate_without_a_common_name_leaves_it_to_the_token(tmp_path: Path) -> None:
    nameless = {"subject": ((("organizationName", "devs"),),)}
    authn = Authenticator({"t": UserInfo("tok")}, anonymous=False)
    for _ in range(2):
        assert authn.authenticate(_scope(nameless, "t")) == UserInfo("tok", ("system:authenticated",))
        assert authn.authenticate(_scope(nameless)) is None


def test_the_certificate_memo_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "CERTIFICATE_USERS", 4)
    authn = Authenticator({})
    peers = [{"subject": ((("commonName", f"u{i}"),),)} for i in range(10)]
    for peer in peers:
        assert authn.authenticate(_scope(peer)) == UserInfo(peer["subject"][0][0][1], ("system:authenticated",))
    assert len(authn._by_certificate) <= 4


CASES = [
    ("GET", "/api/v1/namespaces/default/configmaps/c", b""),
    ("GET", "/api/v1/namespaces/default/configmaps", b"watch=1&resourceVersion=5"),
    ("GET", "/apis/apps/v1/watch/namespaces/ns/deployments/d", b""),
    ("POST", "/api/v1/namespaces/default/pods/p/exec", b"command=ls"),
    ("DELETE", "/api/v1/namespaces/default/configmaps", b"labelSelector=a%3Db"),
    ("GET", "/healthz", b""),
    ("GET", "/api/v1/watch", b""),  # kube cannot read it: None
    ("PATCH", "/apis/example.com/v1/namespaces/x/widgets/w/status", b""),
]


@pytest.mark.parametrize(("method", "path", "query"), CASES)
def test_a_repeated_request_gets_the_request_info_it_got_before(method: str, path: str, query: bytes) -> None:
    try:
        expected = parse_request_info(method, path, query.decode("latin-1"))
    except RequestInfoError:
        expected = None
    scopes = [{"method": method, "path": path, "query_string": query} for _ in range(3)]
    got = [filters.parse_info(s) for s in scopes]
    assert got == [expected] * 3
    assert all(s[filters.REQUEST_INFO] == expected for s in scopes)
    if expected is not None:
        assert got[1] is got[0]  # kept, not parsed again


def test_long_urls_are_never_kept_and_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(filters, "_INFOS", {})
    monkeypatch.setattr(filters, "INFO_CACHE_SIZE", 8)
    long_path = "/api/v1/namespaces/default/configmaps/" + "x" * 1000
    info = filters.parse_info({"method": "GET", "path": long_path, "query_string": b""})
    assert info is not None and info.name == "x" * 1000
    assert not filters._INFOS
    for i in range(20):
        filters.parse_info({"method": "GET", "path": f"/api/v1/namespaces/n{i}/pods", "query_string": b""})
    assert 0 < len(filters._INFOS) <= 8
