"""The pytest plugin (kubechain_testing) as an operator author uses it: small test suites run with
``pytester`` against the real chains they start. Each run costs a chain start, so there are three:
one in-process run covering the fixtures, the CRD marker and its bad input; one under pytest-xdist
(a chain per worker) with controllers off; one reusing a running chain through its kubeconfig."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration
pytest_plugins = ["pytester"]

DATA = Path(__file__).parent.parent / "data" / "crds"

INI = """
[pytest]
asyncio_default_fixture_loop_scope = function
"""

MAIN_SUITE = '''
import json
import time
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from kubechain_testing import KubectlError

RECORD = Path(__file__).parent / "record"
RECORD.mkdir(exist_ok=True)


def test_configmap(kubechain_client, kubechain_namespace):
    core = client.CoreV1Api(kubechain_client)
    core.create_namespaced_config_map(kubechain_namespace, {"metadata": {"name": "settings"}, "data": {"mode": "fast"}})
    assert core.read_namespaced_config_map("settings", kubechain_namespace).data == {"mode": "fast"}
    (RECORD / "first").write_text(kubechain_namespace)


def test_own_namespace_and_controllers(kubechain, kubechain_client, kubechain_namespace, kubechain_kubeconfig):
    assert kubechain_namespace != (RECORD / "first").read_text()
    assert kubechain_namespace.startswith("kc-test-own-namespace-and-controllers-")
    assert kubechain.controllers is True and kubechain_kubeconfig.is_file()
    core = client.CoreV1Api(kubechain_client)
    # nothing of the first test is here
    assert core.list_namespaced_config_map(kubechain_namespace, field_selector="metadata.name=settings").items == []
    # the serviceaccount controller runs: the namespace gets its default ServiceAccount
    deadline = time.monotonic() + 20
    while not core.list_namespaced_service_account(kubechain_namespace).items:
        assert time.monotonic() < deadline, "no default ServiceAccount"
        time.sleep(0.1)
    (RECORD / "startup").write_text(json.dumps({"seconds": kubechain.startup_seconds,
                                                "data_dir": str(kubechain.chain.data_dir)}))


def test_kubectl(kubechain_kubectl, kubechain_namespace):
    kubechain_kubectl("create", "configmap", "x", "--from-literal=a=b")
    assert kubechain_kubectl("get", "configmap", "x", "-o", "jsonpath={.data.a}") == "b"
    assert kubechain_kubectl("get", "configmap", "x", "-o", "jsonpath={.metadata.namespace}") == kubechain_namespace
    with pytest.raises(KubectlError) as failed:
        kubechain_kubectl("get", "configmap", "missing")
    assert failed.value.returncode == 1
    assert 'configmaps "missing" not found' in failed.value.stderr


def test_fails_on_purpose(kubechain_namespace):
    (RECORD / "failed").write_text(kubechain_namespace)
    assert False, "failing on purpose"


def test_failed_tests_namespace_was_deleted(kubechain_client):
    name = (RECORD / "failed").read_text()
    try:
        namespace = client.CoreV1Api(kubechain_client).read_namespace(name)
    except ApiException as err:
        assert err.status == 404  # already gone
    else:
        assert namespace.metadata.deletion_timestamp is not None
        assert namespace.status.phase == "Terminating"
    (RECORD / "failed-checked").write_text(name)


@pytest.mark.kubechain_crds("crds/certificates.cert-manager.io.yaml")
def test_crd_marker(kubechain_client, kubechain_namespace):
    objects = client.CustomObjectsApi(kubechain_client)
    created = objects.create_namespaced_custom_object("cert-manager.io", "v1", kubechain_namespace, "certificates", {
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": "web"},
        "spec": {"secretName": "web-tls", "issuerRef": {"name": "ca"}}})
    assert created["metadata"]["namespace"] == kubechain_namespace
    with pytest.raises(ApiException) as invalid:  # the CRD's schema is in force
        objects.create_namespaced_custom_object("cert-manager.io", "v1", kubechain_namespace, "certificates", {
            "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": "bad"}, "spec": {}})
    assert invalid.value.status == 422


@pytest.mark.kubechain_crds("crds")
class TestDirectory:
    def test_every_file_of_a_directory(self, kubechain_client):
        objects = client.CustomObjectsApi(kubechain_client)
        assert objects.list_cluster_custom_object("monitoring.coreos.com", "v1", "servicemonitors")["items"] == []
        assert objects.list_cluster_custom_object("cert-manager.io", "v1", "certificates")["kind"] == "CertificateList"


def test_faults_fixture(kubechain_faults, kubechain_client, kubechain_namespace):
    from kubechain_cli.faults import internal_error

    core = client.CoreV1Api(kubechain_client)
    kubechain_faults.add(internal_error(name="boom", verbs=["list"], resources=["configmaps"],
                                        namespaces=[kubechain_namespace], first_n=1))
    with pytest.raises(ApiException) as failed:
        core.list_namespaced_config_map(kubechain_namespace)
    assert failed.value.status == 500
    assert core.list_namespaced_config_map(kubechain_namespace).items is not None  # first_n=1: once only


@pytest.mark.kubechain_crds("crds/missing.yaml")
def test_missing_crd_file():
    pass


@pytest.mark.kubechain_crds("not-a-crd.yaml")
def test_not_a_crd():
    pass


@pytest.mark.kubechain_crds("bad-crd.yaml")
def test_crd_the_server_refuses():
    pass
'''

NOT_A_CRD = """
apiVersion: v1
kind: ConfigMap
metadata: {name: oops}
"""

BAD_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.wrong.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
"""


def _suite(pytester: pytest.Pytester, source: str) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_operator=source)


def test_fixtures_marker_and_bad_input(pytester: pytest.Pytester) -> None:
    _suite(pytester, MAIN_SUITE)
    crds = pytester.path / "crds"
    crds.mkdir()
    for name in ("certificates.cert-manager.io.yaml", "servicemonitors.monitoring.coreos.com.yaml"):
        shutil.copy(DATA / name, crds / name)
    (pytester.path / "not-a-crd.yaml").write_text(NOT_A_CRD)
    (pytester.path / "bad-crd.yaml").write_text(BAD_CRD)

    # Every inner run in a process of its own, as a user's suite runs: pytester's in-process runs drop
    # the modules the inner suite imported (kubernetes.client's lazily loaded models) from sys.modules
    # afterwards, and this process's later tests then met second copies of the model classes
    # (pydantic's "Input should be ... an instance of V1ConfigMap" in test_python_client.py after this file).
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", "--durations=6")
    result.assert_outcomes(passed=7, failed=1, errors=3)
    output = result.stdout.str()
    # the namespace of the failed test was deleted (checked from inside by the next test)
    record = pytester.path / "record"
    assert (record / "failed-checked").read_text() == (record / "failed").read_text()
    # bad input: clear errors naming the file, no traceback
    missing = pytester.path / "crds" / "missing.yaml"
    assert (f"@pytest.mark.kubechain_crds: 'crds/missing.yaml': no such file or directory ({missing}; "
            f"relative paths are taken from the rootdir {pytester.path})") in output
    assert (f"@pytest.mark.kubechain_crds: {pytester.path / 'not-a-crd.yaml'}, document 1 is apiVersion 'v1' "
            "kind 'ConfigMap', not an apiextensions.k8s.io/v1 CustomResourceDefinition") in output
    assert ("the server refused CustomResourceDefinition widgets.wrong.example.com: "
            'CustomResourceDefinition.apiextensions.k8s.io "widgets.wrong.example.com" is invalid: '
            "metadata.name: Invalid value: \"widgets.wrong.example.com\": "
            "must be spec.names.plural+\".\"+spec.group") in output
    startup = json.loads((record / "startup").read_text())
    print(f"chain ready in {startup['seconds']:.2f}s ({startup['data_dir']})")


XDIST_SUITE = '''
import json
import os
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client import ApiException

OUT = Path(__file__).parent / "out"
OUT.mkdir(exist_ok=True)


@pytest.mark.parametrize("n", range(4))
def test_worker(kubechain, kubechain_client, kubechain_namespace, n):
    assert kubechain.controllers is False
    core = client.CoreV1Api(kubechain_client)
    core.create_namespaced_config_map(kubechain_namespace, {"metadata": {"name": "c"}})
    # no controller manager: it never took its lease
    with pytest.raises(ApiException) as missing:
        client.CoordinationV1Api(kubechain_client).read_namespaced_lease("kube-controller-manager", "kube-system")
    assert missing.value.status == 404
    (OUT / f"{n}.json").write_text(json.dumps({
        "worker": os.environ["PYTEST_XDIST_WORKER"], "server": kubechain.server_url,
        "data_dir": str(kubechain.chain.data_dir)}))
'''


def test_one_chain_per_xdist_worker_controllers_off(pytester: pytest.Pytester) -> None:
    _suite(pytester, XDIST_SUITE)
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "--kubechain-controllers", "off",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    runs = [json.loads(p.read_text()) for p in sorted((pytester.path / "out").glob("*.json"))]
    by_worker: dict[str, set[tuple[str, str]]] = {}
    for run in runs:
        by_worker.setdefault(run["worker"], set()).add((run["server"], run["data_dir"]))
    assert sorted(by_worker) == ["gw0", "gw1"]
    assert all(len(chains) == 1 for chains in by_worker.values())  # one chain per worker, for all its tests
    (chain0,), (chain1,) = by_worker.values()
    assert chain0[0] != chain1[0] and chain0[1] != chain1[1]  # separate ports and data dirs


REUSE_SUITE = '''
from kubernetes import client


def test_reused(kubechain, kubechain_client, kubechain_namespace):
    assert kubechain.chain is None
    assert client.CoreV1Api(kubechain_client).read_namespace(kubechain_namespace).status.phase == "Active"
'''


def test_reuse_a_running_chain_and_bad_options(pytester: pytest.Pytester, chain: ChainHandle) -> None:
    _suite(pytester, REUSE_SUITE)
    result = pytester.runpytest_subprocess("--kubechain-kubeconfig", str(chain.chain.kubeconfig),
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)  # with kubechain.chain None: nothing was started

    missing = pytester.path / "nowhere" / "kubeconfig"
    result = pytester.runpytest_subprocess("--kubechain-kubeconfig", str(missing), "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*kubeconfig {missing} does not exist*"])

    result = pytester.runpytest_subprocess("--kubechain-controllers", "maybe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--kubechain-controllers / kubechain_controllers: 'maybe' is not on or off*"])
