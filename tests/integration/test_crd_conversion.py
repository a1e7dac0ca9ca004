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
