"""Gateway authentication (client certificates, static tokens) and the self-signed credentials.

The peer certificate in the scope has the shape ``ssl.SSLObject.getpeercert()`` returns: a
``subject`` of RDN tuples of ``(name, value)`` pairs. Tokens use kube-apiserver's
``--token-auth-file`` CSV: ``token,user,uid,"group1,group2"``.
"""

from __future__ import annotations

import os
import ssl
import stat
from pathlib import Path
from typing import Any

import pytest
from aggregator.auth import Authenticator, UserInfo, load_token_file
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from genericapi.server.certs import SERVING_IPS, SERVING_NAMES, ensure_certificates

ADMIN_PEERCERT = {
    "subject": ((("organizationName", "system:masters"),), (("commonName", "kubernetes-admin"),)),
    "issuer": ((("commonName", "kubechain-ca"),),),
    "version": 3,
    "serialNumber": "0A",
    "notBefore": "Jan  1 00:00:00 2026 GMT",
    "notAfter": "Jan  1 00:00:00 2027 GMT",
}


def _scope(peercert: dict[str, Any] | None = None, authorization: str | None = None) -> dict[str, Any]:
    scope: dict[str, Any] = {"type": "http", "headers": [(b"accept", b"application/json")]}
    if authorization is not None:
        scope["headers"].append((b"authorization", authorization.encode("latin-1")))
    if peercert is not None:
        scope["extensions"] = {"tls": {"peercert": peercert}}
    return scope


# -- token file -----------------------------------------------------------------------------------


def _token_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "tokens.csv"
    path.write_text(text)
    return str(path)


def test_load_token_file(tmp_path: Path) -> None:
    path = _token_file(tmp_path, (
        'secret1,alice,uid-1,"devs,ops"\n'
        "secret2,bob,uid-2\n"
        "# comment,x,y\n"
        "short,row\n"
        ",empty-token,uid-3\n"
        'secret3,carol,uid-4,""\n'
        'secret4,dave,uid-5,"a,,b"\n'
    ))
    tokens = load_token_file(path)
    assert tokens == {
        "secret1": UserInfo("alice", ("devs", "ops"), "uid-1"),
        "secret2": UserInfo("bob", (), "uid-2"),
        "secret3": UserInfo("carol", (), "uid-4"),
        "secret4": UserInfo("dave", ("a", "b"), "uid-5"),
    }


def test_no_token_file() -> None:
    assert load_token_file("") == {}


def test_missing_token_file_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        load_token_file(str(tmp_path / "absent.csv"))


def test_user_info_headers() -> None:
    user = UserInfo("alice", ("devs", "system:authenticated"), "uid-1", {"scopes": ["a", "b"]})
    assert user.headers() == [
        ("X-Remote-User", "alice"),
        ("X-Remote-Group", "devs"),
        ("X-Remote-Group", "system:authenticated"),
        ("X-Remote-Uid", "uid-1"),
        ("X-Remote-Extra-scopes", "a"),
        ("X-Remote-Extra-scopes", "b"),
    ]
    assert UserInfo("bob").headers() == [("X-Remote-User", "bob")]


# -- authenticate ---------------------------------------------------------------------------------


@pytest.fixture
def authenticator() -> Authenticator:
    return Authenticator({"tok-alice": UserInfo("alice", ("devs",), "uid-1")})


def test_client_certificate_cn_is_user_and_o_are_groups(authenticator: Authenticator) -> None:
    user = authenticator.authenticate(_scope(ADMIN_PEERCERT))
    assert user == UserInfo("kubernetes-admin", ("system:masters", "system:authenticated"))


def test_multi_valued_rdn_and_several_organizations(authenticator: Authenticator) -> None:
    cert = {"subject": ((("organizationName", "team-a"), ("organizationName", "team-b")),
                        (("countryName", "US"),), (("commonName", "jane"),))}
    user = authenticator.authenticate(_scope(cert))
    assert user is not None
    assert user.name == "jane"
    assert user.groups == ("team-a", "team-b", "system:authenticated")


def test_certificate_wins_over_a_bearer_token(authenticator: Authenticator) -> None:
    user = authenticator.authenticate(_scope(ADMIN_PEERCERT, "Bearer tok-alice"))
    assert user is not None and user.name == "kubernetes-admin"


def test_certificate_without_cn_falls_back_to_the_token(authenticator: Authenticator) -> None:
    cert = {"subject": ((("organizationName", "system:masters"),),)}
    assert authenticator.authenticate(_scope(cert)) is None
    user = authenticator.authenticate(_scope(cert, "Bearer tok-alice"))
    assert user == UserInfo("alice", ("devs", "system:authenticated"), "uid-1")


@pytest.mark.parametrize("peercert", [None, {}])
def test_no_certificate_and_no_token_is_anonymous_none(authenticator: Authenticator,
                                                       peercert: dict[str, Any] | None) -> None:
    assert authenticator.authenticate(_scope(peercert)) is None


@pytest.mark.parametrize("header", ["Bearer tok-alice", "bearer tok-alice", "BEARER tok-alice",
                                    "Bearer tok-alice "])
def test_bearer_token(authenticator: Authenticator, header: str) -> None:
    user = authenticator.authenticate(_scope(authorization=header))
    assert user == UserInfo("alice", ("devs", "system:authenticated"), "uid-1")


@pytest.mark.parametrize("header", ["Bearer wrong", "Basic dG9rLWFsaWNlOg==", "tok-alice", "Bearer", "Bearer ",
                                    "Bearertok-alice", ""])
def test_bad_bearer_tokens(authenticator: Authenticator, header: str) -> None:
    assert authenticator.authenticate(_scope(authorization=header)) is None


def test_empty_token_row_cannot_be_matched_by_an_empty_bearer(tmp_path: Path) -> None:
    tokens = load_token_file(_token_file(tmp_path, ",mallory,uid-9,system:masters\n"))
    assert Authenticator(tokens).authenticate(_scope(authorization="Bearer ")) is None


def test_a_client_x_remote_header_is_not_an_identity(authenticator: Authenticator) -> None:
    scope = _scope()
    scope["headers"].append((b"x-remote-user", b"system:admin"))
    assert authenticator.authenticate(scope) is None


# -- certificates ---------------------------------------------------------------------------------

LEAVES = ("apiserver", "backend", "front-proxy-client", "admin")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pki")
    ensure_certificates(directory)
    return directory


def _cert(pki: Path, name: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate((pki / f"{name}.crt").read_bytes())


def _eku(cert: x509.Certificate) -> set[x509.ObjectIdentifier]:
    return set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def test_all_files_exist_and_keys_are_private(pki: Path) -> None:
    for name in ("ca", *LEAVES):
        assert (pki / f"{name}.crt").is_file()
        key = pki / f"{name}.key"
        assert stat.S_IMODE(os.stat(key).st_mode) == 0o600, name
    assert not list(pki.glob("*.tmp"))


def test_ca_is_a_ca(pki: Path) -> None:
    ca = _cert(pki, "ca")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert ca.subject == ca.issuer


@pytest.mark.parametrize("name", LEAVES)
def test_leaves_are_signed_by_the_ca_and_not_cas(pki: Path, name: str) -> None:
    ca, leaf = _cert(pki, "ca"), _cert(pki, name)
    assert leaf.issuer == ca.subject
    leaf.verify_directly_issued_by(ca)
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False


@pytest.mark.parametrize("name", ["apiserver", "backend"])
def test_serving_certificates_san(pki: Path, name: str) -> None:
    cert = _cert(pki, name)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns = set(san.get_values_for_type(x509.DNSName))
    ips = {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    assert {"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local"} <= dns
    assert {"127.0.0.1", "::1"} <= ips
    assert dns == set(SERVING_NAMES) and ips == {str(ip) for ip in SERVING_IPS}
    assert _eku(cert) == {ExtendedKeyUsageOID.SERVER_AUTH}


def test_admin_is_a_system_masters_client(pki: Path) -> None:
    cert = _cert(pki, "admin")
    orgs = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    cns = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    assert orgs == ["system:masters"] and cns == ["kubernetes-admin"]
    assert _eku(cert) == {ExtendedKeyUsageOID.CLIENT_AUTH}
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_front_proxy_client_is_a_client_only(pki: Path) -> None:
    cert = _cert(pki, "front-proxy-client")
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "front-proxy-client"
    assert _eku(cert) == {ExtendedKeyUsageOID.CLIENT_AUTH}


@pytest.mark.parametrize("name", ("ca", *LEAVES))
def test_private_keys_match_certificates(pki: Path, name: str) -> None:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key((pki / f"{name}.key").read_bytes(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert key.public_key().public_numbers() == _cert(pki, name).public_key().public_numbers()  # type: ignore[union-attr]


def test_files_load_into_an_ssl_context(pki: Path) -> None:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(pki / "apiserver.crt"), str(pki / "apiserver.key"))
    server.load_verify_locations(str(pki / "ca.crt"))
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))


def test_second_call_rewrites_nothing(tmp_path: Path) -> None:
    ensure_certificates(tmp_path)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    paths = ensure_certificates(tmp_path)
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    assert after == before
    assert paths.ca == str(tmp_path / "ca.crt")
    assert paths.pair("admin") == (str(tmp_path / "admin.crt"), str(tmp_path / "admin.key"))


def test_a_missing_leaf_is_reissued_alone_by_the_same_ca(tmp_path: Path) -> None:
    ensure_certificates(tmp_path)
    ca_before = (tmp_path / "ca.crt").read_bytes()
    apiserver_before = (tmp_path / "apiserver.crt").read_bytes()
    (tmp_path / "admin.key").unlink()
    ensure_certificates(tmp_path)
    assert (tmp_path / "ca.crt").read_bytes() == ca_before
    assert (tmp_path / "apiserver.crt").read_bytes() == apiserver_before
    admin = _cert(tmp_path, "admin")
    admin.verify_directly_issued_by(_cert(tmp_path, "ca"))


def test_creates_the_directory(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "pki"
    ensure_certificates(target)
    assert (target / "ca.crt").is_file()
