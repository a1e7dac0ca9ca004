"""The pytest plugin's pure parts, no chain: CRD files read for the marker (and each kind of bad
input refused with the path and document named), test namespace names, kubectl argument lists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kubechain_testing import Kubectl
from kubechain_testing.crds import CRDFileError, load_crds
from kubechain_testing.fixtures import namespace_name

DATA = Path(__file__).parent.parent / "data" / "crds"
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec: {group: example.com}
"""


def test_files_and_directories(tmp_path: Path) -> None:
    docs = load_crds(["crds", str(DATA / "certificates.cert-manager.io.yaml")], DATA.parent)
    names = [d.name for d in docs]
    assert names == ["applications.argoproj.io", "certificates.cert-manager.io",
                     "servicemonitors.monitoring.coreos.com", "certificates.cert-manager.io"]
    (tmp_path / "two.yaml").write_text(f"---\n{CRD}---\n{CRD.replace('widgets', 'gadgets')}---\n")
    docs = load_crds([tmp_path / "two.yaml"], Path("/nowhere"))  # absolute: the rootdir is not used
    assert [(d.name, d.source) for d in docs] == [("widgets.example.com", f"{tmp_path / 'two.yaml'}, document 1"),
                                                  ("gadgets.example.com", f"{tmp_path / 'two.yaml'}, document 2")]


@pytest.mark.parametrize(("content", "message"), [
    ("a: [", "is not valid YAML: "),
    ("- 1\n", "document 1 is a list, not an object"),
    ("apiVersion: v1\nkind: ConfigMap\n",
     "document 1 is apiVersion 'v1' kind 'ConfigMap', not an apiextensions.k8s.io/v1 CustomResourceDefinition"),
    (CRD.replace("/v1", "/v1beta1"), "not an apiextensions.k8s.io/v1 CustomResourceDefinition "
                                     "(apiextensions.k8s.io/v1beta1 was removed in Kubernetes 1.22)"),
    (CRD.replace("metadata: {name: widgets.example.com}", "metadata: {}"), "document 1: metadata.name is missing"),
    ("---\n---\n", "holds no CustomResourceDefinition"),
])
def test_bad_files(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "crd.yaml").write_text(content)
    with pytest.raises(CRDFileError) as err:
        load_crds(["crd.yaml"], tmp_path)
    assert str(err.value).startswith(f"@pytest.mark.kubechain_crds: {tmp_path / 'crd.yaml'}")
    assert message in str(err.value)


def test_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(CRDFileError, match=re.escape(
            f"'missing.yaml': no such file or directory ({tmp_path / 'missing.yaml'}; "
            f"relative paths are taken from the rootdir {tmp_path})")):
        load_crds(["missing.yaml"], tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not yaml")
    with pytest.raises(CRDFileError, match=f"directory {tmp_path / 'empty'} has no .yaml, .yml or .json file"):
        load_crds(["empty"], tmp_path)
    with pytest.raises(CRDFileError, match=r"42 \(int\) is not a path"):
        load_crds([42], tmp_path)
    with pytest.raises(CRDFileError, match=r"kubechain_crds\(\) needs at least one file or directory"):
        load_crds([], tmp_path)


def test_namespace_names() -> None:
    long = namespace_name("test_" + "x" * 200 + "[param-1]")
    short = namespace_name("test_apply[Case A/1]")
    assert len(long) == 63 and DNS1123_LABEL.match(long) and long.startswith("kc-test-xxx")
    assert DNS1123_LABEL.match(short) and re.fullmatch(r"kc-test-apply-case-a-1-[0-9a-f]{5}", short)
    assert namespace_name("___") .startswith("kc-") and DNS1123_LABEL.match(namespace_name("___"))
    assert len({namespace_name("test_same") for _ in range(50)}) > 45  # random suffix


def test_kubectl_arguments() -> None:
    kubectl = Kubectl(Path("/k/config"), "ns1", "kubectl.1.27")
    assert kubectl.argv("get", "cm", "-A") == ["kubectl.1.27", "--kubeconfig", "/k/config", "--namespace", "ns1",
                                               "get", "cm", "-A"]
    assert Kubectl(Path("/k/config")).argv("version") == ["kubectl", "--kubeconfig", "/k/config", "version"]
