"""Generate the Python protobuf/gRPC modules from the repository's ``proto/`` directory.

Generated code is not kept in git: ``ensure_generated()`` compiles every ``.proto`` under
``proto/`` (or ``$KUBECHAIN_PROTO_DIR``) into ``genericapi/generated/`` with grpc_tools' protoc,
in-process, and is a no-op while the outputs are newer than the inputs. Code that imports a
generated module calls it first. protoc writes imports relative to ``proto/``
(``from gnostic import openapi_v2_pb2``); those are rewritten to absolute
``genericapi.generated...`` imports so the package works wherever it is installed.

Run ``python -m genericapi.protogen`` to generate ahead of time (it also writes the Kubernetes
protobuf descriptor set, see ``genericapi.apimachinery.k8sproto_descriptors``), and
``python -m genericapi.protogen --check`` to verify that the generated code in place is exactly what
the current ``proto/`` and grpc_tools produce (``stale_outputs``; CI runs it through a unit test).

A wheel is built with everything in it (``build_into``, called by setup.py's build step): ``proto/``
as package data (``genericapi/proto``), the generated modules stamped *prebuilt* (trusted as
current while they are generated from that shipped ``proto/``, so an installed package never needs
to write into site-packages), and the Kubernetes descriptor set.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
GENERATED_DIR = PACKAGE_DIR / "generated"
GENERATED_PACKAGE = "genericapi.generated"
#: libs/genericapi/genericapi -> repository root
REPO_ROOT = PACKAGE_DIR.parents[2]
PROTO_DIR_ENV = "KUBECHAIN_PROTO_DIR"
_STAMP = ".stamp"
_LOCK = ".lock"
#: stamp content of generated code built into a wheel from the proto/ shipped beside it
_PREBUILT = "prebuilt from the package's proto/\n"
#: proto/ inside an installed wheel (package data); absent in a checkout, where REPO_ROOT/proto is used
PACKAGED_PROTO_DIR = PACKAGE_DIR / "proto"

_thread_lock = threading.Lock()


class ProtoGenerationError(RuntimeError):
    """protoc rejected the inputs."""


def proto_dir() -> Path:
    """``$KUBECHAIN_PROTO_DIR``, else the ``proto/`` an installed wheel ships, else the checkout's."""
    override = os.environ.get(PROTO_DIR_ENV)
    if override:
        return Path(override).resolve()
    return PACKAGED_PROTO_DIR if PACKAGED_PROTO_DIR.is_dir() else REPO_ROOT / "proto"


def _proto_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.proto")) if root.is_dir() else []


def _inputs_signature(root: Path, protos: list[Path], package: str) -> str:
    """What the outputs were generated from: source dir, files, package and this generator's version."""
    names = ",".join(str(p.relative_to(root)) for p in protos)
    return f"{root}\n{names}\n{package}\n{Path(__file__).stat().st_mtime_ns}\n"


def _is_fresh(root: Path, protos: list[Path], out: Path, package: str) -> bool:
    stamp = out / _STAMP
    try:
        recorded = stamp.read_text()
        stamp_mtime = stamp.stat().st_mtime_ns
    except OSError:
        return False
    if recorded == _PREBUILT:
        # Built into a wheel from the proto/ installed beside it: current unless pointed elsewhere.
        return root == (out / ".." / "proto").resolve()
    if recorded != _inputs_signature(root, protos, package):
        return False
    return all(p.stat().st_mtime_ns <= stamp_mtime for p in protos)


_RELATIVE_IMPORT = re.compile(r"^(from|import) ([A-Za-z_][\w.]*)( import .*| as .*)?$", re.MULTILINE)


def _rewrite_imports(text: str, out: Path, package: str) -> str:
    """Point imports of modules generated into ``out`` at ``package`` (absolute imports)."""

    def generated(module: str) -> bool:
        path = out.joinpath(*module.split("."))
        return path.is_dir() or path.with_suffix(".py").is_file()

    def fix(match: re.Match[str]) -> str:
        keyword, module, rest = match.group(1), match.group(2), match.group(3) or ""
        if not generated(module):
            return match.group(0)
        if keyword == "from":
            return f"from {package}.{module}{rest}"
        # "import foo_pb2 as x" -> "from genericapi.generated import foo_pb2 as x"
        module_package, _, leaf = module.rpartition(".")
        parent = f"{package}.{module_package}" if module_package else package
        return f"from {parent} import {leaf}{rest}"

    return _RELATIVE_IMPORT.sub(fix, text)


def _run_protoc(root: Path, protos: list[Path], out: Path) -> None:
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).resolve().parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{root}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *(str(p) for p in protos),
    ]
    if protoc.main(args) != 0:
        raise ProtoGenerationError(f"protoc failed on {root}")


def _finish_package(out: Path, package: str) -> None:
    """Add ``__init__.py`` everywhere and rewrite cross-module imports."""
    for directory in [out, *(p for p in out.rglob("*") if p.is_dir())]:
        init = directory / "__init__.py"
        if not init.exists():
            init.write_text('"""Generated by genericapi.protogen; do not edit."""\n')
    for module in [*out.rglob("*_pb2*.py"), *out.rglob("*_pb2*.pyi")]:
        text = module.read_text()
        fixed = _rewrite_imports(text, out, package)
        if fixed != text:
            module.write_text(fixed)


def _clear(out: Path) -> None:
    for entry in out.iterdir():
        if entry.name in (_LOCK,):
            continue
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def ensure_generated(
    proto_root: Path | None = None, out_dir: Path | None = None, package: str = GENERATED_PACKAGE
) -> None:
    """Compile ``proto/`` into ``genericapi/generated`` unless it is already up to date.

    ``proto_root``/``out_dir``/``package`` (the importable name of ``out_dir``) default to the
    repository's ``proto/`` (or ``$KUBECHAIN_PROTO_DIR``) and ``genericapi.generated``. Safe to call
    from several threads and processes at once: generation runs under a file lock and the
    freshness stamp is written last.
    """
    root = proto_root.resolve() if proto_root is not None else proto_dir()
    out = out_dir if out_dir is not None else GENERATED_DIR
    protos = _proto_files(root)
    if _is_fresh(root, protos, out, package):
        return
    with _thread_lock:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / _LOCK, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if _is_fresh(root, protos, out, package):
                    return
                _clear(out)
                if protos:
                    _run_protoc(root, protos, out)
                _finish_package(out, package)
                (out / _STAMP).write_text(_inputs_signature(root, protos, package))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


#: Suffixes of the files protoc and ``_finish_package`` write (other files in the output are not code).
_CODE_SUFFIXES = (".py", ".pyi")


def _code_files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.suffix in _CODE_SUFFIXES}


def stale_outputs(proto_root: Path | None = None, out_dir: Path | None = None,
                  package: str = GENERATED_PACKAGE) -> list[str]:
    """Generated files that differ from a fresh generation (missing, extra or changed), by path
    relative to ``out_dir``; empty when the generated code is current. Regenerates into a
    temporary folder and compares file contents, so it does not trust the freshness stamp."""
    root = proto_root.resolve() if proto_root is not None else proto_dir()
    out = out_dir if out_dir is not None else GENERATED_DIR
    with tempfile.TemporaryDirectory(prefix="kubechain-protogen-") as tmp:
        fresh_dir = Path(tmp) / "generated"
        ensure_generated(root, fresh_dir, package)
        fresh = _code_files(fresh_dir)
    current = _code_files(out) if out.is_dir() else {}
    return sorted(name for name in fresh.keys() | current.keys() if fresh.get(name) != current.get(name))


def build_into(package_dir: Path, proto_source: Path) -> Path | None:
    """Fill a built ``genericapi`` package (a wheel's build directory) with what it needs at run time.

    Copies ``proto_source`` to ``package_dir/proto``, generates ``package_dir/generated`` from it
    (stamped prebuilt) and bundles the Kubernetes descriptor set there
    (:func:`genericapi.apimachinery.k8sproto_descriptors.bundle_descriptor_set`); returns the set's
    path, or None when no source could be had (the installed package then reads the kubectl on PATH).
    """
    shipped = package_dir / "proto"
    if shipped.exists():
        shutil.rmtree(shipped)
    shutil.copytree(proto_source, shipped, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    out = package_dir / "generated"
    ensure_generated(shipped, out, GENERATED_PACKAGE)
    (out / _STAMP).write_text(_PREBUILT)
    from genericapi.apimachinery import k8sproto_descriptors

    descriptors = k8sproto_descriptors.bundle_descriptor_set(out)
    (out / _LOCK).unlink(missing_ok=True)
    return descriptors


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--check"]:
        stale = stale_outputs()
        for name in stale:
            print(f"not current: {GENERATED_DIR / name}")
        return 1 if stale else 0
    if args:
        print("usage: python -m genericapi.protogen [--check]", file=sys.stderr)
        return 2
    ensure_generated()
    print(f"generated {GENERATED_DIR} from {proto_dir()}")
    # Kubernetes' protobuf descriptors for decoding protobuf request bodies (read from a local
    # Kubernetes binary; optional: without one, protobuf bodies are answered with 415).
    from genericapi.apimachinery import k8sproto_descriptors

    descriptors = k8sproto_descriptors.ensure_descriptor_set()
    if descriptors is None:
        print("no Kubernetes binary found: protobuf request bodies will not be supported")
    else:
        print(f"wrote {descriptors}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
