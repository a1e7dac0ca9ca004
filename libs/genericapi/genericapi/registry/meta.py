"""System-owned metadata: uid, timestamps, generated names."""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime
from typing import Any

from genericapi.apimachinery.uuids import new_uuid4

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
    without the UUID object and from random bytes read ahead (apimachinery.uuids)."""
    return new_uuid4()


def generate_name(prefix: str) -> str:
    if len(prefix) > _MAX_PREFIX:
        prefix = prefix[:_MAX_PREFIX]
    return prefix + "".join(secrets.choice(_ALPHANUMS) for _ in range(_SUFFIX_LEN))


#: The metadata a write sets whatever the client sent (or the client sets and the schema walk can
#: find nothing wrong in: a name is any string): what may differ between a request body whose
#: schema walk found nothing and the object validated, for that walk's verdict to stand. None of
#: them has a required field or an enum in ObjectMeta's or ManagedFieldsEntry's schema.
SERVER_SET_METADATA = frozenset({"name", "namespace", "uid", "creationTimestamp", "generation", "managedFields",
                                 "resourceVersion", "selfLink", "deletionTimestamp",
                                 "deletionGracePeriodSeconds"})


def same_but_server_metadata(obj: dict[str, Any], before: Any) -> bool:
    """Whether ``obj`` equals ``before`` (an object a schema walk found nothing in) but for the
    metadata fields in ``SERVER_SET_METADATA``: then that walk's verdict holds for ``obj`` too (a
    value equal but of another type, 1 for 1.0, can only make the walk stop at a type error
    sooner, never find a required or enum error the first walk did not)."""
    if not isinstance(before, dict) or obj.keys() != before.keys():
        return False
    for key, value in obj.items():
        if key == "metadata":
            old = before[key]
            if not isinstance(value, dict) or not isinstance(old, dict):
                return False
            if {k: v for k, v in value.items() if k not in SERVER_SET_METADATA} != \
                    {k: v for k, v in old.items() if k not in SERVER_SET_METADATA}:
                return False
        elif before[key] != value:
            return False
    return True
