"""What a Go decode-then-encode round trip does to a value, for objects kubechain keeps as JSON.

kube-apiserver decodes every built-in object into Go structs and encodes it again before it
stores or answers, so clients see canonical forms, not what they sent:

- ``metav1.Time`` is written as UTC RFC 3339 with whole seconds (``2024-01-01T08:00:00Z`` for a
  sent ``2024-01-01T10:00:00.5+02:00``); ``metav1.MicroTime`` as UTC with six fraction digits.
- ``[]byte`` fields (Secret ``data``, ``caBundle`` ...) are base64 that Go's decoder reads
  skipping ``\\r`` and ``\\n`` (PEM-style 76-column wrapping, as in Kubernetes' own TLS Secret
  example), and write back unwrapped.
- ObjectMeta's collections are all ``omitempty``: an empty ``annotations: {}`` or
  ``finalizers: []`` vanishes (kubectl's client-side apply patch sends ``annotations: {}``; kube's
  dry-run answer has none, so ``kubectl diff`` of an unchanged object is empty).

Each helper returns the canonical value, or raises ``ValueError`` with Go's wording where Go's
decoder fails.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

__all__ = ["OBJECT_META_OMITEMPTY", "canonical_base64", "canonical_time", "drop_empty_meta_collections"]

#: ObjectMeta fields that are maps or slices; all are ``omitempty`` in Go.
OBJECT_META_OMITEMPTY = ("labels", "annotations", "finalizers", "ownerReferences", "managedFields")

_TIME_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:(Z)|([+-])(\d{2}):(\d{2}))$")
_TIME_LAYOUT = "2006-01-02T15:04:05Z07:00"
_MICRO_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"


def canonical_time(value: str, micro: bool) -> str:
    """The JSON Go writes for a ``metav1.Time`` (``micro``: ``MicroTime``) decoded from ``value``."""
    m = _TIME_RE.match(value)
    layout = _MICRO_LAYOUT if micro else _TIME_LAYOUT
    if m is None:
        raise ValueError(f'parsing time "{value}" as "{layout}": cannot parse "{value}" as "2006"')
    year, month, day, hour, minute, second = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    # Go's range checks, in the order its parser meets them, with its wording.
    for name, number, low, high in (("month", month, 1, 12), ("day", day, 1, 31), ("hour", hour, 0, 23),
                                    ("minute", minute, 0, 59), ("second", second, 0, 59)):
        if not low <= number <= high:
            raise ValueError(f'parsing time "{value}": {name} out of range')
    zone: timezone = UTC
    if not m.group(8):
        off_hours, off_minutes = int(m.group(10)), int(m.group(11))
        if off_hours > 24:
            raise ValueError(f'parsing time "{value}": time zone offset hour out of range')
        if off_minutes > 60:
            raise ValueError(f'parsing time "{value}": time zone offset minute out of range')
        offset = timedelta(hours=off_hours, minutes=off_minutes)
        if offset >= timedelta(hours=24):
            return value  # valid for Go, not representable here: kept as sent
        zone = timezone(-offset if m.group(9) == "-" else offset)
    if year == 0:
        return value  # likewise
    if day > calendar.monthrange(year, month)[1]:
        raise ValueError(f'parsing time "{value}": day out of range')
    fraction = m.group(7) or ""
    if micro and len(fraction) != 6:
        # The layout's ".000000" takes exactly seven bytes, or the parse fails there.
        rest = value[19:]
        if len(rest) < 7 or not fraction:
            raise ValueError(f'parsing time "{value}" as "{layout}": cannot parse "{rest}" as ".000000"')
        raise ValueError(f'parsing time "{value}" as "{layout}": cannot parse "{rest[7:]}" as "Z07:00"')
    micros = int((fraction + "000000")[:6])
    try:
        when = datetime(year, month, day, hour, minute, second, micros, tzinfo=zone).astimezone(UTC)
    except (ValueError, OverflowError):
        return value  # outside Python's datetime range (years 1-9999 in UTC)
    if micro:
        return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond:06d}Z"
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def canonical_base64(value: str) -> str:
    """The base64 Go writes for a ``[]byte`` decoded from ``value`` (``\\r``/``\\n`` skipped).

    Raises ``ValueError("illegal base64 data at input byte N")`` with Go's N when the value is
    not standard padded base64.
    """
    wrapped = "\n" in value or "\r" in value
    compact = value.replace("\r", "").replace("\n", "") if wrapped else value
    try:
        decoded = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        decoded = None
    canonical = base64.b64encode(decoded).decode("ascii") if decoded is not None else ""
    if decoded is None or len(canonical) != len(compact):  # Python is laxer about surplus padding
        raise ValueError(f"illegal base64 data at input byte {_go_corrupt_position(value)}")
    return canonical


_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _go_corrupt_position(src: str) -> int:
    """Where Go's ``base64.StdEncoding`` decoder stops (its ``CorruptInputError``), by walking the
    input in quanta of four as its ``decodeQuantum`` does; 0 if it would not fail."""
    si, size = 0, len(src)
    while True:
        j = 0
        while j < 4:
            if si == size:
                if j == 0:
                    return 0
                return si - j
            char = src[si]
            si += 1
            if char in _ALPHABET:
                j += 1
                continue
            if char in "\r\n":
                continue
            if char != "=" or j < 2:
                return si - 1
            if j == 2:  # "==" expected: the first is consumed
                while si < size and src[si] in "\r\n":
                    si += 1
                if si == size:
                    return size
                if src[si] != "=":
                    return si - 1
                si += 1
            while si < size and src[si] in "\r\n":
                si += 1
            return si if si < size else 0
        # a whole quantum: go on


def drop_empty_meta_collections(meta: Any) -> None:
    """Remove ObjectMeta's empty maps and lists, as Go's ``omitempty`` encoding does (in place)."""
    if not isinstance(meta, dict):
        return
    for key in OBJECT_META_OMITEMPTY:
        value = meta.get(key, 0)
        if value is None or (isinstance(value, (dict, list)) and not value):
            del meta[key]
