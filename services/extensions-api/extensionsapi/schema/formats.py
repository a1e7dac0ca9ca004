"""The string formats CRD schemas validate (apiextensions' supported set at 1.33) and their checks.

apiextensions drops every other format before building the validator
(``StripUnsupportedFormatsPostProcess``): unknown string formats, integer formats other than
int32/int64 and number formats other than float/double are ignored. The checks mirror
kube-openapi's ``strfmt`` registry (which mostly wraps Go's ``net``, ``net/mail``, ``time`` and
govalidator), as far as the observable accept/reject decision goes.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from datetime import date
from typing import Any

_UUID = re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
_UUID3 = re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
_UUID4 = re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
_UUID5 = re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
_LETTER = r"[^\W\d_]"
_HOST_CH = rf"(?:[a-zA-Z0-9]|{_LETTER})"
_HOSTNAME = re.compile(
    rf"^({_HOST_CH}((-?{_HOST_CH}{{0,62}})?)|({_HOST_CH}((({_HOST_CH}|-){{0,61}}{_HOST_CH})?)(\.)){{1,}}"
    rf"({_HOST_CH})(-?{_HOST_CH}){{1,62}})$")
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_TIME_PART = re.compile(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
_HEXCOLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_BYTE_RE = r"(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])"
_RGBCOLOR = re.compile(rf"^rgb\(\s*{_BYTE_RE}\s*,\s*{_BYTE_RE}\s*,\s*{_BYTE_RE}\s*\)$")
_SSN = re.compile(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$")
_CREDITCARD = re.compile(r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01]"
                         r"[0-9]|2720)[0-9]{12}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])"
                         r"[0-9]{11}|(?:2131|1800|35\d{3})\d{11}|6[27][0-9]{14})$")
_BSON_ID = re.compile(r"^[0-9a-fA-F]{24}$")
_GO_DURATION = re.compile(r"^[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$")
_GO_ZERO_DURATION = re.compile(r"^[-+]?0$")
_LOOSE_DURATION = re.compile(r"(\d+)\s*([A-Za-zµ]+)")
_DURATION_UNITS = frozenset({
    "ns", "nanosecond", "nanoseconds", "us", "µs", "microsecond", "microseconds", "ms", "millisecond",
    "milliseconds", "s", "sec", "secs", "second", "seconds", "m", "min", "mins", "minute", "minutes", "h", "hr",
    "hrs", "hour", "hours", "d", "day", "days", "w", "wk", "week", "weeks"})
_MAC = re.compile(r"^(?:[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){5}|[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){7}"
                  r"|[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){19}|[0-9A-Fa-f]{4}(?:\.[0-9A-Fa-f]{4}){2}"
                  r"|[0-9A-Fa-f]{4}(?:\.[0-9A-Fa-f]{4}){3}|[0-9A-Fa-f]{4}(?:\.[0-9A-Fa-f]{4}){9})$")
_EMAIL_ADDR = re.compile(r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*$")
_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _is_date(value: str) -> bool:
    m = _DATE.match(value)
    if not m:
        return False
    try:
        date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return False
    return True


def _is_datetime(value: str) -> bool:
    if len(value) < 4:
        return False
    parts = value.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    m = _TIME_PART.match(parts[1])
    if m is None:
        return False
    return m.group(1) <= "23" and m.group(2) <= "59" and m.group(3) <= "59"


def _is_duration(value: str) -> bool:
    if _GO_DURATION.match(value) or _GO_ZERO_DURATION.match(value):
        return True
    for _, unit in _LOOSE_DURATION.findall(value):
        unit = unit.strip().lower()
        if unit in _DURATION_UNITS or unit + "s" in _DURATION_UNITS or unit.removesuffix("s") in _DURATION_UNITS:
            return True
    return False


def _go_parse_ip(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def _is_ipv4(value: str) -> bool:
    return "." in value and _go_parse_ip(value) is not None


def _is_ipv6(value: str) -> bool:
    return ":" in value and _go_parse_ip(value) is not None


def _is_cidr(value: str) -> bool:
    if "/" not in value:
        return False
    addr, _, bits = value.partition("/")
    if _go_parse_ip(addr) is None or not bits.isdigit() or (len(bits) > 1 and bits[0] == "0"):
        return False
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True


def _is_uri(value: str) -> bool:
    """``url.ParseRequestURI``: an absolute URI or an absolute path, no control characters."""
    if not value or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return False
    if value.startswith("/"):
        return True
    if not _URI_SCHEME.match(value):
        return False
    rest = value.split(":", 1)[1]
    if rest.startswith("//"):
        host = rest[2:].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rsplit("@", 1)[-1]
        return " " not in host
    return True


def _is_email(value: str) -> bool:
    addr = value.strip()
    m = re.match(r"^[^<>]*<([^<>]+)>$", addr)
    if m:
        addr = m.group(1)
    return bool(_EMAIL_ADDR.match(addr)) and ".." not in addr.split("@")[0]


def _is_hostname(value: str) -> bool:
    return bool(_HOSTNAME.match(value)) and len(value) <= 255 and all(len(p) <= 63 for p in value.split("."))


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _is_creditcard(value: str) -> bool:
    digits = re.sub(r"[^0-9]+", "", value)
    return bool(_CREDITCARD.match(digits)) and _luhn(digits)


def _is_isbn10(value: str) -> bool:
    s = re.sub(r"[\s-]+", "", value)
    if not re.match(r"^(?:[0-9]{9}X|[0-9]{10})$", s):
        return False
    total = sum((i + 1) * int(c) for i, c in enumerate(s[:9]))
    total += 10 * (10 if s[9] == "X" else int(s[9]))
    return total % 11 == 0


def _is_isbn13(value: str) -> bool:
    s = re.sub(r"[\s-]+", "", value)
    if not re.match(r"^[0-9]{13}$", s):
        return False
    total = sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(s[:12]))
    return (10 - total % 10) % 10 == int(s[12])


def _is_quantity(value: str) -> bool:
    from genericapi.apimachinery.quantity import is_quantity  # shared parser, imported on first use

    return is_quantity(value)


#: normalized format name (dashes removed, as go-openapi does) -> check
_STRING_FORMATS: dict[str, Callable[[str], bool]] = {
    "bsonobjectid": lambda s: bool(_BSON_ID.match(s)),
    "uri": _is_uri,
    "email": _is_email,
    "hostname": _is_hostname,
    "ipv4": _is_ipv4,
    "ipv6": _is_ipv6,
    "cidr": _is_cidr,
    "mac": lambda s: bool(_MAC.match(s)),
    "uuid": lambda s: bool(_UUID.match(s)),
    "uuid3": lambda s: bool(_UUID3.match(s)),
    "uuid4": lambda s: bool(_UUID4.match(s)),
    "uuid5": lambda s: bool(_UUID5.match(s)),
    "isbn": lambda s: _is_isbn10(s) or _is_isbn13(s),
    "isbn10": _is_isbn10,
    "isbn13": _is_isbn13,
    "creditcard": _is_creditcard,
    "ssn": lambda s: bool(_SSN.match(s)),
    "hexcolor": lambda s: bool(_HEXCOLOR.match(s)),
    "rgbcolor": lambda s: bool(_RGBCOLOR.match(s)),
    "byte": lambda s: bool(_BASE64.match(s)),
    "password": lambda s: True,
    "date": _is_date,
    "duration": _is_duration,
    "datetime": _is_datetime,
    "quantity": _is_quantity,
}


def effective_format(node: dict[str, Any]) -> str:
    """The format the validator uses after apiextensions strips the unsupported ones."""
    fmt = node.get("format")
    if not isinstance(fmt, str) or not fmt:
        return ""
    # int-or-string has two types, which the post-processor treats like an untyped node
    typ = "" if node.get("x-kubernetes-int-or-string") else node.get("type") or ""
    if typ in ("", "string"):
        return fmt if fmt.replace("-", "") in _STRING_FORMATS else ""
    if typ == "integer":
        return fmt if fmt in ("int32", "int64") else ""
    if typ == "number":
        return fmt if fmt in ("float", "double") else ""
    return ""


def string_format_check(fmt: str) -> Callable[[str], bool] | None:
    """The check for a (supported) string format, or None for numeric/unknown formats."""
    return _STRING_FORMATS.get(fmt.replace("-", ""))
