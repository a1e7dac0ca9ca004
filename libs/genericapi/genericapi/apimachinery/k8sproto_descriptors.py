"""Kubernetes' protobuf message definitions, recovered from a Kubernetes Go binary at build time.

kubectl and client-go send bodies of built-in kinds as Kubernetes protobuf. To decode them we
need the message definitions, but we must not vendor Kubernetes' ``generated.proto`` files. Every
Kubernetes Go binary registers its gzipped ``FileDescriptorProto``s, so we scan a local binary
(kubectl by default) for gzip streams, keep the ``k8s.io/...`` descriptors and write them as one
``FileDescriptorSet`` into the git-ignored ``genericapi/generated/`` directory.

The set is deduplicated, dependency-ordered, and has its dependency on ``gogo.proto`` removed (the
gogo options stay in the option messages as unknown fields; :mod:`genericapi.apimachinery.k8sproto`
reads ``gogoproto.nullable`` from them to tell Go pointer fields from value fields).

Which binary: ``$KUBECHAIN_PROTO_SOURCE_BINARY`` if set, else the newest ``kubectl.1.N`` beside
the kubectl on ``PATH``, else that kubectl itself. No binary means no descriptor set, and protobuf
request bodies are then answered with 415 by the decoder.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import threading
import zlib
from pathlib import Path

from google.protobuf import descriptor_pb2

from genericapi import protogen

SOURCE_BINARY_ENV = "KUBECHAIN_PROTO_SOURCE_BINARY"
DESCRIPTOR_SET_NAME = "k8s_descriptors.pb"
_STAMP_NAME = "k8s_descriptors.source"
#: bump when the extraction output changes shape so old files are rebuilt
_FORMAT_VERSION = "1"
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
#: generous upper bound on one compressed descriptor (core/v1 is ~100 KiB compressed)
_MAX_COMPRESSED = 4_000_000
_KUBECTL_VERSIONED = re.compile(r"^kubectl\.(\d+)\.(\d+)$")

_thread_lock = threading.Lock()


def descriptor_set_path(out_dir: Path | None = None) -> Path:
    return (out_dir if out_dir is not None else protogen.GENERATED_DIR) / DESCRIPTOR_SET_NAME


def find_source_binary() -> Path | None:
    """The Kubernetes Go binary to read descriptors from, or None when there is none."""
    override = os.environ.get(SOURCE_BINARY_ENV)
    if override:
        path = Path(override)
        return path if path.is_file() else None
    on_path = shutil.which("kubectl")
    if on_path is None:
        return None
    kubectl = Path(on_path).resolve()
    versioned: list[tuple[tuple[int, int], Path]] = []
    for candidate in kubectl.parent.glob("kubectl.*"):
        match = _KUBECTL_VERSIONED.match(candidate.name)
        if match and candidate.is_file():
            versioned.append(((int(match.group(1)), int(match.group(2))), candidate))
    if versioned:
        return max(versioned)[1]
    return kubectl if kubectl.is_file() else None


def _gunzip_prefix(data: bytes, start: int) -> bytes | None:
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[start:start + _MAX_COMPRESSED])
    except zlib.error:
        return None


def extract_descriptors(binary: Path) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """Every ``k8s.io/`` file descriptor registered in ``binary``, by file name (first one wins)."""
    data = binary.read_bytes()
    found: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for match in re.finditer(re.escape(_GZIP_HEADER), data):
        raw = _gunzip_prefix(data, match.start())
        if not raw:
            continue
        proto = descriptor_pb2.FileDescriptorProto()
        try:
            proto.ParseFromString(raw)
        except Exception:  # not a descriptor: some other gzip stream
            continue
        if proto.name.startswith("k8s.io/") and proto.name not in found:
            found[proto.name] = proto
    return found


def build_descriptor_set(
    files: dict[str, descriptor_pb2.FileDescriptorProto],
) -> descriptor_pb2.FileDescriptorSet:
    """Order ``files`` so each follows its dependencies; drop dependencies outside the set."""
    ordered: list[descriptor_pb2.FileDescriptorProto] = []
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(name: str) -> None:
        if name in done or name in visiting or name not in files:
            return
        visiting.add(name)
        original = files[name]
        for dependency in original.dependency:
            visit(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        proto.CopyFrom(original)
        del proto.dependency[:]
        del proto.public_dependency[:]
        del proto.weak_dependency[:]
        proto.dependency.extend(d for d in original.dependency if d in files)
        ordered.append(proto)
        visiting.discard(name)
        done.add(name)

    for name in sorted(files):
        visit(name)
    result = descriptor_pb2.FileDescriptorSet()
    result.file.extend(ordered)
    return result


def _source_signature(binary: Path) -> str:
    stat = binary.stat()
    return f"{_FORMAT_VERSION}\n{binary.resolve()}\n{stat.st_size}\n{stat.st_mtime_ns}\n"


def _is_fresh(target: Path, stamp: Path, binary: Path) -> bool:
    try:
        return target.is_file() and stamp.read_text() == _source_signature(binary)
    except OSError:
        return False


def ensure_descriptor_set(out_dir: Path | None = None, binary: Path | None = None) -> Path | None:
    """Write the descriptor set unless it is up to date; its path, or None when none can be had.

    ``binary`` defaults to :func:`find_source_binary`. Without a binary an existing set is still
    used. Safe across threads and processes (shares protogen's lock file in the output directory).
    """
    target = descriptor_set_path(out_dir)
    stamp = target.with_name(_STAMP_NAME)
    source = binary if binary is not None else find_source_binary()
    if source is None:
        return target if target.is_file() else None
    if _is_fresh(target, stamp, source):
        return target
    with _thread_lock:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / protogen._LOCK, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if _is_fresh(target, stamp, source):
                    return target
                files = extract_descriptors(source)
                if not files:
                    return target if target.is_file() else None
                payload = build_descriptor_set(files).SerializeToString()
                temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
                temporary.write_bytes(payload)
                os.replace(temporary, target)
                stamp.write_text(_source_signature(source))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    return target


def load_descriptor_set(path: Path) -> descriptor_pb2.FileDescriptorSet:
    result = descriptor_pb2.FileDescriptorSet()
    result.ParseFromString(path.read_bytes())
    return result
