"""Backends reached over TLS believe X-Remote-* only from the gateway's proxy client certificate."""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration

REVIEW = b'{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}'


@pytest.fixture(scope="module")
def tls_chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    chain = Chain(tmp_path_factory.mktemp("tls-chain"), port=free_port(), backend_transport="tls")
    chain.start(timeout=60)
    yield chain
    chain.stop()


def whoami_direct(chain: Chain, cert: str, headers: dict[str, str]) -> dict[str, object]:
    ctx = ssl.create_default_context(cafile=chain.pki.ca)
    ctx.load_cert_chain(*chain.pki.pair(cert))
    url = urllib.parse.urlsplit(chain.backend_urls["core-api"])
    assert url.hostname and url.port
    conn = http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=10)
    try:
        conn.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=REVIEW,
                     headers={"Content-Type": "application/json", **headers})
        resp = conn.getresponse()
        assert resp.status == 201
        return json.loads(resp.read())["status"]["userInfo"]  # type: ignore[no-any-return]
    finally:
        conn.close()


def test_gateway_certificate_may_assert_a_user(tls_chain: Chain) -> None:
    who = whoami_direct(tls_chain, "front-proxy-client", {"X-Remote-User": "alice", "X-Remote-Group": "devs"})
    assert who == {"username": "alice", "groups": ["devs"]}


def test_other_certificates_cannot(tls_chain: Chain) -> None:
    who = whoami_direct(tls_chain, "admin", {"X-Remote-User": "mallory", "X-Remote-Group": "system:masters"})
    assert who == {"username": "system:anonymous", "groups": ["system:unauthenticated"]}


def test_backend_without_a_client_certificate_refuses_the_connection(tls_chain: Chain) -> None:
    ctx = ssl.create_default_context(cafile=tls_chain.pki.ca)
    url = urllib.parse.urlsplit(tls_chain.backend_urls["core-api"])
    assert url.hostname and url.port
    conn = http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=10)
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
        conn.request("GET", "/api")
        conn.getresponse()
    conn.close()


def test_through_the_gateway_over_tls_links(tls_chain: Chain, tmp_path: Path) -> None:
    ctx = tls_chain.ssl_context()
    conn = http.client.HTTPSConnection("127.0.0.1", tls_chain.port, context=ctx, timeout=10)
    conn.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=REVIEW,
                 headers={"Content-Type": "application/json", "X-Remote-User": "evil"})
    resp = conn.getresponse()
    assert resp.status == 201
    assert json.loads(resp.read())["status"]["userInfo"]["username"] == "kubernetes-admin"
    conn.close()
