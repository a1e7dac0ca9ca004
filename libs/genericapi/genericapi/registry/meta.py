"""System-owned metadata: uid, timestamps, generated names."""

from __future__ import annotations

import secrets
import time
import uuid
from datetime import UTC, datetime

#: Characters kube-apiserver uses for generateName suffixes (no vowels, no look-alikes).
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIX_LEN = 5
#: generateName prefixes are cut so that prefix + suffix fits a 63-character name.
_MAX_PREFIX = 63 - _SUFFIX_LEN


_last: tuple[int, str] = (0, "")


def now_rfc3339() -> str:
    """The current time at second precision (formatted once per second: it is on every write)."""
    global _last
    second = int(time.time())
    if _last[0] != second:
        _last = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return _last[1]


def new_uid() -> str:
    return str(uuid.uuid4())


def generate_name(prefix: str) -> str:
    if len(prefix) > _MAX_PREFIX:
        prefix = prefix[:_MAX_PREFIX]
    return prefix + "".join(secrets.choice(_ALPHANUMS) for _ in range(_SUFFIX_LEN))
