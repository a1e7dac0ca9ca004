"""Service account JWTs: kube's claims and key id, and every way a token must be refused."""

from __future__ import annotations

import base64
import hashlib
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from genericapi.apimachinery import serviceaccount as sa

ISSUER = "https://kubernetes.default.svc.cluster.local"


def key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def token_for(k: sa.PrivateKey, **kw: object) -> str:
    args: dict[str, object] = {"issuer": ISSUER, "audiences": [ISSUER], "namespace": "ns", "name": "robot",
                               "uid": "u-1", "now": int(time.time()), "expiration_seconds": 3600}
    args.update(kw)
    return sa.issue(k, **args)[0]  # type: ignore[arg-type]


def test_claims_and_header_are_kubes() -> None:
    k = key()
    token, expires = sa.issue(k, issuer=ISSUER, audiences=["a", "b"], namespace="ns", name="robot", uid="u-1",
                              now=1000, expiration_seconds=3600,
                              bound=sa.BoundObject("Pod", "web-0", "p-1"))
    header = jwt.get_unverified_header(token)
    der = k.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert header["alg"] == "ES256"
    assert header["kid"] == base64.urlsafe_b64encode(hashlib.sha256(der).digest()).decode().rstrip("=")
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert expires == 4600
    assert claims["aud"] == ["a", "b"] and claims["iss"] == ISSUER and claims["sub"] == "system:serviceaccount:ns:robot"
    assert (claims["iat"], claims["nbf"], claims["exp"]) == (1000, 1000, 4600)
    assert claims["kubernetes.io"] == {"namespace": "ns", "serviceaccount": {"name": "robot", "uid": "u-1"},
                                       "pod": {"name": "web-0", "uid": "p-1"}}
    assert len(claims["jti"]) == 36


def test_a_valid_token_names_its_account() -> None:
    k = key()
    subject = sa.verify(token_for(k), [k.public_key()], issuers=[ISSUER], audiences=[ISSUER])
    assert (subject.namespace, subject.name, subject.uid) == ("ns", "robot", "u-1")
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert jwt.get_unverified_header(token_for(rsa_key))["alg"] == "RS256"
    assert sa.verify(token_for(rsa_key), [k.public_key(), rsa_key.public_key()], issuers=[ISSUER],
                     audiences=[ISSUER]).name == "robot"


@pytest.mark.parametrize("case", ["expired", "audience", "issuer", "key", "tampered", "garbage", "not yet"])
def test_bad_tokens_are_refused(case: str) -> None:
    k = key()
    keys = [k.public_key()]
    token = {
        "expired": lambda: token_for(k, now=int(time.time()) - 7200),
        "audience": lambda: token_for(k, audiences=["someone-else"]),
        "issuer": lambda: token_for(k, issuer="https://evil.example"),
        "key": lambda: token_for(key()),
        "tampered": lambda: _tamper(token_for(k)),
        "garbage": lambda: "a.b.c",
        "not yet": lambda: token_for(k, now=int(time.time()) + 600),
    }[case]()
    with pytest.raises(sa.TokenError):
        sa.verify(token, keys, issuers=[ISSUER], audiences=[ISSUER])


def _tamper(token: str) -> str:
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["kubernetes.io"]["serviceaccount"]["name"] = "admin"
    claims["sub"] = "system:serviceaccount:ns:admin"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"{header}.{forged}.{signature}"
