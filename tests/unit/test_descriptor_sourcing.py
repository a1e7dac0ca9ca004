"""Where the Kubernetes descriptor set and the generated code come from in wheels, images and checkouts.

A set bundled into a package is used as is (never re-extracted from whatever kubectl is on PATH, and
nothing is written into site-packages); ``$KUBECHAIN_PROTO_SOURCE_BINARY`` still overrides it; a
package directory nobody may write to never makes the lookup fail; generated code stamped prebuilt is
current for the proto/ shipped beside it only; the pinned kubectl wheel is refused unless its digests
match.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from genericapi import pinned_kubectl, protogen
from genericapi.apimachinery import k8sproto_descriptors
from support.procs import kubectl_binary

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def kubectl_133() -> Path:
    try:
        return Path(kubectl_binary("1.33"))
    except RuntimeError as err:
        pytest.skip(str(err))


@pytest.fixture
def no_override(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(k8sproto_descriptors.SOURCE_BINARY_ENV, raising=False)
    monkeypatch.delenv(pinned_kubectl.WHEEL_ENV, raising=False)
    yield


def test_bundled_set_is_used_as_is(tmp_path: Path, kubectl_133: Path, no_override: None,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(k8sproto_descriptors.SOURCE_BINARY_ENV, str(kubectl_133))
    target = k8sproto_descriptors.bundle_descriptor_set(tmp_path)
    assert target == tmp_path / "k8s_descriptors.pb"
    assert k8sproto_descriptors.is_bundled(tmp_path)
    assert (tmp_path / "k8s_descriptors.source").read_text() == f"bundled\n{kubectl_133}\n"
    names = {f.name for f in k8sproto_descriptors.load_descriptor_set(target).file}
    assert "k8s.io/api/core/v1/generated.proto" in names and "k8s.io/api/apps/v1/generated.proto" in names
    # A run-time lookup (no override) keeps it even with another kubectl around: nothing is rewritten.
    monkeypatch.delenv(k8sproto_descriptors.SOURCE_BINARY_ENV)
    before = target.stat().st_mtime_ns
    assert k8sproto_descriptors.ensure_descriptor_set(tmp_path) == target
    assert target.stat().st_mtime_ns == before and k8sproto_descriptors.is_bundled(tmp_path)
    # The explicit override still wins: the set is re-extracted from that binary and stamped as such.
    monkeypatch.setenv(k8sproto_descriptors.SOURCE_BINARY_ENV, str(kubectl_133))
    assert k8sproto_descriptors.ensure_descriptor_set(tmp_path) == target
    assert not k8sproto_descriptors.is_bundled(tmp_path)


def test_unwritable_package_dir_keeps_its_set(tmp_path: Path, kubectl_133: Path, no_override: None) -> None:
    """An installed package another user owns: writing fails (here: the lock file cannot be opened,
    which fails even for root), and the set already there is used instead of an error."""
    (tmp_path / "k8s_descriptors.pb").write_bytes(b"an older set")
    (tmp_path / protogen._LOCK).mkdir()
    assert k8sproto_descriptors.ensure_descriptor_set(tmp_path, kubectl_133) == tmp_path / "k8s_descriptors.pb"
    assert (tmp_path / "k8s_descriptors.pb").read_bytes() == b"an older set"
    (tmp_path / "k8s_descriptors.pb").unlink()
    assert k8sproto_descriptors.ensure_descriptor_set(tmp_path, kubectl_133) is None


def test_binary_without_descriptors_means_no_set(tmp_path: Path, no_override: None) -> None:
    missing = tmp_path / "not-a-binary"
    missing.write_bytes(b"no gzip streams here")
    out = tmp_path / "out"
    out.mkdir()
    assert k8sproto_descriptors.ensure_descriptor_set(out, missing) is None
    assert not (out / "k8s_descriptors.pb").exists()


def test_bundle_from_a_named_wheel_that_is_not_the_pinned_one_fails(tmp_path: Path, no_override: None,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / f"{pinned_kubectl.PACKAGE.replace('-', '_')}-{pinned_kubectl.VERSION}-py3-none-any.whl"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr("x.jsii.tgz", b"not a tarball")
    fake.write_bytes(buffer.getvalue())
    monkeypatch.setenv(pinned_kubectl.WHEEL_ENV, str(fake))
    with pytest.raises(pinned_kubectl.PinnedKubectlError, match="is not the pinned"):
        k8sproto_descriptors.bundle_descriptor_set(tmp_path / "out")
    assert not (tmp_path / "out" / "k8s_descriptors.pb").exists()


def test_pinned_requirement_is_hash_checked() -> None:
    line = pinned_kubectl.requirement()
    assert line == f"{pinned_kubectl.PACKAGE}=={pinned_kubectl.VERSION} --hash=sha256:{pinned_kubectl.WHEEL_SHA256}"
    assert len(pinned_kubectl.WHEEL_SHA256) == 64 and len(pinned_kubectl.KUBECTL_SHA256) == 64
    assert pinned_kubectl.KUBECTL_VERSION.startswith("v1.33.")
    assert pinned_kubectl.main(["nonsense"]) == 2


def test_prebuilt_generated_code_is_current_for_its_shipped_protos(tmp_path: Path, kubectl_133: Path,
                                                                    no_override: None,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(k8sproto_descriptors.SOURCE_BINARY_ENV, str(kubectl_133))
    package = tmp_path / "genericapi"
    package.mkdir()
    assert protogen.build_into(package, REPO / "proto") == package / "generated" / "k8s_descriptors.pb"
    assert (package / "proto" / "kubechain" / "control" / "v1" / "control.proto").is_file()
    generated = package / "generated"
    assert (generated / "kubechain" / "control" / "v1" / "control_pb2_grpc.py").is_file()
    assert not (generated / ".lock").exists()
    # Installed files get fresh mtimes in any order: still current, nothing regenerated or written.
    for proto in (package / "proto").rglob("*.proto"):
        os.utime(proto, ns=(proto.stat().st_atime_ns, proto.stat().st_mtime_ns + 10**12))
    module = generated / "gnostic" / "openapi_v2_pb2.py"
    before = module.stat().st_mtime_ns
    protogen.ensure_generated(package / "proto", generated)
    assert module.stat().st_mtime_ns == before and not (generated / ".lock").exists()
    # Pointed at other protos (KUBECHAIN_PROTO_DIR), the same output is generated again from them.
    other = tmp_path / "other-proto"
    other.mkdir()
    (other / "only.proto").write_text('syntax = "proto3";\npackage only;\nmessage One { string a = 1; }\n')
    protogen.ensure_generated(other, generated)
    assert (generated / "only_pb2.py").is_file() and not module.exists()
