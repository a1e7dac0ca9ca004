"""Service account issuer discovery: the OIDC documents kube-apiserver serves for its token issuer.

``/.well-known/openid-configuration`` names the issuer, where its keys are (``jwks_uri``) and the
signing algorithms; ``/openid/v1/jwks`` is the JSON Web Key Set of the public keys that verify
service account tokens, each with kube's ``kid`` (see ``serviceaccount.key_id``) and ``use: sig``.
Relying parties outside the cluster (cloud workload identity, Vault, any OIDC library) use them
to check a ``kubectl create token`` JWT without calling the API server.

As kube's ``NewOpenIDMetadataProvider``: the issuer must be an https URL without query or
fragment, and the JWKS URI is ``--service-account-jwks-uri`` (https) or derived from the external
address; anything else means the endpoints are not served (``DiscoveryError``). Both documents
are rendered once (keys change only across restarts), in the field order kube's encoders write.
The JWK members come from PyJWT's key export; only their order is ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from . import serviceaccount as satoken

__all__ = ["CACHE_CONTROL", "CONFIG_PATH", "JWKS_CONTENT_TYPE", "JWKS_PATH", "DiscoveryDocuments",
           "DiscoveryError", "build_documents", "jwk"]

CONFIG_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/openid/v1/jwks"
#: kube's routes override the API server's ``private, no-cache`` with an hour of public caching.
CACHE_CONTROL = "public, max-age=3600"
#: RFC 7517's media type for a key set (kube's ``mimeJWKS``).
JWKS_CONTENT_TYPE = "application/jwk-set+json"

_EC_ALGORITHMS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
#: go-jose's JSONWebKey field order (use, kty, kid, crv, alg, then the key material).
_JWK_ORDER = ("use", "kty", "kid", "crv", "alg", "x", "y", "n", "e")


class DiscoveryError(ValueError):
    """The issuer or JWKS URI cannot be served as OIDC discovery (kube skips the endpoints)."""


@dataclass(frozen=True)
class DiscoveryDocuments:
    config: bytes
    keyset: bytes


def algorithm(key: satoken.PublicKey) -> str:
    if isinstance(key, rsa.RSAPublicKey):
        return "RS256"
    name = key.curve.name
    if name not in _EC_ALGORITHMS:
        raise DiscoveryError("unknown private key curve, must be 256, 384, or 521")
    return _EC_ALGORITHMS[name]


def jwk(key: satoken.PublicKey) -> dict[str, Any]:
    """The public key as kube's JWKS lists it."""
    exported = ECAlgorithm.to_jwk(key, as_dict=True) if isinstance(key, ec.EllipticCurvePublicKey) \
        else RSAAlgorithm.to_jwk(key, as_dict=True)
    members = {**exported, "use": "sig", "kid": satoken.key_id(key), "alg": algorithm(key)}
    return {name: members[name] for name in _JWK_ORDER if name in members}


def _check_issuer(issuer: str) -> None:
    parts = urlsplit(issuer)
    if parts.scheme != "https":
        raise DiscoveryError(f"issuer URL must use https scheme, got: {issuer}")
    if parts.query:
        raise DiscoveryError(f"issuer URL may not include a query, got: {issuer}")
    if parts.fragment:
        raise DiscoveryError(f"issuer URL may not include a fragment, got: {issuer}")


def jwks_uri(explicit: str, external_address: str) -> str:
    """``--service-account-jwks-uri``, else ``https://<external address>/openid/v1/jwks``."""
    if explicit:
        if urlsplit(explicit).scheme != "https":
            raise DiscoveryError(f"jwksURI requires https scheme, parsed as: {explicit}")
        return explicit
    if not external_address:
        raise DiscoveryError("either the JWKS URI or the default external address, or both, must be set")
    uri = f"https://{external_address}{JWKS_PATH}"
    parts = urlsplit(uri)
    if parts.netloc != external_address or parts.path != JWKS_PATH:
        raise DiscoveryError(f"attempted to build jwks_uri from external address {external_address}, "
                             "but could not construct a valid URL")
    return uri


def build_documents(issuer: str, explicit_jwks_uri: str, external_address: str,
                    keys: list[satoken.PublicKey]) -> DiscoveryDocuments:
    """Both documents, rendered once; DiscoveryError when kube would not serve them."""
    if not issuer:
        raise DiscoveryError("empty issuer URL")
    _check_issuer(issuer)
    uri = jwks_uri(explicit_jwks_uri, external_address)
    if not keys:
        raise DiscoveryError("no keys provided for validating keyset")
    jwks = [jwk(k) for k in keys]
    config = {"issuer": issuer, "jwks_uri": uri, "response_types_supported": ["id_token"],
              "subject_types_supported": ["public"],
              "id_token_signing_alg_values_supported": sorted({k["alg"] for k in jwks})}
    return DiscoveryDocuments(orjson.dumps(config), orjson.dumps({"keys": jwks}))
