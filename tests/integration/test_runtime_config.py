"""``--runtime-config`` end to end: kube 1.33's defaults on the session chain (no beta
authentication.k8s.io, so kubectl 1.27's ``auth whoami`` fails as against kube), and a chain
started with ``kubechain up``'s flag serving SelfSubjectReview v1beta1/v1alpha1 (kubectl 1.27 and
1.33 ``auth whoami``) and not batch/v1; a configuration kube refuses stops core-api at start."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.procs import ChainHandle, have_kubectl, kubectl_params, start_chain

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


KUBECTLS = kubectl_params("1.27", "1.33")
SSR = {"apiVersion": "authentication.k8s.io/v1beta1", "kind": "SelfSubjectReview"}


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChainHandle]:
    data: Path = tmp_path_factory.mktemp("runtime-config")
    c = Chain(data, port=free_port(), runtime_config=["authentication.k8s.io/v1beta1=true,api/alpha=true",
                                                       "batch/v1=false"])
    yield start_chain(c)
    c.stop()


def group_versions(chain: ChainHandle, group: str) -> list[str]:
    status, doc = chain.json("GET", f"/apis/{group}")
    return [v["version"] for v in doc["versions"]] if status == 200 else []


def test_defaults_leave_beta_off(chain: ChainHandle) -> None:
    assert group_versions(chain, "authentication.k8s.io") == ["v1"]
    status, body = chain.json("POST", "/apis/authentication.k8s.io/v1beta1/selfsubjectreviews", SSR)
    assert (status, body["reason"]) == (404, "NotFound")
    status, body = chain.json("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                              {**SSR, "apiVersion": "authentication.k8s.io/v1"})
    assert (status, body["apiVersion"]) == (201, "authentication.k8s.io/v1")


@pytest.mark.skipif(not have_kubectl("1.27"), reason="no kubectl.1.27")
def test_kubectl_127_whoami_needs_the_beta(chain: ChainHandle) -> None:
    out = chain.kubectl("auth", "whoami", version="1.27", check=False)
    assert out.returncode == 1
    assert "selfsubjectreviews" in out.stderr or "not enabled" in out.stderr or "not found" in out.stderr


@pytest.mark.parametrize("version", KUBECTLS)
def test_whoami_with_the_beta_enabled(configured: ChainHandle, version: str) -> None:
    out = configured.kubectl("auth", "whoami", "-o", "jsonpath={.apiVersion} {.status.userInfo.username}",
                             version=version)
    want = "authentication.k8s.io/v1beta1" if version == "1.27" else "authentication.k8s.io/v1"
    assert out.stdout == f"{want} kubernetes-admin"


def test_enabled_and_disabled_versions_in_discovery(configured: ChainHandle) -> None:
    assert group_versions(configured, "authentication.k8s.io") == ["v1", "v1beta1", "v1alpha1"]
    status, body = configured.json("POST", "/apis/authentication.k8s.io/v1alpha1/selfsubjectreviews",
                                   {**SSR, "apiVersion": "authentication.k8s.io/v1alpha1"})
    assert (status, body["apiVersion"], body["status"]["userInfo"]["username"]) == (
        201, "authentication.k8s.io/v1alpha1", "kubernetes-admin")
    _, v1beta1 = configured.json("GET", "/apis/authentication.k8s.io/v1beta1")
    assert v1beta1["resources"] == [{"name": "selfsubjectreviews", "singularName": "selfsubjectreview",
                                     "namespaced": False, "kind": "SelfSubjectReview", "verbs": ["create"]}]
    assert group_versions(configured, "batch") == []
    status, body = configured.json("GET", "/apis/batch/v1/jobs")
    assert (status, body["reason"]) == (404, "NotFound")
    _, apis = configured.json("GET", "/apis")
    assert "batch" not in {g["name"] for g in apis["groups"]}
    _, agg = configured.json("GET", "/apis", headers={"Accept": AGGREGATED})
    auth = next(g for g in agg["items"] if g["metadata"]["name"] == "authentication.k8s.io")
    assert [v["version"] for v in auth["versions"]] == ["v1", "v1beta1", "v1alpha1"]
    out = configured.kubectl("get", "jobs", check=False)
    assert out.returncode == 1 and 'the server doesn\'t have a resource type "jobs"' in out.stderr


@pytest.mark.parametrize(("value", "message"), [
    ("foo.io/v1=true", "Error: unknown api groups foo.io"),
    ("apps/v1beta1=true", "Error: group version apps/v1beta1 that has not been registered"),
    ("api/all=false", "Error: invalid key with only api/all=false"),
    ("authentication.k8s.io/v1beta1=on",
     'Error: invalid value of authentication.k8s.io/v1beta1: on, err: strconv.ParseBool: parsing "on": '
     "invalid syntax"),
])
def test_core_api_refuses_to_start(value: str, message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "coreapi", "--etcd-servers", "http://127.0.0.1:1",
                           "--runtime-config", value], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr.strip().splitlines()[-1]) == (1, message)
