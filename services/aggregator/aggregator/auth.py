"""Authentication at the gateway: client certificates (CN = user, O = groups), static bearer
tokens (``--token-auth-file``, kube-apiserver's CSV format) and service account tokens (JWTs from
TokenRequest, checked for signature, issuer, audience, expiry and that the account still exists
with the uid the token names), legacy service account tokens and bootstrap tokens (tokenauth.py),
in kube's order. The result travels to the backends as ``X-Remote-User`` / ``X-Remote-Group`` /
``X-Remote-Extra-*``.

As kube's authenticator with ``--anonymous-auth`` (kube's default; ``anonymous``): a request
that presents no credentials at all is ``system:anonymous`` in ``system:unauthenticated``, left to
the authorizer; a bearer token that no authenticator accepts stays a failure (None: the 401), as
kube's union fails on an error before the anonymous authenticator is asked. A header that is not a
non-empty bearer token (``Basic ...``, ``Bearer`` alone) is no credential, as kube's bearer token
authenticator ignores it.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from genericapi.apimachinery import serviceaccount as satoken
from genericapi.apimachinery.user import ANONYMOUS_USER, UserInfo
from genericapi.server.tls import peer_identity

from .tokenauth import BootstrapTokens, LegacyTokens

__all__ = ["Authenticator", "UserInfo", "bearer_token", "load_token_file"]


def bearer_token(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The token of the first ``Authorization`` header, read as kube's bearertoken authenticator
    reads it ("": none, the request presents no token): trimmed, split on single spaces, the
    scheme ``bearer`` in any case, the token the second field (``Bearer  x``'s is empty)."""
    for key, value in headers:
        if key == b"authorization":
            parts = value.decode("latin-1").strip().split(" ", 2)
            if len(parts) < 2 or parts[0].lower() != "bearer":
                return ""
            return parts[1]
    return ""


def load_token_file(path: str) -> dict[str, UserInfo]:
    tokens: dict[str, UserInfo] = {}
    if not path:
        return tokens
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if len(row) < 3 or not row[0] or row[0].startswith("#"):
                continue
            groups = tuple(g for g in (row[3].split(",") if len(row) > 3 else []) if g)
            tokens[row[0]] = UserInfo(row[1], groups, row[2])
    return tokens


@dataclass
class ServiceAccountTokens:
    """``--service-account-key-file`` and friends: how a service account token is checked."""

    keys: list[satoken.PublicKey]
    issuers: list[str]
    audiences: list[str]
    #: (namespace, name) -> the account's uid, or None when it does not exist
    account_uid: Callable[[str, str], str | None]

    def authenticate(self, token: str) -> UserInfo | None:
        if token.count(".") != 2:
            return None  # not a JWT
        try:
            subject = satoken.verify(token, self.keys, issuers=self.issuers, audiences=self.audiences)
        except satoken.TokenError:
            return None
        if self.account_uid(subject.namespace, subject.name) != subject.uid:
            return None  # the account is gone, or was deleted and made again
        return UserInfo(satoken.username(subject.namespace, subject.name),
                        (*satoken.groups_of(subject.namespace), "system:authenticated"), subject.uid)


def load_public_keys(path: str) -> list[satoken.PublicKey]:
    """The PEM public keys (or certificates, or private keys) in a ``--service-account-key-file``."""
    blocks = re.findall(rb"-----BEGIN [A-Z ]+-----.*?-----END [A-Z ]+-----", Path(path).read_bytes(), re.S)
    if not blocks:
        raise ValueError(f"{path}: no PEM key found")
    return [_public_key(block) for block in blocks]


def _public_key(pem: bytes) -> satoken.PublicKey:
    if b"PRIVATE KEY" in pem:
        private = serialization.load_pem_private_key(pem, None)
        key = private.public_key()
    elif b"CERTIFICATE" in pem:
        key = x509.load_pem_x509_certificate(pem).public_key()
    else:
        key = serialization.load_pem_public_key(pem)
    if not isinstance(key, (ec.EllipticCurvePublicKey, rsa.RSAPublicKey)):
        raise ValueError("service account keys must be EC or RSA keys")
    return key


#: Client certificates whose user is kept (tls.parsed_peer keeps as many parsed certificates).
CERTIFICATE_USERS = 1024


class Authenticator:
    def __init__(self, tokens: dict[str, UserInfo], service_accounts: ServiceAccountTokens | None = None,
                 *, anonymous: bool = False) -> None:
        self.tokens = tokens
        self.service_accounts = service_accounts
        #: Legacy Secret-based service account tokens (with a Secret view; None: not accepted).
        self.legacy: LegacyTokens | None = None
        #: ``--enable-bootstrap-token-auth`` (None: off, kube-apiserver's own default).
        self.bootstrap: BootstrapTokens | None = None
        #: ``--anonymous-auth``: a request without credentials is system:anonymous (else a 401).
        self.anonymous = anonymous
        #: id of a parsed client certificate -> (it, its user): see ``_certificate_user``.
        self._by_certificate: dict[int, tuple[dict[str, Any], UserInfo | None]] = {}

    def authenticate(self, scope: MutableMapping[str, Any]) -> UserInfo | None:
        """The user, ``system:anonymous`` for no credentials (when enabled), or None: a 401."""
        user = self._certificate_user(scope)
        if user is not None:
            return user
        token = bearer_token(scope.get("headers", ()))
        if token:
            return self.authenticate_token(token)
        return ANONYMOUS_USER if self.anonymous else None

    def _certificate_user(self, scope: MutableMapping[str, Any]) -> UserInfo | None:
        """The user of the connection's verified client certificate (None: none, or no common name).
        Every request of a connection (and every connection of one client: tls.parsed_peer shares one
        parsed certificate among them) presents the same certificate, so its user is made once and kept
        with it, as kube's x509 authenticator caches its verdict per certificate (issue 15: CPU per
        request). The entry holds the parsed certificate itself, so its ``id`` is not reused while kept."""
        extensions = scope.get("extensions")
        if not extensions:
            return None
        peer = (extensions.get("tls") or {}).get("peercert")
        if not peer:
            return None
        cached = self._by_certificate.get(id(peer))
        if cached is not None and cached[0] is peer:
            return cached[1]
        identity = peer_identity(scope)
        user = UserInfo(identity[0], (*identity[1], "system:authenticated")) \
            if identity is not None and identity[0] else None
        if len(self._by_certificate) >= CERTIFICATE_USERS:
            self._by_certificate.clear()
        self._by_certificate[id(peer)] = (peer, user)
        return user

    def authenticate_token(self, token: str) -> UserInfo | None:
        """A bearer token's user, asking each token authenticator in kube's order."""
        user = self.tokens.get(token)
        if user is not None:
            return UserInfo(user.name, (*user.groups, "system:authenticated"), user.uid)
        for authenticator in (self.service_accounts, self.legacy, self.bootstrap):
            if authenticator is not None:
                user = authenticator.authenticate(token)
                if user is not None:
                    return user
        return None
