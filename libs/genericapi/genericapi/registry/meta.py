"""System-owned metadata: uid, timestamps, generated names."""

from __future__ import annotations

import secrets
import uuid
from datetime import UTC, datetime

#: Characters kube-apiserver uses for generateName suffixes (no vowels, no look-alikes).
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIX_LEN = 5
#: generateName prefixes are cut so that prefix + suffix fits a 63-character name.
_MAX_PREFIX = 63 - _SUFFIX_LEN


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_uid() -> str:
    return str(uuid.uuid4())


def generate_name(prefix: str) -> str:
    if len(prefix) > _MAX_PREFIX:
        prefix = prefix[:_MAX_PREFIX]
    return prefix + "".join(secrets.choice(_ALPHANUMS) for _ in range(_SUFFIX_LEN))
