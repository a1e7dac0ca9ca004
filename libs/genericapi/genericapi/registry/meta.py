"""System-owned metadata: uid, timestamps, generated names."""

from __future__ import annotations

import os
import secrets
import time
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
    """A random (version 4, RFC 4122 variant) UUID as kube writes it: ``str(uuid.uuid4())``, made
    from the 16 random bytes directly (uuid.UUID's constructor and ``__str__`` were ~5 us of every
    create)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def generate_name(prefix: str) -> str:
    if len(prefix) > _MAX_PREFIX:
        prefix = prefix[:_MAX_PREFIX]
    return prefix + "".join(secrets.choice(_ALPHANUMS) for _ in range(_SUFFIX_LEN))
