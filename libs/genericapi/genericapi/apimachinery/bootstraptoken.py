"""Bootstrap tokens: ``bootstrap.kubernetes.io/token`` Secrets, as kubeadm writes them and kube reads them.

A token is ``<id>.<secret>`` (6 and 16 characters of ``[a-z0-9]``, ``kubeadm token``'s form); its
Secret is ``kube-system/bootstrap-token-<id>`` with the data keys ``token-id``, ``token-secret``,
``expiration`` (RFC 3339), ``usage-bootstrap-authentication`` / ``usage-bootstrap-signing``
(``"true"``) and ``auth-extra-groups`` (comma-separated ``system:bootstrappers:...`` names).
kube-apiserver's authenticator (``--enable-bootstrap-token-auth``) and kube-controller-manager's
tokencleaner both read these helpers' answers.
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import UTC, datetime
from typing import Any

__all__ = ["DEFAULT_GROUP", "NAMESPACE", "SECRET_PREFIX", "SECRET_TYPE", "USER_PREFIX", "data", "expired",
           "groups", "parse_token"]

SECRET_TYPE = "bootstrap.kubernetes.io/token"
SECRET_PREFIX = "bootstrap-token-"
NAMESPACE = "kube-system"
USER_PREFIX = "system:bootstrap:"
DEFAULT_GROUP = "system:bootstrappers"
ID_KEY, SECRET_KEY, EXPIRATION_KEY = "token-id", "token-secret", "expiration"
USAGE_AUTHENTICATION = "usage-bootstrap-authentication"
EXTRA_GROUPS_KEY = "auth-extra-groups"

_TOKEN = re.compile(r"([a-z0-9]{6})\.([a-z0-9]{16})")
_GROUP = re.compile(r"system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]")


def parse_token(token: str) -> tuple[str, str] | None:
    """(id, secret) of a ``abcdef.0123456789abcdef`` token; None for anything else."""
    match = _TOKEN.fullmatch(token)
    return (match.group(1), match.group(2)) if match else None


def data(secret: dict[str, Any], key: str) -> str:
    """One data value, decoded ("" when missing or not base64)."""
    values = secret.get("data")
    value = values.get(key) if isinstance(values, dict) else None
    if not isinstance(value, str):
        return ""
    try:
        return base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""


def expiration(secret: dict[str, Any]) -> datetime | None:
    """When the token expires; None when it never does. ValueError for a value that is not RFC 3339."""
    text = data(secret, EXPIRATION_KEY)
    if not text:
        return None
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", text):
        raise ValueError(f"expiration {text!r} is not RFC 3339")
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def expired(secret: dict[str, Any], now: datetime | None = None) -> bool:
    """kube's ``HasExpired``: past its expiration; an unreadable expiration counts as expired."""
    try:
        when = expiration(secret)
    except ValueError:
        return True
    return when is not None and (now or datetime.now(UTC)) > when


def groups(secret: dict[str, Any]) -> list[str]:
    """``system:bootstrappers`` and the valid extra groups, sorted and deduplicated (kube's
    ``GetGroups``); ValueError naming a group kube refuses."""
    out = {DEFAULT_GROUP}
    extra = data(secret, EXTRA_GROUPS_KEY)
    if extra:
        for group in extra.split(","):
            if not _GROUP.fullmatch(group):
                raise ValueError(f"bootstrap group {group!r} is invalid (must match {_GROUP.pattern})")
            out.add(group)
    return sorted(out)
