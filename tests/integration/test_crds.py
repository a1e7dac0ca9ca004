"""CustomResourceDefinitions through the gateway with real kubectl: establish, serve, scale, delete."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import yaml
from genericapi.storage.etcd import EtcdClient, prefix_end
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

CRONTAB_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.{group}
spec:
  group: {group}
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct{suffix}]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {{}}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.labelSelector
    selectableFields:
    - jsonPath: .spec.color
    additionalPrinterColumns:
    - {{name: Spec, type: string, jsonPath: .spec.cronSpec}}
    - {{name: Replicas, type: integer, jsonPath: .spec.replicas}}
    - {{name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}}
    - {{name: Image, type: string, priority: 1, jsonPath: .spec.image}}
    - {{name: Age, type: date, jsonPath: .metadata.creationTimestamp}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: Desired state of the cron tab.
            properties:
              cronSpec: {{type: string, description: When to run.}}
              image: {{type: string}}
              color: {{type: string, default: blue}}
              replicas: {{type: integer, minimum: 0}}
          status:
            type: object
            properties:
              replicas: {{type: integer}}
              labelSelector: {{type: string}}
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {{type: string}}
                    status: {{type: string}}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"""


def crontab_crd(group: str, suffix: str) -> str:
    return CRONTAB_CRD.format(group=group, suffix=suffix)


def crontab(group: str, name: str, ns: str, **spec: Any) -> str:
    return json.dumps({"apiVersion": f"{group}/v1", "kind": "CronTab",
                       "metadata": {"name": name, "namespace": ns}, "spec": spec})


def establish(chain: ChainHandle, manifest: str, name: str) -> None:
    chain.kubectl("apply", "-f", "-", input=manifest)
    chain.kubectl("wait", "--for", "condition=Established", f"crd/{name}", "--timeout=10s")


def etcd_keys(chain: ChainHandle, prefix: str) -> list[str]:
    async def read() -> list[str]:
        client = EtcdClient(chain.chain.etcd_endpoints.split(","), tls=chain.chain.etcd_tls)
        try:
            kvs, _rev, _more = await client.range(prefix.encode(), prefix_end(prefix.encode()))
            return [kv.key.decode() for kv in kvs]
        finally:
            await client.close()
    # A private loop: asyncio.run would leave the thread without a current loop for later tests.
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(read())
    finally:
        loop.close()


def wait_for(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def test_crd_lifecycle_with_kubectl(chain: ChainHandle) -> None:
    group, ns = "it-life.example.com", "crd-life"
    chain.kubectl("create", "namespace", ns)
    started = time.monotonic()
    establish(chain, crontab_crd(group, "l"), f"crontabs.{group}")
    assert time.monotonic() - started < 5
    crd = json.loads(chain.kubectl("get", "crd", f"crontabs.{group}", "-o", "json").stdout)
    conds = {c["type"]: c for c in crd["status"]["conditions"]}
    assert conds["NamesAccepted"]["reason"] == "NoConflicts"
    assert conds["Established"]["reason"] == "InitialNamesAccepted"
    assert crd["status"]["storedVersions"] == ["v1"]
    assert crd["status"]["acceptedNames"]["shortNames"] == ["ctl"]
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    # The CRD table is kube's default one.
    assert chain.kubectl("get", "crd", f"crontabs.{group}").stdout.split()[:3] == ["NAME", "CREATED", "AT"]

    chain.kubectl("apply", "-f", "-", input=crontab(group, "tab1", ns, cronSpec="@every5m", image="img:1",
                                                   replicas=2))
    chain.kubectl("create", "-f", "-", input=crontab(group, "tab2", ns, cronSpec="@daily", image="img:2",
                                                    color="red"))
    # Printer columns and short names; priority-1 columns only with -o wide.
    out = chain.kubectl("get", "ctl", "-n", ns).stdout.splitlines()
    assert out[0].split() == ["NAME", "SPEC", "REPLICAS", "READY", "AGE"]
    row1, row2 = out[1].split(), out[2].split()  # a missing cell prints as nothing
    assert row1[:3] == ["tab1", "@every5m", "2"] and len(row1) == 4
    assert row2[:2] == ["tab2", "@daily"] and len(row2) == 3
    wide = chain.kubectl("get", f"crontabs.{group}", "-n", ns, "-o", "wide").stdout.splitlines()
    assert "IMAGE" in wide[0].split() and "img:1" in wide[1]
    # Defaulting, generation and the status subresource.
    tab = json.loads(chain.kubectl("get", "ctl", "tab1", "-n", ns, "-o", "json").stdout)
    assert tab["spec"]["color"] == "blue" and tab["metadata"]["generation"] == 1
    chain.kubectl("patch", "ctl", "tab1", "-n", ns, "--subresource=status", "--type=merge", "-p",
                  json.dumps({"status": {"replicas": 2, "labelSelector": "app=tab",
                                         "conditions": [{"type": "Ready", "status": "True"}]}}))
    tab = json.loads(chain.kubectl("get", "ctl", "tab1", "-n", ns, "-o", "json").stdout)
    assert tab["status"]["replicas"] == 2 and tab["metadata"]["generation"] == 1
    assert chain.kubectl("get", "ctl", "tab1", "-n", ns, "--no-headers").stdout.split()[3] == "True"
    # status on the main resource is ignored; spec changes bump generation.
    chain.kubectl("patch", "ctl", "tab1", "-n", ns, "--type=merge", "-p",
                  json.dumps({"spec": {"image": "img:3"}, "status": {"replicas": 9}}))
    tab = json.loads(chain.kubectl("get", "ctl", "tab1", "-n", ns, "-o", "json").stdout)
    assert tab["status"]["replicas"] == 2 and tab["metadata"]["generation"] == 2
    # scale
    chain.kubectl("scale", "ctl", "tab1", "-n", ns, "--replicas=5")
    status, scale = chain.json("GET", f"/apis/{group}/v1/namespaces/{ns}/crontabs/tab1/scale")
    assert status == 200
    assert scale["spec"] == {"replicas": 5} and scale["status"] == {"replicas": 2, "selector": "app=tab"}
    # selectableFields as field selectors; undeclared fields rejected as kube does.
    names = chain.kubectl("get", "ctl", "-n", ns, "--field-selector", "spec.color=red", "-o", "name").stdout
    assert names.split() == [f"crontab.{group}/tab2"]
    bad = chain.kubectl("get", "ctl", "-n", ns, "--field-selector", "spec.image=x", check=False)
    assert bad.returncode != 0 and 'field label not supported: spec.image' in bad.stderr
    # Another served version reads the same objects with its own apiVersion; storage stays v1.
    beta = json.loads(chain.kubectl("get", f"crontabs.v1beta1.{group}", "tab1", "-n", ns, "-o", "json").stdout)
    assert beta["apiVersion"] == f"{group}/v1beta1" and beta["spec"]["image"] == "img:3"
    chain.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": f"{group}/v1beta1", "kind": "CronTab", "metadata": {"name": "tab3", "namespace": ns},
        "spec": {"cronSpec": "@hourly"}}))
    status, raw = chain.json("GET", f"/apis/{group}/v1/namespaces/{ns}/crontabs/tab3")
    assert status == 200 and raw["apiVersion"] == f"{group}/v1"
    # Discovery, api-resources, explain
    resources = chain.kubectl("api-resources", "--api-group", group).stdout
    assert "crontabs" in resources and "ctl" in resources and "CronTab" in resources
    explain = chain.kubectl("explain", f"crontabs.{group}.spec").stdout
    assert "cronSpec" in explain and "When to run." in explain
    keys = etcd_keys(chain, f"/registry/{group}/crontabs/")
    assert f"/registry/{group}/crontabs/{ns}/tab1" in keys and len(keys) == 3
    assert etcd_keys(chain, f"/registry/apiextensions.k8s.io/customresourcedefinitions/crontabs.{group}")

    # A finalizer holds one CR: the CRD stays Terminating, creates are refused.
    chain.kubectl("patch", "ctl", "tab2", "-n", ns, "--type=merge", "-p",
                  '{"metadata":{"finalizers":["example.com/hold"]}}')
    chain.kubectl("delete", "crd", f"crontabs.{group}", "--wait=false")

    def terminating() -> dict[str, Any] | None:
        got = json.loads(chain.kubectl("get", "crd", f"crontabs.{group}", "-o", "json").stdout)
        cond = {c["type"]: c for c in got["status"]["conditions"]}.get("Terminating")
        return cond if cond and cond["reason"] in ("InstanceDeletionCheck", "InstanceDeletionInProgress") \
            and etcd_keys(chain, f"/registry/{group}/crontabs/") == [f"/registry/{group}/crontabs/{ns}/tab2"] \
            else None

    assert wait_for(terminating)
    refused = chain.kubectl("create", "-f", "-", input=crontab(group, "late", ns), check=False)
    assert refused.returncode != 0 and "MethodNotAllowed" in refused.stderr
    assert f'create is not supported on resources of kind "crontabs.{group}"' in refused.stderr
    chain.kubectl("patch", "ctl", "tab2", "-n", ns, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    assert wait_for(lambda: chain.kubectl("get", "crd", f"crontabs.{group}", check=False).returncode != 0)
    assert etcd_keys(chain, f"/registry/{group}/crontabs/") == []
    assert wait_for(lambda: group not in chain.kubectl("get", "--raw", "/apis").stdout)
    status, _ = chain.json("GET", f"/apis/{group}/v1/namespaces/{ns}/crontabs")
    assert status == 404


def test_duplicate_names_are_not_accepted(chain: ChainHandle) -> None:
    group = "it-dup.example.com"
    establish(chain, crontab_crd(group, "d"), f"crontabs.{group}")
    clash = yaml.safe_load(crontab_crd(group, "d2"))
    clash["metadata"]["name"] = f"othertabs.{group}"
    clash["spec"]["names"] = {"plural": "othertabs", "singular": "othertab", "kind": "CronTab",
                              "listKind": "OtherTabList"}
    chain.kubectl("apply", "-f", "-", input=json.dumps(clash))

    def names_condition() -> dict[str, Any] | None:
        got = json.loads(chain.kubectl("get", "crd", f"othertabs.{group}", "-o", "json").stdout)
        return {c["type"]: c for c in got["status"].get("conditions") or []}.get("NamesAccepted")

    cond = wait_for(names_condition)
    assert cond["status"] == "False" and cond["reason"] == "KindConflict"
    assert cond["message"] == '"CronTab" is already in use'
    got = json.loads(chain.kubectl("get", "crd", f"othertabs.{group}", "-o", "json").stdout)
    est = {c["type"]: c for c in got["status"]["conditions"]}["Established"]
    assert (est["status"], est["reason"]) == ("False", "NotAccepted")
    assert got["status"]["acceptedNames"]["plural"] == "othertabs"
    # A short name taken by another CRD of the group.
    clash2 = yaml.safe_load(crontab_crd(group, "d"))
    clash2["metadata"]["name"] = f"thirdtabs.{group}"
    clash2["spec"]["names"] = {"plural": "thirdtabs", "kind": "ThirdTab", "shortNames": ["ctd"]}
    chain.kubectl("apply", "-f", "-", input=json.dumps(clash2))

    def third() -> dict[str, Any] | None:
        got = json.loads(chain.kubectl("get", "crd", f"thirdtabs.{group}", "-o", "json").stdout)
        return {c["type"]: c for c in got["status"].get("conditions") or []}.get("NamesAccepted")

    cond = wait_for(third)
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "ShortNamesConflict",
                                                                 '"ctd" is already in use')
    # Deleting the first CRD frees the kind: the clashing one becomes established.
    chain.kubectl("delete", "crd", f"crontabs.{group}")
    chain.kubectl("wait", "--for", "condition=Established", f"crd/othertabs.{group}", "--timeout=10s")
    chain.kubectl("wait", "--for", "condition=Established", f"crd/thirdtabs.{group}", "--timeout=10s")
    chain.kubectl("delete", "crd", f"othertabs.{group}", f"thirdtabs.{group}")


def test_bad_custom_resources_are_rejected(chain: ChainHandle) -> None:
    group, ns = "it-bad.example.com", "crd-bad"
    chain.kubectl("create", "namespace", ns)
    establish(chain, crontab_crd(group, "b"), f"crontabs.{group}")
    base = f"/apis/{group}/v1/namespaces/{ns}/crontabs"
    status, body = chain.json("POST", base, {"apiVersion": f"{group}/v1", "kind": "CronTab",
                                             "metadata": {"name": "bad"}, "spec": {"replicas": -1}})
    assert status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "spec.replicas"
    assert "should be greater than or equal to 0" in body["details"]["causes"][0]["message"]
    status, body = chain.json("POST", base + "?fieldValidation=Strict", {
        "apiVersion": f"{group}/v1", "kind": "CronTab", "metadata": {"name": "bad"}, "spec": {"nope": 1}})
    assert status == 400
    assert body["message"] == ('CronTab in version "v1" cannot be handled as a CronTab: '
                               'strict decoding error: unknown field "spec.nope"')
    status, headers, raw = chain.request("POST", base, {
        "apiVersion": f"{group}/v1", "kind": "CronTab", "metadata": {"name": "warned"}, "spec": {"nope": 1}})
    assert status == 201 and "unknown field" in headers.get("warning", "")
    assert "nope" not in json.loads(raw)["spec"]
    status, body = chain.json("POST", base, {"apiVersion": f"{group}/v1", "kind": "CronTab",
                                             "metadata": {"name": "Bad_Name"}, "spec": {}})
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.name"
    status, body = chain.json("PATCH", base + "/warned", {"spec": {"replicas": "x"}},
                              headers={"Content-Type": "application/merge-patch+json"})
    assert status == 422
    fields = [c["field"] for c in body["details"]["causes"]]
    assert "spec.replicas" in fields and ".spec.replicas" in fields
    # NamespaceLifecycle: no custom resources in a namespace that does not exist.
    status, body = chain.json("POST", f"/apis/{group}/v1/namespaces/no-such-ns/crontabs", {
        "apiVersion": f"{group}/v1", "kind": "CronTab", "metadata": {"name": "x"}, "spec": {}})
    assert status == 404 and body["message"] == 'namespaces "no-such-ns" not found'
    chain.kubectl("delete", "crd", f"crontabs.{group}")


def test_cluster_scoped_with_python_client(chain: ChainHandle) -> None:
    from kubernetes import client, config, watch

    group = "it-cluster.example.com"
    manifest = yaml.safe_load(crontab_crd(group, "c"))
    manifest["metadata"]["name"] = f"widgets.{group}"
    manifest["spec"]["scope"] = "Cluster"
    manifest["spec"]["names"] = {"plural": "widgets", "kind": "Widget"}
    for v in manifest["spec"]["versions"]:
        v.pop("selectableFields", None)
        v.pop("additionalPrinterColumns", None)
    establish(chain, json.dumps(manifest), f"widgets.{group}")
    api = client.CustomObjectsApi(config.new_client_from_config(config_file=chain.kubeconfig))
    created: dict[str, Any] = api.create_cluster_custom_object(group, "v1", "widgets", {  # type: ignore[assignment]
        "apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"replicas": 1}})
    assert created["metadata"]["uid"] and "namespace" not in created["metadata"]
    stream = watch.Watch().stream(api.list_cluster_custom_object, group, "v1", "widgets",
                                  resource_version=created["metadata"]["resourceVersion"], timeout_seconds=5)
    api.patch_cluster_custom_object(group, "v1", "widgets", "w1", {"spec": {"replicas": 4}})
    event: dict[str, Any] = next(stream)
    assert event["type"] == "MODIFIED" and event["object"]["spec"]["replicas"] == 4
    listed: dict[str, Any] = api.list_cluster_custom_object(group, "v1", "widgets")  # type: ignore[assignment]
    assert [i["metadata"]["name"] for i in listed["items"]] == ["w1"]
    # Default table: Name + Age.
    assert chain.kubectl("get", f"widgets.{group}").stdout.split()[:2] == ["NAME", "AGE"]
    assert etcd_keys(chain, f"/registry/{group}/widgets/") == [f"/registry/{group}/widgets/w1"]
    chain.kubectl("delete", "crd", f"widgets.{group}")
    assert etcd_keys(chain, f"/registry/{group}/widgets/") == []
