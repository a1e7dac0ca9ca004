"""Encryption at rest: the value transformers between objects' bytes and what etcd holds.

The same data format as kube-apiserver's ``k8s.io/apiserver/pkg/storage/value`` providers, so an
etcd written by one can be read by the other with the same keys:

- ``aescbc``: ``k8s:enc:aescbc:v1:<key name>:`` + 16-byte IV + AES-CBC ciphertext (PKCS#7).
- ``aesgcm``: ``k8s:enc:aesgcm:v1:<key name>:`` + 12-byte nonce + AES-GCM ciphertext and tag,
  with the etcd key as additional authenticated data (a value copied to another key fails).
- ``secretbox``: ``k8s:enc:secretbox:v1:<key name>:`` + 24-byte nonce + NaCl secretbox.
- ``identity``: the bytes as they are (no prefix).

A :class:`PrefixTransformers` list writes with its first transformer and reads with whichever
one's prefix the stored value carries (identity, prefix-less, reads anything left). A value read
with any but the first is *stale*: an update rewrites it even when the object did not change, which
is how ``kubectl get secrets -A -o json | kubectl replace -f -`` rotates keys. Crypto is the
``cryptography`` package's (AES) and PyNaCl's (secretbox), never our own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import nacl.exceptions
import nacl.secret
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import StorageError

__all__ = ["AESCBCTransformer", "AESGCMTransformer", "IdentityTransformer", "PrefixTransformers",
           "SecretboxTransformer", "TransformError", "Transformer"]


class TransformError(StorageError):
    """A stored value could not be decrypted (wrong key, corrupt data, no matching provider)."""


class Transformer(Protocol):
    prefix: bytes

    def to_storage(self, data: bytes, key: bytes) -> bytes: ...

    def from_storage(self, data: bytes, key: bytes) -> bytes: ...


class IdentityTransformer:
    prefix = b""

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        return data

    def from_storage(self, data: bytes, key: bytes) -> bytes:
        if data.startswith(b"k8s:enc:"):
            raise TransformError("identity transformer tried to read encrypted data")
        return data


class AESCBCTransformer:
    """kube's ``aescbc`` provider (no authentication: kube keeps it for compatibility)."""

    def __init__(self, name: str, secret: bytes) -> None:
        self.prefix = f"k8s:enc:aescbc:v1:{name}:".encode()
        self._key = secret

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        iv = os.urandom(16)
        padder = padding.PKCS7(128).padder()
        padded = padder.update(data) + padder.finalize()
        enc = Cipher(algorithms.AES(self._key), modes.CBC(iv)).encryptor()
        return self.prefix + iv + enc.update(padded) + enc.finalize()

    def from_storage(self, data: bytes, key: bytes) -> bytes:
        body = data[len(self.prefix):]
        if len(body) < 32 or len(body) % 16:
            raise TransformError("the stored data is not a multiple of the block size")
        dec = Cipher(algorithms.AES(self._key), modes.CBC(body[:16])).decryptor()
        padded = dec.update(body[16:]) + dec.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        try:
            return unpadder.update(padded) + unpadder.finalize()
        except ValueError:
            raise TransformError("invalid PKCS7 data (empty or not padded)") from None


class AESGCMTransformer:
    """kube's ``aesgcm`` provider: the etcd key is authenticated data."""

    def __init__(self, name: str, secret: bytes) -> None:
        self.prefix = f"k8s:enc:aesgcm:v1:{name}:".encode()
        self._aead = AESGCM(secret)

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        nonce = os.urandom(12)
        return self.prefix + nonce + self._aead.encrypt(nonce, data, key)

    def from_storage(self, data: bytes, key: bytes) -> bytes:
        body = data[len(self.prefix):]
        if len(body) < 12 + 16:
            raise TransformError("the stored data was shorter than the required size")
        try:
            return self._aead.decrypt(body[:12], body[12:], key)
        except InvalidTag:
            raise TransformError("cipher: message authentication failed") from None


class SecretboxTransformer:
    """kube's ``secretbox`` provider (XSalsa20-Poly1305)."""

    def __init__(self, name: str, secret: bytes) -> None:
        self.prefix = f"k8s:enc:secretbox:v1:{name}:".encode()
        self._box = nacl.secret.SecretBox(secret)

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        return self.prefix + bytes(self._box.encrypt(data))  # nonce + MAC + ciphertext, as Go's Seal

    def from_storage(self, data: bytes, key: bytes) -> bytes:
        body = data[len(self.prefix):]
        try:
            return self._box.decrypt(body)
        except nacl.exceptions.CryptoError:
            raise TransformError("output array too small or could not decrypt") from None


@dataclass(frozen=True)
class Read:
    """A decrypted value, and whether a transformer other than the writing one was needed."""

    data: bytes
    stale: bool


class PrefixTransformers:
    """The providers configured for one resource, in order: the first writes, all read."""

    def __init__(self, transformers: Sequence[Transformer]) -> None:
        if not transformers:
            raise ValueError("at least one transformer is required")
        self.transformers = tuple(transformers)

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        return self.transformers[0].to_storage(data, key)

    def from_storage(self, data: bytes, key: bytes) -> Read:
        for index, transformer in enumerate(self.transformers):
            if transformer.prefix and data.startswith(transformer.prefix):
                return Read(transformer.from_storage(data, key), index != 0)
        for index, transformer in enumerate(self.transformers):
            if not transformer.prefix:  # identity reads whatever no other provider claims
                return Read(transformer.from_storage(data, key), index != 0)
        raise TransformError("no matching prefix found")
