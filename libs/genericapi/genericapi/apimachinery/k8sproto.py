"""Decode Kubernetes protobuf request bodies (``application/vnd.kubernetes.protobuf``) into JSON dicts.

kubectl 1.32+ and client-go typed clients send bodies of built-in kinds as Kubernetes protobuf;
our server stores JSON, so such bodies are turned into the dict that kube-apiserver would have
produced from the same object sent as JSON (Go's ``encoding/json`` of the Go struct).

Wire format: ``k8s\\x00`` then a ``runtime.Unknown`` whose ``typeMeta`` names the kind and whose
``raw`` is the typed message. Message definitions come from the descriptor set that
:mod:`genericapi.apimachinery.k8sproto_descriptors` extracts from a local Kubernetes binary; when
there is none, protobuf bodies are unsupported and :func:`decode_protobuf_body` raises 415.

How proto fields become JSON (what Go's encoding/json would write for the Go struct):

* Go pointer vs value fields come from the ``gogoproto.nullable=false`` option that the
  descriptors still carry (value fields have it). gogo writes value fields even when empty and
  pointer fields only when non-nil, so wire presence of a pointer field means "set".
* Value scalars (string, ints, bool, bytes) that are zero are omitted unless the field is in the
  OpenAPI ``required`` list of its type (openapi-gen makes a field required exactly when it has
  neither ``omitempty`` nor ``+optional``, i.e. Go writes it even when zero). Pointer scalars
  that are present are always written (``replicas: 0``, ``storageClassName: ""``).
* Value structs are always written (``{}`` when empty, e.g. ``resources: {}``, ``status: {}``),
  even when absent on the wire; pointer structs only when present.
* Empty lists and maps are omitted (Go writes ``null`` for a nil one without omitempty; protobuf
  cannot tell nil from empty).
* Special types: ``Time`` -> RFC 3339 (zero omitted), ``MicroTime`` -> RFC 3339 with 6 fraction
  digits, ``Duration`` -> Go duration string, ``Quantity`` -> its string, ``IntOrString`` -> int or
  string, ``RawExtension`` / ``FieldsV1`` -> parsed JSON, bytes -> base64, ``ExtraValue`` /
  ``Verbs`` (messages wrapping one ``items`` string list) -> lists.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from genericapi.apimachinery import errors, k8sproto_descriptors
from genericapi.apimachinery.k8sproto_convert import MessageConverter, SchemaHints, schema_hints_from_catalog

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
UNKNOWN_MESSAGE = "k8s.io.apimachinery.pkg.runtime.Unknown"
_META_PACKAGE = "k8s.io.apimachinery.pkg.apis.meta"
#: meta.k8s.io kinds that every group version also registers (clients may send them under any group)
_SHARED_META_KINDS = frozenset({
    "DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions", "GetOptions", "ListOptions",
    "Status", "WatchEvent",
})
#: groups whose proto package is not named after the group's first DNS label
_GROUP_PACKAGES = {"": "core", "internal.apiserver.k8s.io": "apiserverinternal"}
#: what the scheme is called in kube-apiserver's "no kind is registered" message
_SCHEME_NAME = "pkg/api/legacyscheme/scheme.go:30"


def _unsupported() -> errors.APIError:
    return errors.APIError(
        415, "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"application/json, application/yaml (got {CONTENT_TYPE}: this server has no Kubernetes "
        f"protobuf descriptors)")


def candidate_message_names(group: str, version: str, kind: str) -> list[str]:
    """Fully qualified proto message names that may hold ``group/version, Kind=kind``, best first."""
    if group == "meta.k8s.io":
        names = [f"{_META_PACKAGE}.{version}.{kind}"]
    elif group == "metrics.k8s.io":
        names = [f"k8s.io.metrics.pkg.apis.metrics.{version}.{kind}"]
    else:
        label = _GROUP_PACKAGES.get(group) or group.split(".", 1)[0]
        names = [f"k8s.io.api.{label}.{version}.{kind}"]
    if kind in _SHARED_META_KINDS:
        names.append(f"{_META_PACKAGE}.v1.{kind}")
    return names


class ProtoRegistry:
    """Message classes and converters built from one descriptor set (cached per message type)."""

    def __init__(self, descriptor_set: descriptor_pb2.FileDescriptorSet,
                 hints: SchemaHints | None = None) -> None:
        self._pool = descriptor_pool.DescriptorPool()
        for proto in descriptor_set.file:
            self._pool.Add(proto)
        self._converter = MessageConverter(descriptor_set, hints, self._decode_nested_body)
        self._classes: dict[str, type[Message]] = {}
        self._kinds: dict[tuple[str, str], str | None] = {}
        self._lock = threading.Lock()
        self._unknown = self.message_class(UNKNOWN_MESSAGE)

    def message_class(self, full_name: str) -> type[Message]:
        """The runtime class of a message (KeyError when the set has no such message)."""
        cls = self._classes.get(full_name)
        if cls is None:
            with self._lock:
                cls = message_factory.GetMessageClass(self._pool.FindMessageTypeByName(full_name))
                self._classes[full_name] = cls
        return cls

    def message_name_for(self, api_version: str, kind: str) -> str | None:
        key = (api_version, kind)
        if key in self._kinds:
            return self._kinds[key]
        group, _, version = api_version.rpartition("/")
        found = None
        for name in candidate_message_names(group, version, kind):
            try:
                self.message_class(name)
            except KeyError:
                continue
            found = name
            break
        self._kinds[key] = found
        return found

    def to_dict(self, message: Message) -> dict[str, Any]:
        """The JSON form of any message built from this registry's classes."""
        return self._converter.convert(message)

    def _decode_nested_body(self, body: bytes) -> dict[str, Any]:
        return self.decode(body)

    def decode(self, body: bytes, default_gvk: tuple[str, str, str] | None = None) -> dict[str, Any]:
        """Decode one ``k8s\\x00``-prefixed body; see :func:`decode_protobuf_body`."""
        if not body:
            raise errors.bad_request("empty data")
        if body[:4] != MAGIC:
            raise errors.bad_request(
                "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")
        if len(body) == len(MAGIC):
            raise errors.bad_request("empty body")
        unknown = self._unknown()
        try:
            unknown.ParseFromString(body[4:])
        except DecodeError as exc:
            raise errors.bad_request(f"unable to decode protobuf body: {exc}") from None
        type_meta = unknown.typeMeta  # type: ignore[attr-defined]
        api_version, kind = type_meta.apiVersion, type_meta.kind
        api_version, kind = _apply_defaults(api_version, kind, default_gvk)
        described = f'runtime.TypeMeta{{APIVersion:"{type_meta.apiVersion}", Kind:"{type_meta.kind}"}}'
        if not kind:
            raise errors.bad_request(f"Object 'Kind' is missing in '{described}'")
        if not api_version:
            raise errors.bad_request(f"Object 'apiVersion' is missing in '{described}'")
        name = self.message_name_for(api_version, kind)
        if name is None:
            raise errors.bad_request(
                f'no kind "{kind}" is registered for version "{api_version}" in scheme "{_SCHEME_NAME}"')
        typed = self.message_class(name)()
        try:
            typed.ParseFromString(unknown.raw)  # type: ignore[attr-defined]
        except DecodeError as exc:
            raise errors.bad_request(f"unable to decode {api_version}, Kind={kind} from protobuf: {exc}") from None
        out: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
        out.update(self._converter.convert(typed))
        return out


def _apply_defaults(api_version: str, kind: str,
                    default_gvk: tuple[str, str, str] | None) -> tuple[str, str]:
    """Fill a missing kind/version from the request's expected kind, as the Go decoder does."""
    if default_gvk is None:
        return api_version, kind
    group, version, default_kind = default_gvk
    if not kind:
        kind = default_kind
    if not api_version.rpartition("/")[2] and version:
        api_version = f"{group}/{version}" if group else version
    return api_version, kind


_state_lock = threading.Lock()
_registry: ProtoRegistry | None = None
_attempted = False


def load_registry(path: Path) -> ProtoRegistry:
    """A registry for the descriptor set at ``path`` with omitempty hints from the 1.33 schemas."""
    return ProtoRegistry(k8sproto_descriptors.load_descriptor_set(path), schema_hints_from_catalog())


def registry() -> ProtoRegistry | None:
    """The process-wide registry, built on first use; None when no descriptors are available."""
    global _registry, _attempted
    if _attempted:
        return _registry
    with _state_lock:
        if not _attempted:
            path = k8sproto_descriptors.ensure_descriptor_set()
            _registry = load_registry(path) if path is not None else None
            _attempted = True
    return _registry


def protobuf_available() -> bool:
    """Whether protobuf request bodies can be decoded (a descriptor set could be had)."""
    return registry() is not None


def decode_protobuf_body(body: bytes, *,
                         default_gvk: tuple[str, str, str] | None = None) -> dict[str, Any]:
    """The JSON-shaped dict of a Kubernetes protobuf body.

    ``default_gvk`` (group, version, kind) fills a kind or version missing from the body, as the
    real decoder does with the kind the URL implies; checking that the body's kind fits the
    endpoint stays the caller's job. Raises 400 BadRequest for malformed bodies and unknown
    kinds, and 415 UnsupportedMediaType when no descriptors are available. Custom resources are
    never protobuf: callers should answer 415 for them before calling this.
    """
    current = registry()
    if current is None:
        raise _unsupported()
    return current.decode(body, default_gvk)


def encode_protobuf_body(message: Message, api_version: str, kind: str) -> bytes:
    """``message`` framed as kubectl sends it (magic + ``runtime.Unknown``); for tests and tools."""
    current = registry()
    if current is None:
        raise _unsupported()
    unknown = current.message_class(UNKNOWN_MESSAGE)()
    unknown.typeMeta.apiVersion = api_version  # type: ignore[attr-defined]
    unknown.typeMeta.kind = kind  # type: ignore[attr-defined]
    unknown.raw = message.SerializeToString()  # type: ignore[attr-defined]
    return MAGIC + unknown.SerializeToString()
