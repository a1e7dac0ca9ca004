"""The tag of a container image reference, as ``k8s.io/kubernetes/pkg/util/parsers.ParseImageName``
reads it, and the pull policy kube-apiserver defaults from it.

The tag decides ``imagePullPolicy``: ``latest`` (written, or implied by a reference with neither
tag nor digest) means ``Always``, anything else ``IfNotPresent``. A reference the docker
reference grammar rejects has no tag at all, so it reads as ``IfNotPresent`` (kube ignores the
parse error there and lets validation speak).
"""

from __future__ import annotations

import re

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN = rf"(?:{_DOMAIN_NAME}|{_IPV6})(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE_RE = re.compile(rf"^({_NAME})(?::({_TAG}))?(?:@({_DIGEST}))?$")
_HEX64_RE = re.compile(r"^[a-f0-9]{64}$")
_NAME_TOTAL_MAX = 255
#: digest algorithms go-digest knows, with the hex length of their encoded value
_DIGEST_HEX_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}
_DIGEST_HEX_RE = re.compile(r"^[a-f0-9]+$")


def _split_domain(name: str) -> tuple[str, str]:
    """Docker's normalisation: a first segment that is not a host means Docker Hub."""
    first, slash, rest = name.partition("/")
    if not slash or ("." not in first and ":" not in first and first != "localhost" and first.lower() == first):
        domain, remainder = "docker.io", name
    else:
        domain, remainder = first, rest
    if domain == "docker.io" and "/" not in remainder:
        remainder = "library/" + remainder
    return domain, remainder


def parse_tag(image: str) -> tuple[str, str] | None:
    """(tag, digest) of a reference, with ``latest`` implied when both are absent; None if invalid."""
    if _HEX64_RE.match(image):
        return None
    domain, remainder = _split_domain(image)
    if remainder.lower() != remainder:
        return None
    match = _REFERENCE_RE.match(f"{domain}/{remainder}")
    if match is None:
        return None
    name, tag, digest = match.group(1), match.group(2) or "", match.group(3) or ""
    if len(name) > _NAME_TOTAL_MAX:
        return None
    if digest:
        algorithm, _, encoded = digest.partition(":")
        if _DIGEST_HEX_LENGTHS.get(algorithm) != len(encoded) or not _DIGEST_HEX_RE.match(encoded):
            return None
    if not tag and not digest:
        tag = "latest"
    return tag, digest


def pull_policy(image: object) -> str:
    """``Always`` for a ``latest`` tag (written or implied), else ``IfNotPresent``."""
    parsed = parse_tag(image) if isinstance(image, str) else None
    return "Always" if parsed is not None and parsed[0] == "latest" else "IfNotPresent"
