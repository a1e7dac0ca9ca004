"""Service account issuer discovery as kube-apiserver 1.33 serves it, through the gateway.

``/.well-known/openid-configuration`` and ``/openid/v1/jwks``: kube's document fields and order,
content types and caching header; the key set's ``kid`` is the one ``kubectl create token``
tokens carry, so PyJWT's ``PyJWKClient`` (a relying party fetching the keys over HTTPS) verifies
such a token; readable by service accounts (``system:service-account-issuer-discovery``), not by
a user without a binding; other methods are go-restful's 405.
"""

from __future__ import annotations

import json
import ssl
import uuid

import jwt
import pytest
from aggregator.auth import load_public_keys
from cryptography.hazmat.primitives.asymmetric import ec
from genericapi.apimachinery import serviceaccount as satoken
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

CONFIG = "/.well-known/openid-configuration"
JWKS = "/openid/v1/jwks"


def _token(chain: ChainHandle, version: str = "") -> tuple[str, str]:
    name = f"oidc-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "serviceaccount", name, version=version)
    return name, chain.kubectl("create", "token", name, version=version).stdout.strip()


def test_documents_as_kube_serves_them(chain: ChainHandle) -> None:
    status, headers, body = chain.request("GET", CONFIG)
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    assert headers["cache-control"] == "public, max-age=3600"
    doc = json.loads(body)
    assert list(doc) == ["issuer", "jwks_uri", "response_types_supported", "subject_types_supported",
                         "id_token_signing_alg_values_supported"]
    assert doc == {"issuer": satoken.DEFAULT_ISSUER, "jwks_uri": f"https://127.0.0.1:{chain.chain.port}{JWKS}",
                   "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
                   "id_token_signing_alg_values_supported": ["ES256"]}

    status, headers, body = chain.request("GET", JWKS)
    assert status == 200, body
    assert headers["content-type"] == "application/jwk-set+json"
    assert headers["cache-control"] == "public, max-age=3600"
    keys = json.loads(body)["keys"]
    public = load_public_keys(chain.chain.pki.sa_pub)[0]
    assert len(keys) == 1 and list(keys[0]) == ["use", "kty", "kid", "crv", "alg", "x", "y"]
    assert keys[0]["kid"] == satoken.key_id(public) and keys[0]["use"] == "sig" and keys[0]["alg"] == "ES256"
    assert jwt.PyJWK(keys[0]).key.public_numbers() == public.public_numbers()


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_pyjwkclient_verifies_a_kubectl_token(chain: ChainHandle, version: str) -> None:
    name, token = _token(chain, version)
    assert jwt.get_unverified_header(token)["kid"]
    # The relying party reads the discovery document, then the keys, as a service account.
    auth = {"Authorization": f"Bearer {token}"}
    status, _h, body = chain.request("GET", CONFIG, headers=auth, auth=False)
    assert status == 200, body
    doc = json.loads(body)
    ctx = ssl.create_default_context(cafile=chain.chain.pki.ca)
    client = jwt.PyJWKClient(doc["jwks_uri"], headers=auth, ssl_context=ctx, cache_keys=False)
    key = client.get_signing_key_from_jwt(token)
    claims = jwt.decode(token, key.key, algorithms=doc["id_token_signing_alg_values_supported"],
                        audience=doc["issuer"], issuer=doc["issuer"])
    assert claims["sub"] == f"system:serviceaccount:default:{name}"
    # A token signed by another key is not verified by the served keys.
    other = ec.generate_private_key(ec.SECP256R1())
    forged = jwt.encode(claims, other, algorithm="ES256", headers={"kid": key.key_id})
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(forged, key.key, algorithms=["ES256"], audience=doc["issuer"])


def test_who_may_read_the_documents(chain: ChainHandle) -> None:
    # A user without a binding: kube's 403 for a non-resource path.
    status, _h, body = chain.request("GET", JWKS, headers={"Impersonate-User": "oidc-nobody"})
    assert status == 403, body
    assert json.loads(body)["message"] == 'forbidden: User "oidc-nobody" cannot get path "/openid/v1/jwks"'
    status, _h, body = chain.request("GET", CONFIG, headers={"Impersonate-User": "oidc-nobody"})
    assert status == 403
    # Bound to the group: allowed.
    status, _h, _b = chain.request("GET", CONFIG, headers={"Impersonate-User": "oidc-nobody",
                                                          "Impersonate-Group": "system:serviceaccounts"})
    assert status == 200
    # Only GET is routed (go-restful's 405 for another method on a known path).
    status, _h, body = chain.request("POST", JWKS, raw=b"{}")
    assert (status, body) == (405, b"405: Method Not Allowed")
    # A service account may get the documents, not write to them.
    _name, token = _token(chain)
    status, _h, body = chain.request("POST", CONFIG, raw=b"{}", headers={"Authorization": f"Bearer {token}"},
                                     auth=False)
    assert status == 403, body
