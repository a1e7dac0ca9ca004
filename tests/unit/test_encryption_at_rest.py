"""Encryption at rest: kube's provider data formats, the prefix rules and EncryptionConfiguration.

The aescbc value is also decrypted with the ``openssl`` command, an implementation of its own,
to show the bytes are kube's format (prefix, 16-byte IV, AES-CBC with PKCS#7), not only a
round trip through our code.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from genericapi.server import encryptionconfig
from genericapi.server.encryptionconfig import EncryptionConfigError
from genericapi.storage.value import (
    AESCBCTransformer,
    AESGCMTransformer,
    IdentityTransformer,
    PrefixTransformers,
    SecretboxTransformer,
    TransformError,
)

KEY32 = bytes(range(32))
KEY16 = bytes(range(16))
PLAIN = b'{"kind":"Secret","data":{"a":"Yg=="}}'
ETCD_KEY = b"/registry/secrets/default/s"


@pytest.mark.parametrize("transformer", [AESCBCTransformer("k1", KEY32), AESCBCTransformer("k1", KEY16),
                                         AESGCMTransformer("k1", KEY32), SecretboxTransformer("k1", KEY32)])
def test_round_trip_and_prefix(transformer: object) -> None:
    sealed = transformer.to_storage(PLAIN, ETCD_KEY)  # type: ignore[attr-defined]
    kind = type(transformer).__name__.removesuffix("Transformer").lower()
    assert sealed.startswith(f"k8s:enc:{kind}:v1:k1:".encode())
    assert PLAIN not in sealed
    assert transformer.from_storage(sealed, ETCD_KEY) == PLAIN  # type: ignore[attr-defined]
    assert transformer.to_storage(PLAIN, ETCD_KEY) != sealed  # a fresh IV/nonce every time  # type: ignore[attr-defined]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_aescbc_is_kubes_format_as_openssl_reads_it() -> None:
    sealed = AESCBCTransformer("key1", KEY32).to_storage(PLAIN, ETCD_KEY)
    body = sealed[len(b"k8s:enc:aescbc:v1:key1:"):]
    iv, ciphertext = body[:16], body[16:]
    out = subprocess.run(["openssl", "enc", "-d", "-aes-256-cbc", "-K", KEY32.hex(), "-iv", iv.hex()],
                         input=ciphertext, capture_output=True, check=True)
    assert out.stdout == PLAIN


def test_aesgcm_binds_the_value_to_its_etcd_key() -> None:
    gcm = AESGCMTransformer("k1", KEY32)
    sealed = gcm.to_storage(PLAIN, ETCD_KEY)
    with pytest.raises(TransformError, match="message authentication failed"):
        gcm.from_storage(sealed, b"/registry/secrets/default/other")


def test_wrong_key_or_corrupt_data_fails_cleanly() -> None:
    sealed = SecretboxTransformer("k1", KEY32).to_storage(PLAIN, ETCD_KEY)
    with pytest.raises(TransformError):
        SecretboxTransformer("k1", bytes(32)).from_storage(sealed, ETCD_KEY)
    with pytest.raises(TransformError):
        AESCBCTransformer("k1", KEY32).from_storage(b"k8s:enc:aescbc:v1:k1:" + b"x" * 5, ETCD_KEY)


def test_first_writes_all_read_and_older_providers_are_stale() -> None:
    old, new = AESCBCTransformer("old", KEY32), AESCBCTransformer("new", KEY16)
    rotated = PrefixTransformers([new, old, IdentityTransformer()])
    read = rotated.from_storage(old.to_storage(PLAIN, ETCD_KEY), ETCD_KEY)
    assert read.data == PLAIN and read.stale
    assert rotated.to_storage(PLAIN, ETCD_KEY).startswith(b"k8s:enc:aescbc:v1:new:")
    assert rotated.from_storage(rotated.to_storage(PLAIN, ETCD_KEY), ETCD_KEY).stale is False
    plain = rotated.from_storage(PLAIN, ETCD_KEY)  # stored before encryption was turned on
    assert plain.data == PLAIN and plain.stale
    with pytest.raises(TransformError, match="no matching prefix found"):
        PrefixTransformers([new]).from_storage(PLAIN, ETCD_KEY)
    with pytest.raises(TransformError, match="identity transformer tried to read encrypted data"):
        PrefixTransformers([IdentityTransformer()]).from_storage(new.to_storage(PLAIN, ETCD_KEY), ETCD_KEY)


def config(*providers: dict, resources: list[str] | None = None) -> dict:  # type: ignore[type-arg]
    return {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
            "resources": [{"resources": resources or ["secrets"], "providers": list(providers)}]}


def aescbc(name: str, secret: bytes) -> dict:  # type: ignore[type-arg]
    return {"aescbc": {"keys": [{"name": name, "secret": base64.b64encode(secret).decode()}]}}


def test_resources_match_as_kube_names_them() -> None:
    doc = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration", "resources": [
        {"resources": ["secrets", "deployments.apps"], "providers": [aescbc("a", KEY32)]},
        {"resources": ["*.batch", "*."], "providers": [aescbc("b", KEY32)]},
        {"resources": ["*.*"], "providers": [{"identity": {}}]},
    ]}
    cfg = encryptionconfig.parse(doc)

    def writer(group: str, resource: str) -> bytes:
        found = cfg.transformers_for(group, resource)
        assert found is not None
        return found.transformers[0].prefix

    assert writer("", "secrets") == b"k8s:enc:aescbc:v1:a:"
    assert writer("apps", "deployments") == b"k8s:enc:aescbc:v1:a:"
    assert writer("batch", "jobs") == b"k8s:enc:aescbc:v1:b:"
    assert writer("", "configmaps") == b"k8s:enc:aescbc:v1:b:"
    assert writer("apps", "statefulsets") == b""
    assert encryptionconfig.parse(config(aescbc("a", KEY32))).transformers_for("", "configmaps") is None


@pytest.mark.parametrize(("doc", "message"), [
    (config(aescbc("a", b"short")), 'resources[0].providers[0].aescbc.keys[0].secret: Invalid value: "REDACTED": '
                                    "secret is not of the expected length, got 5, expected one of [16 24 32]"),
    (config({"secretbox": {"keys": [{"name": "a", "secret": base64.b64encode(KEY16).decode()}]}}),
     "expected one of [32]"),
    (config({"aescbc": {"keys": [{"name": "a", "secret": "not base64!"}]}}), "secrets must be base64 encoded"),
    (config({"aescbc": {"keys": [{"name": "a:b", "secret": base64.b64encode(KEY32).decode()}]}}),
     'key name must not contain ":"'),
    (config({"aescbc": {"keys": []}}), "resources[0].providers[0].aescbc.keys: Required value"),
    (config({"aescbc": {}, "identity": {}}), "2 provider(s) set: exactly one is required"),
    (config({"rot13": {}}), 'unknown provider "rot13"'),
    (config({"kms": {"name": "x"}}), "the kms provider is not supported"),
    (config(aescbc("a", KEY32), resources=["*.app*"]), 'may use a wildcard'),
    ({"apiVersion": "v1", "kind": "ConfigMap"}, "must be EncryptionConfiguration"),
    ({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration", "resources": []},
     "resources: Required value"),
])
def test_bad_configurations_name_the_field(doc: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(EncryptionConfigError) as err:
        encryptionconfig.parse(doc)
    assert message in str(err.value)


def test_default_file_is_private_and_made_once(tmp_path: Path) -> None:
    path = tmp_path / "encryption-config.yaml"
    encryptionconfig.write_default(path)
    first = path.read_text()
    assert path.stat().st_mode & 0o777 == 0o600
    encryptionconfig.write_default(path)
    assert path.read_text() == first
    cfg = encryptionconfig.load(str(path))
    secrets = cfg.transformers_for("", "secrets")
    assert secrets is not None and secrets.transformers[0].prefix == b"k8s:enc:aescbc:v1:key1:"
    assert yaml.safe_load(first)["resources"][0]["providers"][1] == {"identity": {}}
    with pytest.raises(EncryptionConfigError, match="error reading encryption provider configuration file"):
        encryptionconfig.load(str(tmp_path / "missing.yaml"))
