"""Token authenticators that look a Secret up: legacy service account tokens and bootstrap tokens.

Legacy tokens (kube's ``NewLegacyValidator`` with lookup): a valid signature and legacy claims
(``genericapi.apimachinery.legacytoken``), the Secret still exists (not being deleted, not
labelled invalid since a past date) and still holds exactly this token, and the account still
exists with the token's uid. The user is the account, as for a bound token.

Bootstrap tokens (kube's bootstrap ``TokenAuthenticator``, ``--enable-bootstrap-token-auth``):
``<id>.<secret>`` matches ``kube-system/bootstrap-token-<id>`` of type
``bootstrap.kubernetes.io/token``, not expired, with ``usage-bootstrap-authentication: "true"``;
the user is ``system:bootstrap:<id>`` in ``system:bootstrappers`` and its extra groups.

Each answers None for a token that is not its kind or not valid (the gateway's 401).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from genericapi.apimachinery import bootstraptoken, legacytoken
from genericapi.apimachinery import serviceaccount as satoken
from genericapi.apimachinery.user import UserInfo

log = logging.getLogger(__name__)

#: kube 1.29+: a legacy token whose Secret carries this label (a date) is refused from that date on.
INVALID_SINCE_LABEL = "kubernetes.io/legacy-token-invalid-since"

SecretGetter = Callable[[str, str], dict[str, Any] | None]


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _secret_token(secret: dict[str, Any]) -> bytes:
    data = secret.get("data")
    value = data.get("token") if isinstance(data, dict) else None
    if not isinstance(value, str):
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        return b""


@dataclass
class LegacyTokens:
    keys: list[satoken.PublicKey]
    secret: SecretGetter
    #: (namespace, name) -> the account's uid, or None when it does not exist
    account_uid: Callable[[str, str], str | None]

    def authenticate(self, token: str) -> UserInfo | None:
        if token.count(".") != 2 or not legacytoken.is_legacy(token):
            return None
        try:
            subject = legacytoken.verify(token, self.keys)
        except satoken.TokenError as err:
            log.debug("legacy token refused: %s", err)
            return None
        secret = self.secret(subject.namespace, subject.secret_name)
        if secret is None or _meta(secret).get("deletionTimestamp"):
            return None  # kube: "token has been invalidated"
        if not hmac.compare_digest(_secret_token(secret), token.encode()):
            return None  # "token does not match server's copy"
        invalid_since = ((_meta(secret).get("labels") or {}).get(INVALID_SINCE_LABEL) or "")
        if invalid_since and invalid_since <= datetime.now(UTC).strftime("%Y-%m-%d"):
            return None
        if self.account_uid(subject.namespace, subject.name) != subject.uid:
            return None  # the account is gone, or was made again under the same name
        return UserInfo(satoken.username(subject.namespace, subject.name),
                        (*satoken.groups_of(subject.namespace), "system:authenticated"), subject.uid)


@dataclass
class BootstrapTokens:
    secret: SecretGetter

    def authenticate(self, token: str) -> UserInfo | None:
        parsed = bootstraptoken.parse_token(token)
        if parsed is None:
            return None
        token_id, token_secret = parsed
        secret = self.secret(bootstraptoken.NAMESPACE, bootstraptoken.SECRET_PREFIX + token_id)
        if secret is None or _meta(secret).get("deletionTimestamp") \
                or secret.get("type") != bootstraptoken.SECRET_TYPE or not secret.get("data"):
            return None
        if not hmac.compare_digest(bootstraptoken.data(secret, bootstraptoken.SECRET_KEY).encode(),
                                   token_secret.encode()):
            return None
        if bootstraptoken.data(secret, bootstraptoken.ID_KEY) != token_id or bootstraptoken.expired(secret):
            return None
        if bootstraptoken.data(secret, bootstraptoken.USAGE_AUTHENTICATION) != "true":
            return None
        try:
            groups = bootstraptoken.groups(secret)
        except ValueError as err:
            log.info("bootstrap token %s: %s", token_id, err)
            return None
        return UserInfo(bootstraptoken.USER_PREFIX + token_id, (*groups, "system:authenticated"))
