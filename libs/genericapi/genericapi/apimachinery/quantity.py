"""Resource quantities (``500m``, ``1Gi``, ``1e3``) as ``k8s.io/apimachinery/pkg/api/resource`` has them.

Semantic validation compares requests with limits, CEL's quantity library computes with them and
printing shows their canonical form, so the value must be exact (no floats) and every observable
quirk of the Go type is kept: parse errors word for word, rounding up to nano units, the BinarySI
cap at 2^63-1, the canonical string (``1.5`` -> ``1500m``, ``1536Ki`` -> ``1536Ki``,
``1024Ki`` -> ``1Mi``, a canonical input string kept as written) and whether ``AsInt64`` succeeds,
which depends on the internal form the Go parser picked (an int64 mantissa with a base-10 scale,
or an arbitrary-precision decimal).
"""

from __future__ import annotations

import math
from decimal import Decimal
from functools import total_ordering

DECIMAL_EXPONENT = "DecimalExponent"  # 12e6
BINARY_SI = "BinarySI"  # 12Mi
DECIMAL_SI = "DecimalSI"  # 12M

SPLIT_RE_STRING = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT_WRONG = f"quantities must match the regular expression '{SPLIT_RE_STRING}'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_NANO = -9
_MAX_INT64_FACTORS = 18
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")

#: suffix -> (base, exponent, format)
_SUFFIXES: dict[str, tuple[int, int, str]] = {
    "": (10, 0, DECIMAL_SI),
    "n": (10, -9, DECIMAL_SI), "u": (10, -6, DECIMAL_SI), "m": (10, -3, DECIMAL_SI),
    "k": (10, 3, DECIMAL_SI), "M": (10, 6, DECIMAL_SI), "G": (10, 9, DECIMAL_SI),
    "T": (10, 12, DECIMAL_SI), "P": (10, 15, DECIMAL_SI), "E": (10, 18, DECIMAL_SI),
    "Ki": (2, 10, BINARY_SI), "Mi": (2, 20, BINARY_SI), "Gi": (2, 30, BINARY_SI),
    "Ti": (2, 40, BINARY_SI), "Pi": (2, 50, BINARY_SI), "Ei": (2, 60, BINARY_SI),
}
_DECIMAL_SUFFIX_BY_EXPONENT = {e: s for s, (b, e, f) in _SUFFIXES.items() if b == 10}
_BINARY_SUFFIX_BY_EXPONENT = {e: s for s, (b, e, f) in _SUFFIXES.items() if b == 2}


def _wrap_int32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def _in_int64(value: int) -> bool:
    return _INT64_MIN <= value <= _INT64_MAX


def _interpret_suffix(suffix: str) -> tuple[int, int, str] | None:
    known = _SUFFIXES.get(suffix)
    if known is not None:
        return known
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if not body or not set(body) <= _DIGITS or not _in_int64(int(digits)):
            return None
        return 10, _wrap_int32(int(digits)), DECIMAL_EXPONENT
    return None


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: (positive, numeric text, integer digits, fraction digits, suffix)."""
    positive = True
    pos, end = 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return positive, text, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise ValueError(ERR_FORMAT_WRONG)
    return positive, value, num, denom, text[suffix_start:]


def _remove_factors(value: int, base: int) -> tuple[int, int]:
    """``removeInt64Factors``: divide ``base`` out of ``value`` as often as it goes."""
    negative = value < 0
    result = -value if negative else value
    times = 0
    while result >= base and result % base == 0:
        result //= base
        times += 1
    return (-result if negative else result), times


def _round_up_div(value: int, divisor: int) -> tuple[int, bool]:
    """Divide rounding away from zero; also whether the division was exact."""
    quotient, remainder = divmod(abs(value), divisor)
    if remainder:
        quotient += 1
    return (quotient if value >= 0 else -quotient), remainder == 0


def _magnitude(unscaled: int, exponent: int) -> int:
    """Number of decimal digits before the point (as the order of magnitude) of a non-zero value."""
    return len(str(abs(unscaled))) + exponent


@total_ordering
class Quantity:
    """An exact quantity: ``unscaled * 10**exponent``, with its format and Go's internal form.

    ``decimal_form`` is True where the Go value holds an ``inf.Dec`` rather than an int64
    mantissa; ``AsInt64`` (``as_int64``) only ever succeeds on the int64 form.
    """

    __slots__ = ("_cached", "decimal_form", "exponent", "format", "unscaled")

    def __init__(self, unscaled: int, exponent: int = 0, format: str = DECIMAL_SI, *,
                 decimal_form: bool = False, cached: str = "") -> None:
        self.unscaled = unscaled
        self.exponent = exponent
        self.format = format
        self.decimal_form = decimal_form
        self._cached = cached

    @classmethod
    def from_int(cls, value: int, format: str = DECIMAL_SI) -> Quantity:
        """``resource.NewQuantity``."""
        return cls(value, 0, format)

    @classmethod
    def from_milli(cls, value: int, format: str = DECIMAL_SI) -> Quantity:
        """``resource.NewMilliQuantity``."""
        return cls(value, -3, format)

    # -- reading -----------------------------------------------------------------------------
    @property
    def value(self) -> Decimal:
        """The exact value as a Decimal (built from its digits, so never rounded by a context)."""
        sign = 1 if self.unscaled < 0 else 0
        digits = tuple(int(d) for d in str(abs(self.unscaled)))
        return Decimal((sign, digits, self.exponent))

    def sign(self) -> int:
        return (self.unscaled > 0) - (self.unscaled < 0)

    def is_zero(self) -> bool:
        return self.unscaled == 0

    def as_int64(self) -> int | None:
        """``AsInt64``: the integer value if Go's fast form holds it without loss, else None."""
        if self.decimal_form:
            return None
        if self.exponent == 0:
            return self.unscaled
        if self.exponent < 0:
            return None
        if self.unscaled == 0:
            return 0
        if self.exponent > 18:
            return None
        result = self.unscaled * 10**self.exponent
        return result if _in_int64(result) else None

    def is_integer(self) -> bool:
        """CEL's ``isInteger()``: whether ``as_int64`` succeeds."""
        return self.as_int64() is not None

    def as_approximate_float(self) -> float:
        """``AsApproximateFloat64``: may lose precision; +-inf when out of float range."""
        try:
            base = float(self.unscaled)
        except OverflowError:
            base = math.copysign(math.inf, self.unscaled)
        if self.exponent == 0:
            return base
        return base * float(f"1e{self.exponent}")

    def value_int(self) -> int:
        """``Value()``: rounded up (away from zero) to an integer, not clamped."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        return self.scaled_value(-3)

    def scaled_value(self, scale: int) -> int:
        """``ScaledValue``: ceil-away-from-zero of ``q / 10**scale`` (Python int, not clamped)."""
        shift = self.exponent - scale
        if shift >= 0:
            return self.unscaled * 10**shift
        return _round_up_div(self.unscaled, 10**-shift)[0]

    # -- comparing -----------------------------------------------------------------------------
    def cmp(self, other: Quantity) -> int:
        """-1, 0 or 1 (``Cmp``)."""
        a, b = self.sign(), other.sign()
        if a != b:
            return 1 if a > b else -1
        if a == 0:
            return 0
        mag_a = _magnitude(self.unscaled, self.exponent)
        mag_b = _magnitude(other.unscaled, other.exponent)
        if mag_a != mag_b:
            return a if mag_a > mag_b else -a
        low = min(self.exponent, other.exponent)
        x = self.unscaled * 10 ** (self.exponent - low)
        y = other.unscaled * 10 ** (other.exponent - low)
        return (x > y) - (x < y)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.cmp(other) == 0

    def __lt__(self, other: Quantity) -> bool:
        return self.cmp(other) < 0

    def __hash__(self) -> int:
        return hash(self.value.normalize()) if self.unscaled else 0

    def __repr__(self) -> str:
        return f"Quantity({self.canonical()!r}, {self.format})"

    def __str__(self) -> str:
        return self.canonical()

    # -- arithmetic ----------------------------------------------------------------------------
    def add(self, other: Quantity) -> Quantity:
        """``Add``: a new quantity; a zero receiver takes the other's format."""
        fmt = other.format if self.is_zero() else self.format
        if not self.decimal_form and not other.decimal_form:
            fast = _int64_add(self.unscaled, self.exponent, other.unscaled, other.exponent)
            if fast is not None:
                return Quantity(fast[0], fast[1], fmt)
        low = min(self.exponent, other.exponent)
        total = self.unscaled * 10 ** (self.exponent - low) + other.unscaled * 10 ** (other.exponent - low)
        return Quantity(total, low, fmt, decimal_form=True)

    def sub(self, other: Quantity) -> Quantity:
        """``Sub``: a new quantity; a zero receiver takes the other's format."""
        fmt = other.format if self.is_zero() else self.format
        if not self.decimal_form and not other.decimal_form and other.unscaled != _INT64_MIN:
            fast = _int64_add(self.unscaled, self.exponent, -other.unscaled, other.exponent)
            if fast is not None:
                return Quantity(fast[0], fast[1], fmt)
        low = min(self.exponent, other.exponent)
        total = self.unscaled * 10 ** (self.exponent - low) - other.unscaled * 10 ** (other.exponent - low)
        return Quantity(total, low, fmt, decimal_form=True)

    def neg(self) -> Quantity:
        return Quantity(-self.unscaled, self.exponent, self.format, decimal_form=self.decimal_form)

    def __add__(self, other: Quantity) -> Quantity:
        return self.add(other)

    def __sub__(self, other: Quantity) -> Quantity:
        return self.sub(other)

    def __neg__(self) -> Quantity:
        return self.neg()

    # -- formatting ----------------------------------------------------------------------------
    def canonical(self) -> str:
        """``String()``: the canonical form kube-apiserver writes back (or the input, if canonical)."""
        if self._cached:
            return self._cached
        if self.unscaled == 0:
            return "0"
        fmt = self.format
        if fmt not in (DECIMAL_EXPONENT, DECIMAL_SI, BINARY_SI):
            fmt = DECIMAL_EXPONENT
        integer: int | None = None
        if fmt == BINARY_SI:
            if self._below_1024():
                fmt = DECIMAL_SI
            elif self.exponent >= 0:
                integer = self.unscaled * 10**self.exponent
            else:
                quotient, remainder = divmod(abs(self.unscaled), 10**-self.exponent)
                if remainder:
                    fmt = DECIMAL_SI
                else:
                    integer = quotient if self.unscaled > 0 else -quotient
        if fmt == BINARY_SI and integer is not None:
            amount, times = _remove_factors(integer, 1024)
            return f"{amount}{_BINARY_SUFFIX_BY_EXPONENT.get(times * 10, '')}"
        amount, times = _remove_factors(self.unscaled, 10)
        exponent = self.exponent + times
        extra = exponent % 3  # floor to a multiple of 3 (Go multiplies the mantissa up)
        amount *= 10**extra
        exponent -= extra
        if fmt == DECIMAL_SI:
            return f"{amount}{_DECIMAL_SUFFIX_BY_EXPONENT.get(exponent, '')}"
        return f"{amount}e{exponent}" if exponent else str(amount)

    def _below_1024(self) -> bool:
        return self.cmp(_Q1024) < 0 and self.cmp(_QMINUS1024) > 0


def _int64_add(a: int, a_scale: int, b: int, b_scale: int) -> tuple[int, int] | None:
    """``int64Amount.Add``: the sum at the smaller scale, or None on int64 overflow."""
    if b == 0:
        return a, a_scale
    if a == 0:
        return b, b_scale
    if a_scale == b_scale:
        total = a + b
        return (total, a_scale) if _in_int64(total) else None
    if a_scale > b_scale:
        a, a_scale, b, b_scale = b, b_scale, a, a_scale
    # now a has the smaller scale: raise b to it
    shift = b_scale - a_scale
    if shift > 18:
        return None
    raised = b * 10**shift
    if not _in_int64(raised):
        return None
    total = a + raised
    return (total, a_scale) if _in_int64(total) else None


_Q1024 = Quantity(1024)
_QMINUS1024 = Quantity(-1024)


def parse_quantity(text: str) -> Quantity:
    """``resource.ParseQuantity``: raises ValueError with the Go error text."""
    if not text:
        raise ValueError(ERR_FORMAT_WRONG)
    if text == "0":
        return Quantity(0, 0, DECIMAL_SI, cached="0")
    positive, value, num, denom, suffix = _scan(text)
    interpreted = _interpret_suffix(suffix)
    if interpreted is None:
        raise ValueError(ERR_SUFFIX)
    base, exponent, fmt = interpreted

    precision = 0
    scale = 0
    mantissa = 1
    if fmt in (DECIMAL_EXPONENT, DECIMAL_SI):
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    elif exponent >= 0 and not denom:
        mantissa = 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
    else:
        precision = -1

    if precision >= 0:
        scale -= len(denom)
        if scale >= _NANO:
            shifted = num + denom
            number = int(shifted)
            result = number * mantissa
            if _in_int64(result):
                if not positive:
                    result = -result
                cached = ""
                if fmt == BINARY_SI:
                    if exponent % 10 == 0 and number & 0x07 != 0:
                        cached = text
                elif scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
                    cached = text
                return Quantity(result, scale, fmt, cached=cached)
    return _parse_slow(value, positive, base, exponent, fmt)


def _parse_slow(value: str, positive: bool, base: int, exponent: int, fmt: str) -> Quantity:
    """The arbitrary-precision path: exact decimal, rounded up to nano units, BinarySI capped."""
    body = value[1:] if value[:1] in ("+", "-") else value
    whole, _, fraction = body.partition(".")
    if not (whole or fraction) or not set(whole + fraction) <= _DIGITS:
        raise ValueError(ERR_NUMERIC)
    unscaled = int(whole + fraction or "0")
    exp10 = -len(fraction)
    if base == 10:
        exp10 += exponent
    else:
        unscaled <<= exponent
    if unscaled != 0:
        if exp10 < _NANO:
            shift = _NANO - exp10
            # below one nano unit altogether: rounds up to exactly 1n (without computing 10**shift)
            unscaled = 1 if len(str(unscaled)) < shift else _round_up_div(unscaled, 10**shift)[0]
            exp10 = _NANO
        elif exp10 - _NANO <= 64:
            unscaled *= 10 ** (exp10 - _NANO)  # inf.Dec rescales to exactly nine places
            exp10 = _NANO
    if fmt == BINARY_SI and Quantity(unscaled, exp10).cmp(_QMAX) > 0:
        unscaled, exp10 = _INT64_MAX, 0
    if fmt == BINARY_SI and unscaled != 0 and Quantity(unscaled, exp10).cmp(_QONE) < 0:
        fmt = DECIMAL_SI
    if not positive:
        unscaled = -unscaled
    return Quantity(unscaled, exp10, fmt, decimal_form=True)


_QMAX = Quantity(_INT64_MAX)
_QONE = Quantity(1)


def is_quantity(text: str) -> bool:
    """CEL's ``isQuantity``."""
    try:
        parse_quantity(text)
    except ValueError:
        return False
    return True
