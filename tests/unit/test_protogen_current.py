"""CI's check that generated protobuf/gRPC code is current: regenerate ``proto/`` into a temporary
folder and compare it, file by file, with the code the services import."""

from __future__ import annotations

import shutil
from pathlib import Path

from genericapi import protogen


def test_generated_code_in_place_is_what_proto_produces_now() -> None:
    protogen.ensure_generated()
    assert protogen.stale_outputs() == []
    assert protogen.main(["--check"]) == 0


def test_the_imported_control_modules_are_the_generated_ones() -> None:
    from genericapi.server.control_proto import pb, rpc

    control_dir = protogen.GENERATED_DIR / "kubechain" / "control" / "v1"
    assert Path(str(pb.__file__)).resolve() == (control_dir / "control_pb2.py").resolve()
    assert Path(str(rpc.__file__)).resolve() == (control_dir / "control_pb2_grpc.py").resolve()
    assert pb.DESCRIPTOR.package == "kubechain.control.v1"
    assert [m.name for m in pb.DESCRIPTOR.services_by_name["Control"].methods] == ["WatchDiscovery"]
    assert "from genericapi.generated.kubechain.control.v1 import control_pb2" in Path(str(rpc.__file__)).read_text()


def test_check_reports_changed_missing_and_extra_files(tmp_path: Path) -> None:
    protogen.ensure_generated()
    copy = tmp_path / "generated"
    shutil.copytree(protogen.GENERATED_DIR, copy, ignore=shutil.ignore_patterns(".lock", "*.pb", "__pycache__"))
    control = copy / "kubechain" / "control" / "v1"
    edited = control / "control_pb2.py"
    edited.write_text(edited.read_text() + "\n# edited by hand\n")
    (control / "control_pb2_grpc.py").unlink()
    (copy / "gnostic" / "stray_pb2.py").write_text("")
    assert protogen.stale_outputs(out_dir=copy) == [
        "gnostic/stray_pb2.py",
        "kubechain/control/v1/control_pb2.py",
        "kubechain/control/v1/control_pb2_grpc.py",
    ]


def test_check_notices_a_proto_changed_since_generation(tmp_path: Path) -> None:
    protos = tmp_path / "proto"
    shutil.copytree(protogen.proto_dir(), protos)
    out = tmp_path / "out"
    protogen.ensure_generated(protos, out)
    assert protogen.stale_outputs(protos, out) == []
    source = protos / "kubechain" / "control" / "v1" / "control.proto"
    source.write_text(source.read_text().replace("bytes apis = 5;", "bytes apis = 5;\n  string note = 6;"))
    assert protogen.stale_outputs(protos, out) == ["kubechain/control/v1/control_pb2.py",
                                                   "kubechain/control/v1/control_pb2.pyi"]


def test_check_rejects_unknown_arguments() -> None:
    assert protogen.main(["--bogus"]) == 2
