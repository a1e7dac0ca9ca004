"""Bootstrap token and legacy service account token helpers (kube's parsing, groups, expiry, claims)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from genericapi.apimachinery import bootstraptoken, legacytoken
from genericapi.apimachinery import serviceaccount as satoken


def _secret(**data: str) -> dict[str, object]:
    return {"type": bootstraptoken.SECRET_TYPE,
            "data": {k.replace("_", "-"): base64.b64encode(v.encode()).decode() for k, v in data.items()}}


@pytest.mark.parametrize(("token", "parsed"), [
    ("abcdef.0123456789abcdef", ("abcdef", "0123456789abcdef")),
    ("ABCDEF.0123456789abcdef", None), ("abcde.0123456789abcdef", None), ("abcdef.0123456789abcde", None),
    ("abcdef:0123456789abcdef", None), ("abcdef.0123456789abcdef\n", None), ("", None)])
def test_parse_token(token: str, parsed: tuple[str, str] | None) -> None:
    assert bootstraptoken.parse_token(token) == parsed


def test_groups_sorted_deduplicated_and_validated() -> None:
    assert bootstraptoken.groups(_secret()) == ["system:bootstrappers"]
    extra = "system:bootstrappers:kubeadm:default-node-token,system:bootstrappers:a,system:bootstrappers:a"
    assert bootstraptoken.groups(_secret(auth_extra_groups=extra)) == [
        "system:bootstrappers", "system:bootstrappers:a", "system:bootstrappers:kubeadm:default-node-token"]
    for bad in ("system:masters", "system:bootstrappers:", "system:bootstrappers:UPPER", "a, b"):
        with pytest.raises(ValueError):
            bootstraptoken.groups(_secret(auth_extra_groups=bad))


def test_expiry() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert not bootstraptoken.expired(_secret(), now)
    assert not bootstraptoken.expired(_secret(expiration="2026-01-01T00:00:01Z"), now)
    assert bootstraptoken.expired(_secret(expiration="2025-12-31T23:59:59Z"), now)
    assert bootstraptoken.expired(_secret(expiration="2026-01-01T01:00:00+02:00"), now)
    assert bootstraptoken.expired(_secret(expiration="tomorrow"), now)  # unreadable: expired, as kube


@pytest.mark.parametrize("key", [ec.generate_private_key(ec.SECP256R1()), rsa.generate_private_key(65537, 2048)])
def test_legacy_token_round_trip(key: satoken.PrivateKey) -> None:
    token = legacytoken.issue(key, namespace="ns", name="robot", uid="u-1", secret_name="robot-token")
    assert legacytoken.is_legacy(token)
    subject = legacytoken.verify(token, [key.public_key()])
    assert subject == legacytoken.LegacySubject("ns", "robot", "u-1", "robot-token")
    other = ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(satoken.TokenError):
        legacytoken.verify(token, [other.public_key()])


def test_legacy_claims_checked_as_kube() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    claims = {"iss": legacytoken.LEGACY_ISSUER, legacytoken.NAMESPACE_CLAIM: "ns",
              legacytoken.SECRET_NAME_CLAIM: "s", legacytoken.SA_NAME_CLAIM: "robot",
              legacytoken.SA_UID_CLAIM: "u", "sub": "system:serviceaccount:ns:robot"}

    def check(changes: dict[str, object], message: str) -> None:
        token = jwt.encode({**claims, **changes}, key, algorithm="ES256")
        with pytest.raises(satoken.TokenError, match=message):
            legacytoken.verify(token, [key.public_key()])

    check({"sub": ""}, "sub claim is missing")
    check({legacytoken.SECRET_NAME_CLAIM: ""}, "secretName claim is missing")
    check({legacytoken.SA_UID_CLAIM: 5}, "serviceAccountUID claim is missing")
    check({"sub": "system:serviceaccount:ns:other"}, "sub claim is invalid")
    check({"iss": "someone-else"}, "invalid bearer token")
    # A bound token (the other issuer) is not a legacy one.
    bound, _ = satoken.issue(key, issuer="https://kubernetes.default.svc.cluster.local", audiences=["a"],
                             namespace="ns", name="robot", uid="u", now=0, expiration_seconds=600)
    assert not legacytoken.is_legacy(bound) and not legacytoken.is_legacy("not.a.jwt")
