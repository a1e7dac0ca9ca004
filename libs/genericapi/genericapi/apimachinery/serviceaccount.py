"""ServiceAccount tokens: the JWTs kube-apiserver issues (TokenRequest) and accepts as identity.

Claims as kube's ``serviceaccount.Claims``: ``iss`` (``--service-account-issuer``), ``sub``
(``system:serviceaccount:<ns>:<name>``), ``aud``, ``exp``/``iat``/``nbf``, ``jti`` and the private
``kubernetes.io`` claim naming the namespace, the account (name and uid) and any object the token
is bound to (a Pod, Secret or Node, name and uid). The header's ``kid`` is kube's key id: the
unpadded URL-safe base64 of the SHA-256 of the public key's DER. Signing and checking are PyJWT's
on ``cryptography`` keys (ES256 for EC keys, RS256 for RSA keys); nothing here is hand-rolled.

Verifying a token checks signature, issuer, audience and time; whether the account (and the
bound object) still exists with the same uid is the caller's lookup (``TokenSubject``).
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

__all__ = ["BoundObject", "TokenError", "TokenSubject", "groups_of", "issue", "key_id", "username", "verify"]

USERNAME_PREFIX = "system:serviceaccount:"
ALL_GROUP = "system:serviceaccounts"
#: kube's default issuer and audience when the chain is started without its own (kubeadm's choice).
DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
#: UserInfo.extra keys kube sets for a service account token.
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"
POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"
NODE_NAME = "authentication.kubernetes.io/node-name"
NODE_UID = "authentication.kubernetes.io/node-uid"

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
PublicKey = ec.EllipticCurvePublicKey | rsa.RSAPublicKey


class TokenError(ValueError):
    """The token is not one of ours, or no longer valid."""


@dataclass(frozen=True)
class BoundObject:
    kind: str  # Pod, Secret or Node
    name: str
    uid: str


@dataclass(frozen=True)
class TokenSubject:
    """What a valid token says about who holds it."""

    namespace: str
    name: str
    uid: str
    jti: str = ""
    bound: tuple[BoundObject, ...] = field(default_factory=tuple)


def username(namespace: str, name: str) -> str:
    return f"{USERNAME_PREFIX}{namespace}:{name}"


def groups_of(namespace: str) -> tuple[str, ...]:
    return (ALL_GROUP, f"{ALL_GROUP}:{namespace}")


def key_id(public_key: PublicKey) -> str:
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()).decode().rstrip("=")


def _algorithm(key: PrivateKey | PublicKey) -> str:
    return "ES256" if isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)) else "RS256"


def issue(key: PrivateKey, *, issuer: str, audiences: list[str], namespace: str, name: str, uid: str,
          now: int, expiration_seconds: int, bound: BoundObject | None = None,
          node: BoundObject | None = None) -> tuple[str, int]:
    """A signed token for the account; also its expiry (seconds since the epoch)."""
    expires = now + expiration_seconds
    private: dict[str, Any] = {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}}
    for obj in (bound, node):
        if obj is not None:
            private[obj.kind.lower()] = {"name": obj.name, "uid": obj.uid}
    claims = {"aud": audiences, "exp": expires, "iat": now, "iss": issuer, "jti": str(uuid.uuid4()),
              "kubernetes.io": private, "nbf": now, "sub": username(namespace, name)}
    token = jwt.encode(claims, key, algorithm=_algorithm(key), headers={"kid": key_id(key.public_key())})
    return token, expires


def verify(token: str, keys: list[PublicKey], *, issuers: list[str], audiences: list[str]) -> TokenSubject:
    """The subject of a token signed by one of ``keys`` for one of ``audiences``; TokenError if not."""
    try:
        unverified = jwt.get_unverified_header(token)
        claims_unverified = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as err:
        raise TokenError(f"not a service account token: {err}") from None
    if claims_unverified.get("iss") not in issuers:
        raise TokenError("token issuer is not one of ours")
    last: Exception | None = None
    for key in keys:
        if unverified.get("kid") and unverified["kid"] != key_id(key):
            continue
        try:
            claims = jwt.decode(token, key, algorithms=[_algorithm(key)], audience=audiences, issuer=issuers,
                                options={"require": ["exp", "iat", "sub", "iss"]}, leeway=0)
        except jwt.PyJWTError as err:
            last = err
            continue
        return _subject(claims)
    raise TokenError(f"invalid bearer token: {last or 'no key matches its kid'}")


def _subject(claims: dict[str, Any]) -> TokenSubject:
    private = claims.get("kubernetes.io")
    if not isinstance(private, dict):
        raise TokenError("token lacks the kubernetes.io claim")
    account = private.get("serviceaccount") or {}
    namespace, name, uid = str(private.get("namespace") or ""), str(account.get("name") or ""), \
        str(account.get("uid") or "")
    if not (namespace and name and uid) or claims.get("sub") != username(namespace, name):
        raise TokenError("token names no service account")
    bound = tuple(BoundObject(kind.capitalize(), str(ref.get("name") or ""), str(ref.get("uid") or ""))
                  for kind in ("pod", "secret", "node") if isinstance(ref := private.get(kind), dict))
    return TokenSubject(namespace, name, uid, str(claims.get("jti") or ""), bound)
