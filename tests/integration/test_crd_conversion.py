"""Several served versions of one CRD through the gateway: conversion None and a test webhook."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.conversion_webhook import Pki, WebhookProcess, make_pki
from support.procs import ChainHandle
from test_crds import establish, etcd_keys, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    pki: Pki = make_pki(tmp_path_factory.mktemp("hook-pki"), ["localhost", "conv-hook.default.svc"])
    proc = WebhookProcess.start(pki)
    yield proc
    proc.stop()


def backends_crd(group: str, conversion: dict[str, Any]) -> str:
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}
    return json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"backends.{group}"},
        "spec": {"group": group, "scope": "Namespaced", "names": {"kind": "Backend", "plural": "backends"},
                 "conversion": conversion,
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema},
                              {"name": "v2", "served": True, "storage": False, "schema": schema}]}})


def test_conversion_none_rewrites_api_version(chain: ChainHandle) -> None:
    group, ns = "it-conv-none.example.com", "default"
    establish(chain, backends_crd(group, {"strategy": "None"}), f"backends.{group}")
    chain.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": f"{group}/v2", "kind": "Backend", "metadata": {"name": "b", "namespace": ns},
        "spec": {"address": "db:5432"}}))
    status, v1 = chain.json("GET", f"/apis/{group}/v1/namespaces/{ns}/backends/b")
    assert status == 200 and v1["apiVersion"] == f"{group}/v1" and v1["spec"] == {"address": "db:5432"}
    status, listed = chain.json("GET", f"/apis/{group}/v2/namespaces/{ns}/backends")
    assert [i["apiVersion"] for i in listed["items"]] == [f"{group}/v2"]
    # A default added to the storage version's schema later shows on reads (not written back).
    crd = json.loads(chain.kubectl("get", "crd", f"backends.{group}", "-o", "json").stdout)
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] = {
        "tier": {"type": "string", "default": "gold"}}
    chain.kubectl("replace", "-f", "-", input=json.dumps(crd))

    def defaulted() -> bool:
        s2, obj = chain.json("GET", f"/apis/{group}/v2/namespaces/{ns}/backends/b")
        return s2 == 200 and obj["spec"] == {"address": "db:5432", "tier": "gold"}

    assert wait_for(defaulted)
    chain.kubectl("delete", "crd", f"backends.{group}")


def test_conversion_webhook_by_url_and_by_service(chain: ChainHandle, webhook: WebhookProcess) -> None:
    group, ns = "it-conv-hook.example.com", "conv-hook"
    chain.kubectl("create", "namespace", ns)
    hook = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
        "url": f"{webhook.url}/convert", "caBundle": webhook.pki.ca_bundle}}}
    establish(chain, backends_crd(group, hook), f"backends.{group}")
    base = f"/apis/{group}"
    status, created = chain.json("POST", f"{base}/v2/namespaces/{ns}/backends", {
        "apiVersion": f"{group}/v2", "kind": "Backend", "metadata": {"name": "db", "labels": {"app": "db"}},
        "spec": {"address": "db.local:5432"}})
    assert status == 201, created
    assert created["apiVersion"] == f"{group}/v2" and created["spec"] == {"address": "db.local:5432"}
    status, v1 = chain.json("GET", f"{base}/v1/namespaces/{ns}/backends/db")
    assert status == 200 and v1["spec"] == {"host": "db.local", "port": 5432}
    assert v1["metadata"]["uid"] == created["metadata"]["uid"]
    assert etcd_keys(chain, f"/registry/{group}/backends/{ns}/db")
    # A patch at v2 is stored at v1 and read back at both versions.
    chain.kubectl("patch", f"backends.v2.{group}", "db", "-n", ns, "--type=merge",
                  "-p", '{"spec":{"address":"db2.local:6000"}}')
    status, v1 = chain.json("GET", f"{base}/v1/namespaces/{ns}/backends/db")
    assert v1["spec"] == {"host": "db2.local", "port": 6000}
    listed = json.loads(chain.kubectl("get", f"backends.v2.{group}", "-n", ns, "-o", "json").stdout)
    assert [i["spec"] for i in listed["items"]] == [{"address": "db2.local:6000"}]
    # The webhook named by a Service (ExternalName to localhost) works the same.
    chain.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "conv-hook", "namespace": "default"},
        "spec": {"type": "ExternalName", "externalName": "localhost",
                 "ports": [{"port": webhook.port, "protocol": "TCP"}]}}))
    crd = json.loads(chain.kubectl("get", "crd", f"backends.{group}", "-o", "json").stdout)
    crd["spec"]["conversion"]["webhook"]["clientConfig"] = {
        "service": {"namespace": "default", "name": "conv-hook", "path": "/convert", "port": webhook.port},
        "caBundle": webhook.pki.ca_bundle}
    chain.kubectl("replace", "-f", "-", input=json.dumps(crd))

    last: list[Any] = []

    def converted_by_service() -> bool:
        s, obj = chain.json("GET", f"{base}/v2/namespaces/{ns}/backends/db")
        last[:] = [s, obj]
        return s == 200 and obj["spec"] == {"address": "db2.local:6000"}

    assert wait_for(converted_by_service), json.dumps(last)
    # A failing webhook fails the request as kube does (500, the Go error text).
    crd = json.loads(chain.kubectl("get", "crd", f"backends.{group}", "-o", "json").stdout)
    crd["spec"]["conversion"]["webhook"]["clientConfig"] = {"url": f"{webhook.url}/failure",
                                                           "caBundle": webhook.pki.ca_bundle}
    chain.kubectl("replace", "-f", "-", input=json.dumps(crd))

    def failing() -> dict[str, Any] | None:
        s, body = chain.json("GET", f"{base}/v2/namespaces/{ns}/backends/db")
        return body if s == 500 else None

    body = wait_for(failing)
    assert body and body["message"].startswith(f"conversion for {group}/v1, Kind=Backend failed:")
    chain.kubectl("delete", "crd", f"backends.{group}")
    assert etcd_keys(chain, f"/registry/{group}/backends/") == []


def _watch_lines(chain: ChainHandle, path: str) -> list[dict[str, Any]]:
    status, _h, data = chain.request("GET", path)
    assert status == 200, data
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def test_webhook_reads_select_default_and_fail_as_kube(chain: ChainHandle, webhook: WebhookProcess) -> None:
    """Selectors see the converted object, the served version's defaults apply on read, a watch
    event that cannot be converted is an ERROR event."""
    group, ns = "it-conv-sel.example.com", "conv-sel"
    chain.kubectl("create", "namespace", ns)
    manifest = json.loads(backends_crd(group, {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"url": f"{webhook.url}/convert", "caBundle": webhook.pki.ca_bundle}}}))
    manifest["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] = {
        "tier": {"type": "string", "default": "gold"}}
    establish(chain, json.dumps(manifest), f"backends.{group}")
    base = f"/apis/{group}"
    for name in ("a", "b"):  # written at the storage version: no conversion, no v2 default
        status, body = chain.json("POST", f"{base}/v1/namespaces/{ns}/backends", {
            "apiVersion": f"{group}/v1", "kind": "Backend", "metadata": {"name": name},
            "spec": {"host": f"{name}.local", "port": 1}})
        assert status == 201, body
    status, v2 = chain.json("GET", f"{base}/v2/namespaces/{ns}/backends/a")
    assert status == 200 and v2["spec"] == {"address": "a.local:1", "tier": "gold"}, v2
    status, v1 = chain.json("GET", f"{base}/v1/namespaces/{ns}/backends/a")
    assert v1["spec"] == {"host": "a.local", "port": 1}
    # A webhook that labels what it converts: the label selector sees the served object.
    crd = json.loads(chain.kubectl("get", "crd", f"backends.{group}", "-o", "json").stdout)
    crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"] = f"{webhook.url}/meta"
    chain.kubectl("replace", "-f", "-", input=json.dumps(crd))
    sel = "labelSelector=converted-by%3Dwebhook"

    def labelled() -> list[str]:
        s, listed = chain.json("GET", f"{base}/v2/namespaces/{ns}/backends?{sel}")
        return [i["metadata"]["name"] for i in listed["items"]] if s == 200 else []

    assert wait_for(labelled) == ["a", "b"]
    status, listed = chain.json("GET", f"{base}/v1/namespaces/{ns}/backends?{sel}")
    assert status == 200 and listed["items"] == []  # stored objects carry no such label
    status, page = chain.json("GET", f"{base}/v2/namespaces/{ns}/backends?{sel}&limit=1")
    assert [i["metadata"]["name"] for i in page["items"]] == ["a"] and page["metadata"]["continue"]
    status, rest = chain.json("GET", f"{base}/v2/namespaces/{ns}/backends?{sel}&limit=1"
                                     f"&continue={page['metadata']['continue']}")
    assert status == 200 and [i["metadata"]["name"] for i in rest["items"]] == ["b"], rest
    events = _watch_lines(chain, f"{base}/v2/namespaces/{ns}/backends?watch=1&{sel}&resourceVersion=0"
                                 "&timeoutSeconds=2")
    assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in events) == [("ADDED", "a"), ("ADDED", "b")]
    assert all(e["object"]["spec"]["tier"] == "gold" for e in events)
    events = _watch_lines(chain, f"{base}/v1/namespaces/{ns}/backends?watch=1&{sel}&resourceVersion=0"
                                 "&timeoutSeconds=1")
    assert events == []
    # A webhook that fails: the watch sends kube's ERROR event and ends.
    crd = json.loads(chain.kubectl("get", "crd", f"backends.{group}", "-o", "json").stdout)
    crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"] = f"{webhook.url}/failure"
    chain.kubectl("replace", "-f", "-", input=json.dumps(crd))
    assert wait_for(lambda: chain.json("GET", f"{base}/v2/namespaces/{ns}/backends/a")[0] == 500)
    events = _watch_lines(chain, f"{base}/v2/namespaces/{ns}/backends?watch=1&resourceVersion=0&timeoutSeconds=5")
    assert [e["type"] for e in events] == ["ERROR"], events
    status_obj = events[0]["object"]
    assert status_obj["kind"] == "Status" and status_obj["code"] == 500 and status_obj["reason"] == "InternalError"
    assert status_obj["message"].startswith(f"Internal error occurred: conversion for {group}/v1, Kind=Backend failed:")
    chain.kubectl("delete", "crd", f"backends.{group}")
