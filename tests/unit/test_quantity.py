"""resource.Quantity: parsing, errors, canonical strings, comparison and arithmetic as Go has them."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from genericapi.apimachinery.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    ERR_FORMAT_WRONG,
    ERR_NUMERIC,
    ERR_SUFFIX,
    Quantity,
    is_quantity,
    parse_quantity,
)

FORMAT_MESSAGE = ("quantities must match the regular expression "
                  "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")


def test_error_texts_are_go_s() -> None:
    assert ERR_FORMAT_WRONG == FORMAT_MESSAGE
    assert ERR_SUFFIX == "unable to parse quantity's suffix"
    assert ERR_NUMERIC == "unable to parse numeric part of quantity"


@pytest.mark.parametrize(("text", "value", "fmt"), [
    ("0", "0", DECIMAL_SI), ("0n", "0", DECIMAL_SI), ("0Ki", "0", BINARY_SI), ("0T", "0", DECIMAL_SI),
    ("1", "1", DECIMAL_SI), ("1Ki", "1024", BINARY_SI), ("7Mi", str(7 * 2**20), BINARY_SI),
    ("3Ei", str(3 * 2**60), BINARY_SI), ("100Ti", str(100 * 2**40), BINARY_SI),
    ("5n", "5e-9", DECIMAL_SI), ("4u", "4e-6", DECIMAL_SI), ("3m", "0.003", DECIMAL_SI),
    ("50k", "50000", DECIMAL_SI), ("300T", "3e14", DECIMAL_SI), ("1E", "1e18", DECIMAL_SI),
    ("1E-3", "0.001", DECIMAL_EXPONENT), ("1e3", "1000", DECIMAL_EXPONENT), ("1E18", "1e18", DECIMAL_EXPONENT),
    ("100.035k", "100035", DECIMAL_SI), ("0.0005k", "0.5", DECIMAL_SI), ("0.5e-2", "0.005", DECIMAL_EXPONENT),
    ("1.3E+6", "1300000", DECIMAL_EXPONENT), ("1.53E12", "1.53e12", DECIMAL_EXPONENT),
    ("6.987654321G", "6987654321", DECIMAL_SI), ("1.01E", "1.01e18", DECIMAL_SI),
    # rounded up to nano units
    ("3.001n", "4e-9", DECIMAL_SI), ("1.1E-9", "2e-9", DECIMAL_EXPONENT), ("0.0000000001", "1e-9", DECIMAL_SI),
    ("0.5e-9", "1e-9", DECIMAL_EXPONENT), ("0.00000012345", "1.24e-7", DECIMAL_SI),
    # BinarySI is capped at 2^63-1
    ("9Ei", str(2**63 - 1), BINARY_SI), ("9223372036854775807Ki", str(2**63 - 1), BINARY_SI),
    ("12E", "1.2e19", DECIMAL_SI),
    ("100.035Ki", "102435.84", BINARY_SI), ("0.5Mi", "524288", BINARY_SI), ("0.025Ti", "27487790694.4", BINARY_SI),
    # fractions of a unit in BinarySI become DecimalSI
    ("0.000000000001Ki", "2e-9", DECIMAL_SI),
    (".001", "0.001", DECIMAL_SI), (".0001k", "0.1", DECIMAL_SI), ("1.", "1", DECIMAL_SI), ("1.G", "1e9", DECIMAL_SI),
    (".", "0", DECIMAL_SI), ("-.", "0", DECIMAL_SI), ("+", "0", DECIMAL_SI),
])
def test_parse(text: str, value: str, fmt: str) -> None:
    q = parse_quantity(text)
    assert q.value == Decimal(value)
    assert q.format == fmt
    if text not in (".", "-.", "+", "0"):
        neg = parse_quantity("-" + text)
        assert neg.value == -Decimal(value)
        assert neg.format == fmt
        assert parse_quantity("+" + text).value == Decimal(value)


@pytest.mark.parametrize(("text", "message"), [
    ("", FORMAT_MESSAGE), ("1.1.M", FORMAT_MESSAGE), ("1+1.0M", FORMAT_MESSAGE), ("aoeu", FORMAT_MESSAGE),
    ("-3.01e-", ERR_SUFFIX), (" 1", FORMAT_MESSAGE), ("1 ", FORMAT_MESSAGE), ("1x", FORMAT_MESSAGE),
    ("0.1mi", ERR_SUFFIX), ("0.1am", FORMAT_MESSAGE), (".5i", ERR_SUFFIX), ("1i", ERR_SUFFIX),
    ("-3.01i", ERR_SUFFIX), ("1iK", ERR_SUFFIX), ("1KB", FORMAT_MESSAGE), ("1e", ERR_SUFFIX),
    ("500mm", ERR_SUFFIX), ("1e1.5", FORMAT_MESSAGE), ("true", FORMAT_MESSAGE),
])
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_quantity(text)
    assert str(err.value) == message
    assert not is_quantity(text)


@pytest.mark.parametrize(("text", "canonical"), [
    ("1Ki", "1Ki"), ("1Mi", "1Mi"), ("1024Mi", "1Gi"), ("1000M", "1G"), (".001Ki", "1024m"),
    (".000001Ki", "1024u"), (".000000001Ki", "1024n"), (".000000000001Ki", "2n"),
    ("0.5", "500m"), ("1.5", "1500m"), ("1.5Gi", "1536Mi"), ("0.1m", "100u"), ("1080m", "1080m"),
    ("1.08", "1080m"), ("1080000000n", "1080m"), ("1000m", "1"), ("1000u", "1m"), ("0.001T", "1G"),
    ("307200Ki", "300Mi"), ("1025024Mi", "1001Gi"), ("5000m", "5"), ("1.0", "1"), ("00", "0"),
    (".001e12", "1e9"), ("0.001e0", "1e-3"), ("1000e-12", "1e-9"), ("80e-3", "80e-3"),
    ("1e3", "1e3"), ("5E3", "5E3"), ("1200e0", "1200e0"), ("12e2", "1200"), ("1.2e3", "1200"),
    ("2048", "2048"), ("2048Ki", "2Mi"), ("1536Ki", "1536Ki"), ("1.5Ki", "1536"),
    ("9Ei", "9223372036854775807"), ("-1.5Gi", "-1536Mi"), ("-0.5", "-500m"), ("+5", "+5"),
    ("1000E", "1"),  # v1.33: DecimalSI has no suffix past E and drops it
])
def test_canonical(text: str, canonical: str) -> None:
    assert parse_quantity(text).canonical() == canonical
    assert str(parse_quantity(text)) == canonical


@pytest.mark.parametrize(("unscaled", "exponent", "fmt", "canonical"), [
    (2**30, 0, BINARY_SI, "1Gi"), (6 * 1024, 0, BINARY_SI, "6Ki"), (5, 0, BINARY_SI, "5"),
    (500, -3, BINARY_SI, "500m"), (1234567, -3, BINARY_SI, "1234567m"), (1025, 0, BINARY_SI, "1025"),
    (1, 9, DECIMAL_SI, "1G"), (1000000, 3, DECIMAL_SI, "1G"), (108, -2, DECIMAL_SI, "1080m"),
    (10800, -10, DECIMAL_SI, "1080n"), (1, -6, DECIMAL_SI, "1u"), (0, 0, DECIMAL_EXPONENT, "0"),
    (300, 6, DECIMAL_EXPONENT, "300e6"), (1, -9, DECIMAL_EXPONENT, "1e-9"), (3, 3, DECIMAL_SI, "3k"),
    (-901, -2, DECIMAL_SI, "-9010m"), (-2000, 0, BINARY_SI, "-2000"),
])
def test_canonical_of_constructed(unscaled: int, exponent: int, fmt: str, canonical: str) -> None:
    assert Quantity(unscaled, exponent, fmt).canonical() == canonical
    assert Quantity(unscaled, exponent, fmt, decimal_form=True).canonical() == canonical


@pytest.mark.parametrize(("x", "y", "expect"), [
    ("0", "0", 0), ("100m", "50m", 1), ("50m", "100m", -1), ("10000T", "100Gi", 1), ("1Gi", "1073741824", 0),
    ("1", "1000m", 0), ("-1", "0", -1), ("-2", "-1", -1), ("1e-9", "1n", 0), ("1e20", "99999999999999999999", 1),
    ("1.5Gi", "1536Mi", 0), ("500m", "0.5", 0), ("1k", "999", 1),
])
def test_cmp(x: str, y: str, expect: int) -> None:
    qx, qy = parse_quantity(x), parse_quantity(y)
    assert qx.cmp(qy) == expect
    assert qy.cmp(qx) == -expect
    assert (qx == qy) == (expect == 0)
    assert (qx < qy) == (expect < 0)
    assert (qx > qy) == (expect > 0)
    if expect == 0:
        assert hash(qx) == hash(qy)


def test_cmp_of_huge_exponents_does_not_expand() -> None:
    big = parse_quantity("1e2000000000")
    small = parse_quantity("1e-2000000000")
    assert big > small > parse_quantity("0")
    assert parse_quantity("2e2000000000") > big


@pytest.mark.parametrize(("text", "expect"), [
    ("1", 1), ("1Ki", 1024), ("1k", 1000), ("5G", 5_000_000_000), ("-3", -3), ("0", 0),
    ("1000m", None),  # int64 form at scale -3: Go's AsInt64 refuses
    ("1.5Ki", None),  # inf.Dec form
    ("1.5", None), ("9Ei", None), ("10E", None), ("9E", 9 * 10**18),
])
def test_as_int64(text: str, expect: int | None) -> None:
    q = parse_quantity(text)
    assert q.as_int64() == expect
    assert q.is_integer() == (expect is not None)


def test_sign_and_zero() -> None:
    assert parse_quantity("5m").sign() == 1
    assert parse_quantity("-5m").sign() == -1
    assert parse_quantity("0Gi").sign() == 0
    assert parse_quantity("0Gi").is_zero()


@pytest.mark.parametrize(("text", "approx"), [
    ("1", 1.0), ("500m", 0.5), ("1Ki", 1024.0), ("1.5Gi", 1536 * 2**20), ("-2.5k", -2500.0),
    ("1e400", math.inf), ("1e-400", 1e-9),
])
def test_as_approximate_float(text: str, approx: float) -> None:
    assert parse_quantity(text).as_approximate_float() == pytest.approx(approx)


def test_add_sub() -> None:
    total = parse_quantity("1") + parse_quantity("500m")
    assert total.value == Decimal("1.5")
    assert total.canonical() == "1500m"
    assert (parse_quantity("1Gi") - parse_quantity("512Mi")).canonical() == "512Mi"
    assert (parse_quantity("100m") - parse_quantity("200m")).canonical() == "-100m"
    # a zero receiver takes the other's format (Go's TestQuantityAddZeroPreservesSuffix)
    zero = parse_quantity("0")
    for text in ("100m", "1Gi"):
        q = parse_quantity(text)
        assert (q + zero).canonical() == text
        assert (zero + q).canonical() == text
        assert (q - zero).canonical() == text
        assert (zero - q).canonical() == "-" + text
    # int64 overflow falls back to the decimal form and stays exact
    big = Quantity.from_int(2**63 - 1) + Quantity.from_int(1)
    assert big.value == Decimal(2**63)
    assert big.as_int64() is None
    # CEL's add(int): NewQuantity(n, DecimalExponent)
    assert (parse_quantity("1k") + Quantity.from_int(5, DECIMAL_EXPONENT)).canonical() == "1005"
    assert (-parse_quantity("3m")).canonical() == "-3m"


def test_scaled_values() -> None:
    assert parse_quantity("1500m").value_int() == 2
    assert parse_quantity("-1500m").value_int() == -2
    assert parse_quantity("1.5").milli_value() == 1500
    assert parse_quantity("1n").milli_value() == 1
    assert Quantity.from_milli(250).canonical() == "250m"
