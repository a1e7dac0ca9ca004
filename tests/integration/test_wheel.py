"""The built wheel, installed (not editable) outside any checkout, runs the whole chain.

A snapshot of the source (what an sdist holds: no ``generated/``) is built into a wheel with setup.py's
build step, which ships ``proto/``, the generated protobuf/gRPC modules and the Kubernetes descriptor
set. The wheel goes into a fresh venv whose dependencies come from the project's venv (a ``.pth``
line: offline and quick; the project's own editable mapping is not processed there, so every
kubechain module is the wheel's). ``kubechain up`` then runs from a temporary directory with no
kubectl on ``PATH`` at all, and kubectl 1.33 creates a ConfigMap as protobuf (201, not 415) and reads
it back.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.procs import kubectl_binary

from kubechain_cli.chain import free_port

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
#: what the wheel is built from (an sdist's content; MANIFEST.in)
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "proto", "libs", "services", "kubechain_cli",
           "kubechain_testing")
#: the wheel holds Python, proto files, schemas-free data: a kubectl (60 MB) must never be in it
MAX_WHEEL_BYTES = 5_000_000


@dataclass
class Installed:
    wheel: Path
    venv: Path
    workdir: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def _run(cmd: list[str], env: dict[str, str] | None = None,
         cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=cwd)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "generated", "*.egg-info", "build", "dist")
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            src.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / name)
    # Build: the project venv's setuptools and grpcio-tools (no download); the descriptors from kubectl 1.33.
    started = time.monotonic()
    env = dict(os.environ, KUBECHAIN_PROTO_SOURCE_BINARY=kubectl_binary("1.33"))
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(root / "dist"),
          str(src)], env=env, cwd=root)
    (wheel,) = (root / "dist").glob("kubechain-*.whl")
    built = time.monotonic() - started
    # A fresh venv outside the checkout; dependencies resolve from the project venv, kubechain from the wheel.
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    site = Path(_run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
                     ).stdout.strip())
    (site / "kubechain-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps",
          "--no-index", str(wheel)])
    print(f"\nwheel {wheel.name}: {wheel.stat().st_size} bytes, built in {built:.1f}s, "
          f"installed in {time.monotonic() - started - built:.1f}s")
    workdir = root / "work"
    workdir.mkdir()
    return Installed(wheel, venv, workdir)


def test_wheel_contents(installed: Installed) -> None:
    size = installed.wheel.stat().st_size
    assert size < MAX_WHEEL_BYTES, f"the wheel is {size} bytes"
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
        assert not [n for n in names if n.rsplit("/", 1)[-1].startswith("kubectl")], "a kubectl binary in the wheel"
        for required in ("genericapi/proto/kubechain/control/v1/control.proto",
                         "genericapi/proto/gnostic/openapi_v2.proto",
                         "genericapi/generated/kubechain/control/v1/control_pb2_grpc.py",
                         "genericapi/generated/gnostic/openapi_v2_pb2.py",
                         "genericapi/generated/.stamp",
                         "genericapi/generated/k8s_descriptors.pb",
                         "genericapi/generated/k8s_descriptors.source",
                         "coreapi/__main__.py", "extensionsapi/__main__.py", "aggregator/__main__.py",
                         "kubechain_cli/main.py", "kubechain_testing/plugin.py"):
            assert required in names, required
        assert wheel.read("kubechain-0.1.0.dist-info/entry_points.txt").decode().count(
            "kubechain = kubechain_cli.main:main") == 1
        assert wheel.read("genericapi/generated/k8s_descriptors.source").decode().startswith("bundled\n")
        assert len(wheel.read("genericapi/generated/k8s_descriptors.pb")) > 100_000
    # Every kubechain module is the installed one, not the checkout's.
    probe = _run([str(installed.python), "-c",
                  "import genericapi, coreapi, extensionsapi, aggregator, kubechain_cli, json; "
                  "from genericapi import protogen; "
                  "from genericapi.apimachinery import k8sproto_descriptors as d; "
                  "mods = (genericapi, coreapi, extensionsapi, aggregator, kubechain_cli); "
                  "print(json.dumps([m.__file__ for m in mods] + [str(protogen.proto_dir()), d.is_bundled()]))"],
                 cwd=installed.workdir)
    *files, proto_dir, bundled = json.loads(probe.stdout)
    for path in [*files, proto_dir]:
        assert path.startswith(str(installed.venv)), path
    assert bundled is True


@pytest.fixture(scope="module")
def chain(installed: Installed) -> Iterator[Path]:
    """``kubechain up`` of the installed wheel, from a directory outside the checkout, no kubectl on PATH."""
    data = installed.workdir / "data"
    bin_dir = installed.venv / "bin"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "KUBECHAIN_PROTO_SOURCE_BINARY", "KUBECHAIN_PROTO_DIR", "VIRTUAL_ENV")}
    env["PATH"] = str(bin_dir)
    assert shutil.which("kubectl", path=env["PATH"]) is None
    proc = subprocess.Popen([str(bin_dir / "kubechain"), "up", "--data-dir", str(data), "--port", str(free_port())],
                            cwd=installed.workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    assert proc.stdout is not None
    output: list[str] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        output.append(line)
        if "is ready at" in line or not line:
            break
    if "is ready at" not in output[-1]:
        proc.kill()
        pytest.fail("kubechain up (wheel) did not become ready:\n" + "".join(output))
    try:
        yield data / "kubeconfig"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(60) == 0
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            raise


def _kubectl(kubeconfig: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KUBECONFIG=str(kubeconfig))
    proc = subprocess.run([kubectl_binary("1.33"), *args], capture_output=True, text=True, env=env, timeout=60)
    if check:
        assert proc.returncode == 0, f"kubectl {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_installed_chain_takes_kubectl_133_protobuf(chain: Path) -> None:
    created = _kubectl(chain, "create", "configmap", "from-wheel", "--from-literal=a=b", "-v=8")
    request = created.stderr[created.stderr.index('"Request" verb="POST"'):]
    assert re.search(r"Content-Type: application/vnd\.kubernetes\.protobuf", request), created.stderr[-3000:]
    assert re.search(r'"Response" status="201 Created"', created.stderr), created.stderr[-3000:]
    assert created.stdout.strip() == "configmap/from-wheel created"
    got = json.loads(_kubectl(chain, "get", "configmap", "from-wheel", "-o", "json").stdout)
    assert got["data"] == {"a": "b"} and got["metadata"]["namespace"] == "default"
    # Built-in kinds through the other groups as protobuf too, and a bad name still gets kube's 422.
    _kubectl(chain, "create", "deployment", "web", "--image=nginx:1.25", "--replicas=2")
    assert _kubectl(chain, "get", "deployment", "web", "-o", "jsonpath={.spec.replicas}").stdout == "2"
    bad = _kubectl(chain, "create", "configmap", "Bad_Name", "--from-literal=a=b", check=False)
    assert bad.returncode != 0 and 'ConfigMap "Bad_Name" is invalid' in bad.stderr, bad.stderr
