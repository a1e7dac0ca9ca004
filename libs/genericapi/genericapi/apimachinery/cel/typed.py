"""Typed strings: kube's CEL sees ``format: date-time/date/duration/byte`` strings as timestamp/duration/bytes.

apiextensions-apiserver declares a string property with one of these formats as a CEL
``timestamp`` (``date-time``, ``date``), ``duration`` or ``bytes`` and converts the JSON text when a
rule reads it (``k8s.io/apiserver/pkg/cel/common`` values), so ``self.start < self.end`` compares
instants and ``self.timeout > duration('1m')`` compares durations. The interpreter takes Python
``datetime`` / ``timedelta`` / ``bytes`` as those CEL types, so ``to_typed`` builds them here with
the parsers kube uses (go-openapi ``strfmt``: RFC 3339 date-times, Go or "3 days"-style
durations, standard base64).

Limits of the interpreter, not fixed here: timestamps and durations carry microseconds (kube:
nanoseconds; finer digits are dropped), and ``string(timestamp)`` prints ``+00:00`` where cel-go
prints ``Z``. A text that does not parse stays a string (schema validation already reports the bad
format; kube would instead fail the rule that reads it).
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

TYPED_FORMATS = frozenset({"date-time", "date", "duration", "byte"})

_DATETIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?([Zz]|[+-]\d{2}:?\d{2})?$")
_GO_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_DURATION = re.compile(r"^[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$")
_LOOSE = re.compile(r"(\d+)\s*([A-Za-zµ]+)")
_UNIT_MICROS = {"ns": 0.001, "us": 1, "µs": 1, "μs": 1, "ms": 1000, "s": 1_000_000, "m": 60_000_000,
                "h": 3_600_000_000}
_LOOSE_UNITS: dict[str, int] = {}
for _names, _micros in (
        (("ns", "nanosecond", "nanoseconds"), 0),
        (("us", "µs", "microsecond", "microseconds"), 1),
        (("ms", "millisecond", "milliseconds"), 1000),
        (("s", "sec", "secs", "second", "seconds"), 1_000_000),
        (("m", "min", "mins", "minute", "minutes"), 60_000_000),
        (("h", "hr", "hrs", "hour", "hours"), 3_600_000_000),
        (("d", "day", "days"), 86_400_000_000),
        (("w", "wk", "week", "weeks"), 604_800_000_000)):
    for _name in _names:
        _LOOSE_UNITS[_name] = _micros


def parse_datetime(text: str) -> datetime | None:
    """An RFC 3339 date-time (strfmt's accepted layouts); no offset means UTC."""
    m = _DATETIME.match(text)
    if m is None:
        return None
    year, month, day, hour, minute = (int(m.group(i)) for i in range(1, 6))
    second = int(m.group(6) or 0)
    micros = int((m.group(7) or "0")[:6].ljust(6, "0"))
    zone = m.group(8) or "Z"
    try:
        value = datetime(year, month, day, hour, minute, second, micros, tzinfo=UTC)
    except ValueError:
        return None
    if zone not in ("Z", "z"):
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        value = value - offset if zone[0] == "+" else value + offset
    return value


def parse_date(text: str) -> datetime | None:
    """A full-date (``2024-02-29``) as the timestamp of its midnight, UTC."""
    try:
        day = date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        return None
    return None if day is None else datetime(day.year, day.month, day.day, tzinfo=UTC)


def parse_duration(text: str) -> timedelta | None:
    """Go's ``time.ParseDuration``, else strfmt's "<n> <unit>" sums (``3 days``, ``1 hour 5 min``)."""
    if text in ("0", "+0", "-0"):
        return timedelta(0)
    if _GO_DURATION.match(text):
        go_micros = sum(float(n) * _UNIT_MICROS[unit] for n, unit in _GO_PART.findall(text))
        return timedelta(microseconds=-go_micros if text.startswith("-") else go_micros)
    total, found = 0, False
    for number, unit in _LOOSE.findall(text):
        key = unit.strip().lower()
        per_unit = _LOOSE_UNITS.get(key, _LOOSE_UNITS.get(key.removesuffix("s")))
        if per_unit is not None:
            total += int(number) * per_unit
            found = True
    return timedelta(microseconds=total) if found else None


def parse_bytes(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


_PARSERS = {"date-time": parse_datetime, "date": parse_date, "duration": parse_duration, "byte": parse_bytes}


def to_typed(value: str, fmt: str) -> Any:
    """``value`` as kube's CEL types a string of format ``fmt`` (unchanged when it does not parse)."""
    parsed = _PARSERS[fmt](value)
    return value if parsed is None else parsed
