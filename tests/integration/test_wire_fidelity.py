"""Small wire-level differences from kube-apiserver that broke whole client libraries.

Each test states what kube-apiserver 1.33 answers to the same request: ``/version/`` with a
slash (kr8s asks for it on every client it builds), base64 wrapped at 76 columns in a Secret
(Kubernetes' own TLS Secret example), a create carrying a non-numeric ``resourceVersion``
(kubernetes_asyncio's e2e test), headers repeated by the gateway, an empty struct left out,
timestamps stored as sent, and ``annotations: {}`` surviving a patch (``kubectl diff`` noise).
"""

from __future__ import annotations

import base64
import http.client
import json
from typing import Any

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

NS = "default"


def raw_headers(chain: ChainHandle, path: str) -> tuple[int, list[tuple[str, str]]]:
    """Every response header as sent (urllib folds repeated ones)."""
    host, port = chain.url.removeprefix("https://").rsplit(":", 1)
    conn = http.client.HTTPSConnection(host, int(port), context=chain.ssl_context(), timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.status, [(k.lower(), v) for k, v in resp.getheaders()]
    finally:
        conn.close()


def test_version_with_trailing_slash(chain: ChainHandle) -> None:
    status, plain = chain.json("GET", "/version")
    assert status == 200
    status, slashed = chain.json("GET", "/version/")
    assert status == 200 and slashed == plain
    assert chain.request("GET", "/version/", auth=False)[0] == 200  # public, as /version
    assert chain.request("GET", "/version/extra")[0] == 404


@pytest.mark.parametrize("path", ["/version", "/api/v1/namespaces/default/configmaps/no-such-one",
                                  "/api/v1/namespaces/default/configmaps", "/apis"])
def test_one_date_header_and_no_server_header(chain: ChainHandle, path: str) -> None:
    status, headers = raw_headers(chain, path)
    assert status in (200, 404)
    names = [k for k, _ in headers]
    assert names.count("date") == 1, headers
    assert "server" not in names, headers
    assert all(", " not in v for k, v in headers if k == "date" and v.count("GMT") > 1)


def test_secret_data_wrapped_at_76_columns_is_accepted_and_stored_unwrapped(chain: ChainHandle) -> None:
    payload = bytes(range(256)) * 2
    flat = base64.b64encode(payload).decode()
    wrapped = "\n".join(flat[i:i + 76] for i in range(0, len(flat), 76)) + "\n"
    crlf = "\r\n".join(flat[i:i + 64] for i in range(0, len(flat), 64))
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "wrapped-tls"}, "type": "Opaque",
            "data": {"lf": wrapped, "crlf": crlf, "flat": flat}}
    status, created = chain.json("POST", f"/api/v1/namespaces/{NS}/secrets", body)
    assert status == 201, created
    assert created["data"] == {"lf": flat, "crlf": flat, "flat": flat}
    status, got = chain.json("GET", f"/api/v1/namespaces/{NS}/secrets/wrapped-tls")
    assert status == 200 and got["data"]["lf"] == flat


@pytest.mark.parametrize(("value", "position"), [("QUFB!UFB", 4), ("QUFB\nQU#B", 7), ("QUF", 0), ("QUFBQQ=", 7)])
def test_secret_data_that_is_not_base64_names_the_byte(chain: ChainHandle, value: str, position: int) -> None:
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad-b64"}, "data": {"x": value}}
    status, resp = chain.json("POST", f"/api/v1/namespaces/{NS}/secrets", body)
    assert status == 400, resp
    assert resp["reason"] == "BadRequest"
    assert resp["message"] == ('Secret in version "v1" cannot be handled as a Secret: '
                               f"illegal base64 data at input byte {position}")
    assert chain.json("GET", f"/api/v1/namespaces/{NS}/secrets/bad-b64")[0] == 404


@pytest.mark.parametrize("rv", ["v1", "0", "-1", "abc123", "99999999999999999999999"])
def test_create_ignores_a_resource_version_that_is_not_a_number(chain: ChainHandle, rv: str) -> None:
    name = f"rv-ignored-{abs(hash(rv)) % 10**8}"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "resourceVersion": rv}}
    status, created = chain.json("POST", f"/api/v1/namespaces/{NS}/configmaps", body)
    assert status == 201, created
    assert created["metadata"]["resourceVersion"].isdigit()
    assert created["metadata"]["resourceVersion"] != rv
    assert chain.json("DELETE", f"/api/v1/namespaces/{NS}/configmaps/{name}")[0] == 200


def test_create_with_a_numeric_resource_version_is_refused_as_kube_does(chain: ChainHandle) -> None:
    # etcd3 store.Create: ErrResourceVersionSetOnCreate, which kube answers as an InternalError.
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rv-numeric", "resourceVersion": "12"}}
    status, resp = chain.json("POST", f"/api/v1/namespaces/{NS}/configmaps", body)
    assert status == 500 and resp["reason"] == "InternalError"
    assert resp["message"] == "Internal error occurred: resourceVersion should not be set on objects to be created"
    assert chain.json("GET", f"/api/v1/namespaces/{NS}/configmaps/rv-numeric")[0] == 404


def test_node_without_spec_comes_back_with_empty_spec(chain: ChainHandle) -> None:
    status, node = chain.json("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                          "metadata": {"name": "specless"}})
    assert status == 201, node
    assert node["spec"] == {}
    assert list(node).index("spec") < list(node).index("status")  # Go's field order
    status, node = chain.json("GET", "/api/v1/nodes/specless")
    assert node["spec"] == {}
    status, lease = chain.json("POST", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
                               {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                "metadata": {"name": "specless"}})
    assert status == 201 and lease["spec"] == {}
    chain.json("DELETE", "/api/v1/nodes/specless")


def lease(name: str, renew: Any) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"renewTime": renew, "holderIdentity": "x"}}


def test_times_are_stored_in_utc_z_form(chain: ChainHandle) -> None:
    status, job = chain.json("POST", f"/apis/batch/v1/namespaces/{NS}/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "times"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "a", "image": "b"}]}},
                 "activeDeadlineSeconds": 5}})
    assert status == 201, job
    path = f"/apis/batch/v1/namespaces/{NS}/jobs/times/status"
    patch = {"status": {"startTime": "2024-01-01T10:00:00.75+02:00"}}
    status, job = chain.json("PATCH", path, patch, headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200, job
    assert job["status"]["startTime"] == "2024-01-01T08:00:00Z"  # metav1.Time: UTC, whole seconds
    status, got = chain.json("GET", f"/apis/batch/v1/namespaces/{NS}/jobs/times")
    assert got["status"]["startTime"] == "2024-01-01T08:00:00Z"

    base = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
    status, created = chain.json("POST", base, lease("micro", "2024-01-01T00:30:00.123456-01:30"))
    assert status == 201, created
    assert created["spec"]["renewTime"] == "2024-01-01T02:00:00.123456Z"  # MicroTime: six digits, UTC


@pytest.mark.parametrize(("renew", "detail"), [
    ("2024-01-01T10:00:00Z", 'cannot parse "Z" as ".000000"'),
    ("2024-01-01T10:00:00.123Z", 'cannot parse ".123Z" as ".000000"'),
    ("2024-13-01T10:00:00.000000Z", "month out of range"),
    ("2024-02-30T10:00:00.000000Z", "day out of range"),
    ("yesterday", 'cannot parse "yesterday" as "2006"'),
])
def test_bad_times_are_refused_with_go_wording(chain: ChainHandle, renew: str, detail: str) -> None:
    status, resp = chain.json("POST", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
                              lease("bad-time", renew))
    assert status == 400, resp
    assert resp["message"].startswith(f'Lease in version "v1" cannot be handled as a Lease: parsing time "{renew}"')
    assert resp["message"].endswith(detail)


def test_empty_annotations_from_a_patch_are_not_kept(chain: ChainHandle) -> None:
    chain.kubectl("create", "configmap", "diff-quiet", "--from-literal=x=1")
    path = f"/api/v1/namespaces/{NS}/configmaps/diff-quiet"
    status, patched = chain.json("PATCH", path, {"metadata": {"annotations": {}, "labels": {}, "finalizers": []}},
                                 headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert status == 200, patched
    assert not {"annotations", "labels", "finalizers"} & set(patched["metadata"])
    manifest = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "diff-quiet", "namespace": NS}, "data": {"x": "1"}})
    for version in ("1.27", "1.33"):
        proc = chain.kubectl("diff", "-f", "-", input=manifest, check=False, version=version)
        assert proc.returncode == 0, (version, proc.stdout, proc.stderr)
        assert proc.stdout == ""


def test_expect_100_continue_is_answered_once_by_the_gateway(chain: ChainHandle) -> None:
    """curl sends ``Expect: 100-continue`` for bodies over 1 MiB; the backend's interim answer
    must not reach the client as if it were the response."""
    import subprocess

    pki = chain.chain.pki
    crt, key = pki.pair("admin")
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "expects"},
                       "data": {"a": "x" * 1000}})
    proc = subprocess.run(["curl", "-sS", "-i", "--cacert", pki.ca, "--cert", crt, "--key", key, "-X", "POST",
                           "-H", "Content-Type: application/json", "-H", "Expect: 100-continue",
                           "--data-binary", body, f"{chain.url}/api/v1/namespaces/{NS}/configmaps"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    statuses = [line for line in proc.stdout.splitlines() if line.startswith("HTTP/")]
    assert statuses[-1].startswith("HTTP/1.1 201"), proc.stdout[:500]
    assert sum(s.startswith("HTTP/1.1 100") for s in statuses) <= 1
    assert '"name":"expects"' in proc.stdout
