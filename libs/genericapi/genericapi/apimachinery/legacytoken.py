"""Legacy service account tokens: the never-expiring JWTs kube's TokensController writes into
``kubernetes.io/service-account-token`` Secrets.

As kube's ``serviceaccount.LegacyClaims``: issuer ``kubernetes/serviceaccount``, ``sub``
``system:serviceaccount:<ns>:<name>`` and four private claims naming the namespace, the account
(name and uid) and the Secret; no audience, no expiry. Verifying checks the signature (PyJWT, the
same keys as bound tokens) and the claims, with kube's error texts; whether the Secret still holds
this very token and the account still has that uid is the authenticator's lookup.
"""

from __future__ import annotations

from dataclasses import dataclass

import jwt

from . import serviceaccount as satoken

__all__ = ["LEGACY_ISSUER", "LegacySubject", "issue", "verify"]

LEGACY_ISSUER = "kubernetes/serviceaccount"
NAMESPACE_CLAIM = "kubernetes.io/serviceaccount/namespace"
SECRET_NAME_CLAIM = "kubernetes.io/serviceaccount/secret.name"
SA_NAME_CLAIM = "kubernetes.io/serviceaccount/service-account.name"
SA_UID_CLAIM = "kubernetes.io/serviceaccount/service-account.uid"


@dataclass(frozen=True)
class LegacySubject:
    namespace: str
    name: str
    uid: str
    secret_name: str


def issue(key: satoken.PrivateKey, *, namespace: str, name: str, uid: str, secret_name: str) -> str:
    """The token kube writes into the Secret (claims in Go's sorted map order, header without typ)."""
    claims = {"iss": LEGACY_ISSUER, NAMESPACE_CLAIM: namespace, SECRET_NAME_CLAIM: secret_name,
              SA_NAME_CLAIM: name, SA_UID_CLAIM: uid, "sub": satoken.username(namespace, name)}
    algorithm = satoken._algorithm(key)
    return jwt.encode(claims, key, algorithm=algorithm,
                      headers={"alg": algorithm, "kid": satoken.key_id(key.public_key()), "typ": None})


def is_legacy(token: str) -> bool:
    """Whether the (unverified) token claims the legacy issuer; cheap, for routing a token."""
    try:
        return bool(jwt.decode(token, options={"verify_signature": False}).get("iss") == LEGACY_ISSUER)
    except jwt.PyJWTError:
        return False


def verify(token: str, keys: list[satoken.PublicKey]) -> LegacySubject:
    """The subject of a legacy token signed by one of ``keys``; TokenError (kube's text) if not."""
    try:
        kid = jwt.get_unverified_header(token).get("kid")
    except jwt.PyJWTError as err:
        raise satoken.TokenError(f"not a service account token: {err}") from None
    claims = None
    last: Exception | None = None
    for key in keys:
        if kid and kid != satoken.key_id(key):
            continue
        try:
            claims = jwt.decode(token, key, algorithms=[satoken._algorithm(key)], issuer=LEGACY_ISSUER,
                                options={"verify_aud": False})
            break
        except jwt.PyJWTError as err:
            last = err
    if claims is None:
        raise satoken.TokenError(f"invalid bearer token: {last or 'no key matches its kid'}")
    subject = str(claims.get("sub") or "")
    if not subject:
        raise satoken.TokenError("sub claim is missing")
    values = {}
    for claim, what in ((NAMESPACE_CLAIM, "namespace"), (SECRET_NAME_CLAIM, "secretName"),
                        (SA_NAME_CLAIM, "serviceAccountName"), (SA_UID_CLAIM, "serviceAccountUID")):
        value = claims.get(claim)
        if not isinstance(value, str) or not value:
            raise satoken.TokenError(f"{what} claim is missing")
        values[claim] = value
    namespace, name = values[NAMESPACE_CLAIM], values[SA_NAME_CLAIM]
    if subject != satoken.username(namespace, name):
        raise satoken.TokenError("sub claim is invalid")
    return LegacySubject(namespace, name, values[SA_UID_CLAIM], values[SECRET_NAME_CLAIM])
