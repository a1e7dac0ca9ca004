"""Kind strategies on the running chain: generated Job selectors, Secret stringData, as kube-apiserver writes them."""

from __future__ import annotations

import json

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration


def test_kubectl_create_job_gets_the_uid_selector(chain: ChainHandle) -> None:
    chain.kubectl("create", "job", "pi-gen", "--image=busybox", "--", "true")
    job = json.loads(chain.kubectl("get", "job", "pi-gen", "-o", "json").stdout)
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"] == {
        "batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "pi-gen",
        "controller-uid": uid, "job-name": "pi-gen"}
    # An update keeps the generated selector (nothing regenerates it with a new value).
    chain.kubectl("label", "job", "pi-gen", "extra=1")
    again = json.loads(chain.kubectl("get", "job", "pi-gen", "-o", "json").stdout)
    assert again["spec"]["selector"] == job["spec"]["selector"]
    chain.kubectl("delete", "job", "pi-gen")


def test_manual_selector_is_the_users(chain: ChainHandle) -> None:
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "manual-sel"},
            "spec": {"manualSelector": True, "selector": {"matchLabels": {"app": "m"}},
                     "template": {"metadata": {"labels": {"app": "m"}},
                                  "spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "busybox"}]}}}}
    status, out = chain.json("POST", "/apis/batch/v1/namespaces/default/jobs", body)
    assert status == 201, out
    assert out["spec"]["selector"] == {"matchLabels": {"app": "m"}}
    assert out["spec"]["template"]["metadata"]["labels"] == {"app": "m"}
    chain.json("DELETE", "/apis/batch/v1/namespaces/default/jobs/manual-sel")


def test_secret_string_data_is_stored_as_data(chain: ChainHandle) -> None:
    manifest = ("apiVersion: v1\nkind: Secret\nmetadata: {name: sd-secret}\n"
                "stringData: {password: s3cret}\ndata: {user: YWRtaW4=}\n")
    chain.kubectl("apply", "-f", "-", input=manifest)
    secret = json.loads(chain.kubectl("get", "secret", "sd-secret", "-o", "json").stdout)
    assert secret["data"] == {"password": "czNjcmV0", "user": "YWRtaW4="}
    assert "stringData" not in secret and secret["type"] == "Opaque"
    assert chain.kubectl("diff", "-f", "-", input=manifest, check=False).returncode == 0
    bad = chain.kubectl("apply", "-f", "-", check=False, input=(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: sd-bad}\ntype: kubernetes.io/tls\n"
        "stringData: {tls.crt: x}\n"))
    assert bad.returncode != 0 and 'data[tls.key]: Required value' in bad.stderr
    chain.kubectl("delete", "secret", "sd-secret")
