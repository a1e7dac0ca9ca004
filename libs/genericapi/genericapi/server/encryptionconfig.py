"""``--encryption-provider-config``: kube-apiserver's ``EncryptionConfiguration`` file.

Which resources are encrypted in etcd, and with which providers (``apiserver.config.k8s.io/v1``)::

    apiVersion: apiserver.config.k8s.io/v1
    kind: EncryptionConfiguration
    resources:
      - resources: [secrets]              # also "deployments.apps", "*.apps", "*." (core), "*.*"
        providers:
          - aescbc: {keys: [{name: key1, secret: <base64 of 16, 24 or 32 bytes>}]}
          - identity: {}

The first provider of an entry writes, all of them read; the first entry naming a resource
decides (as kube's). The providers themselves live in ``genericapi.storage.value``. The ``kms``
provider (a gRPC plugin) is not supported: a file that names it is refused at start.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from genericapi.storage.value import (
    AESCBCTransformer,
    AESGCMTransformer,
    IdentityTransformer,
    PrefixTransformers,
    SecretboxTransformer,
    Transformer,
)

__all__ = ["EncryptionConfig", "EncryptionConfigError", "load", "parse", "write_default"]

_KEY_SIZES: dict[str, tuple[int, ...]] = {"aescbc": (16, 24, 32), "aesgcm": (16, 24, 32), "secretbox": (32,)}
_BUILDERS: dict[str, Callable[[str, bytes], Transformer]] = {
    "aescbc": AESCBCTransformer, "aesgcm": AESGCMTransformer, "secretbox": SecretboxTransformer,
}
_PROVIDERS = ("aescbc", "aesgcm", "secretbox", "identity", "kms")


class EncryptionConfigError(ValueError):
    """The file is not a valid EncryptionConfiguration (the message names the field)."""


@dataclass(frozen=True)
class _Entry:
    resources: tuple[tuple[str, str], ...]  # (group, resource), either may be "*"
    transformers: PrefixTransformers

    def matches(self, group: str, resource: str) -> bool:
        return any((g == "*" or g == group) and (r == "*" or r == resource) for g, r in self.resources)


class EncryptionConfig:
    """The parsed file: which providers (if any) store a group-resource."""

    def __init__(self, entries: list[_Entry]) -> None:
        self._entries = entries

    def transformers_for(self, group: str, resource: str) -> PrefixTransformers | None:
        for entry in self._entries:
            if entry.matches(group, resource):
                return entry.transformers
        return None


def _parse_resource(text: Any, path: str) -> tuple[str, str]:
    if not isinstance(text, str) or not text:
        raise EncryptionConfigError(f"{path}: Required value: resource name must not be empty")
    if text == "*.*":
        return "*", "*"
    if text == "*.":
        return "", "*"
    resource, _, group = text.partition(".")
    if resource == "*" and not group:
        raise EncryptionConfigError(f'{path}: Invalid value: "{text}": use "*." to match every core resource')
    if "*" in group or ("*" in resource and resource != "*"):
        raise EncryptionConfigError(f'{path}: Invalid value: "{text}": only "*.<group>", "*." and "*.*" '
                                    "may use a wildcard")
    return group, resource


def _parse_provider(provider: Any, path: str) -> list[Transformer]:
    """One provider's transformers: each key reads values carrying its name, the first writes."""
    if not isinstance(provider, dict):
        raise EncryptionConfigError(f"{path}: Invalid value: provider must be an object")
    kinds = [k for k in provider if k in _PROVIDERS]
    unknown = [k for k in provider if k not in _PROVIDERS]
    if unknown:
        raise EncryptionConfigError(f'{path}: Invalid value: unknown provider "{unknown[0]}"')
    if len(kinds) != 1:
        raise EncryptionConfigError(f"{path}: Invalid value: {len(kinds)} provider(s) set: exactly one is required")
    kind = kinds[0]
    if kind == "identity":
        return [IdentityTransformer()]
    if kind == "kms":
        raise EncryptionConfigError(f"{path}.kms: Unsupported value: the kms provider is not supported by kubechain")
    keys = (provider[kind] or {}).get("keys") if isinstance(provider[kind], dict) else None
    if not isinstance(keys, list) or not keys:
        raise EncryptionConfigError(f"{path}.{kind}.keys: Required value: keys must contain at least one key")
    transformers: list[Transformer] = []
    for index, key in enumerate(keys):
        key_path = f"{path}.{kind}.keys[{index}]"
        name = key.get("name") if isinstance(key, dict) else None
        if not isinstance(name, str) or not name:
            raise EncryptionConfigError(f"{key_path}.name: Required value: key name is required")
        if ":" in name:
            raise EncryptionConfigError(f'{key_path}.name: Invalid value: "{name}": key name must not contain ":"')
        secret_text = key.get("secret")
        if not isinstance(secret_text, str) or not secret_text:
            raise EncryptionConfigError(f"{key_path}.secret: Required value: secret is required")
        try:
            secret = base64.b64decode(secret_text, validate=True)
        except (binascii.Error, ValueError):
            raise EncryptionConfigError(f'{key_path}.secret: Invalid value: "REDACTED": secrets must be base64 '
                                        "encoded") from None
        if len(secret) not in _KEY_SIZES[kind]:
            sizes = " ".join(str(n) for n in _KEY_SIZES[kind])
            raise EncryptionConfigError(f'{key_path}.secret: Invalid value: "REDACTED": secret is not of the '
                                        f"expected length, got {len(secret)}, expected one of [{sizes}]")
        transformers.append(_BUILDERS[kind](name, secret))
    return transformers


def parse(document: Any) -> EncryptionConfig:
    """An EncryptionConfiguration from its decoded YAML/JSON."""
    if not isinstance(document, dict):
        raise EncryptionConfigError("the encryption configuration must be an object")
    if document.get("kind") != "EncryptionConfiguration":
        raise EncryptionConfigError(f'kind: Invalid value: "{document.get("kind")}": must be EncryptionConfiguration')
    if document.get("apiVersion") not in ("apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1beta1"):
        raise EncryptionConfigError(f'apiVersion: Invalid value: "{document.get("apiVersion")}": '
                                    "must be apiserver.config.k8s.io/v1")
    items = document.get("resources")
    if not isinstance(items, list) or not items:
        raise EncryptionConfigError("resources: Required value: resources must contain at least one resource")
    entries: list[_Entry] = []
    for index, item in enumerate(items):
        path = f"resources[{index}]"
        names = item.get("resources") if isinstance(item, dict) else None
        if not isinstance(names, list) or not names:
            raise EncryptionConfigError(f"{path}.resources: Required value: resources must contain at least one "
                                        "resource")
        providers = item.get("providers")
        if not isinstance(providers, list) or not providers:
            raise EncryptionConfigError(f"{path}.providers: Required value: providers must contain at least one "
                                        "provider")
        resources = tuple(_parse_resource(n, f"{path}.resources[{i}]") for i, n in enumerate(names))
        transformers = [t for i, p in enumerate(providers) for t in _parse_provider(p, f"{path}.providers[{i}]")]
        entries.append(_Entry(resources, PrefixTransformers(transformers)))
    return EncryptionConfig(entries)


def load(path: str) -> EncryptionConfig:
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise EncryptionConfigError(f"error reading encryption provider configuration file {path!r}: "
                                    f"{err.strerror}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise EncryptionConfigError(f"error decoding encryption provider configuration file {path!r}: {err}") from None
    return parse(document)


def write_default(path: Path) -> None:
    """A fresh ``aescbc`` key for Secrets (identity still reads what was stored before), made
    once and kept: every later start must read what earlier ones wrote."""
    if path.exists():
        return
    secret = base64.b64encode(os.urandom(32)).decode()
    document = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
                "resources": [{"resources": ["secrets"],
                               "providers": [{"aescbc": {"keys": [{"name": "key1", "secret": secret}]}},
                                             {"identity": {}}]}]}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(document, f, sort_keys=False)
