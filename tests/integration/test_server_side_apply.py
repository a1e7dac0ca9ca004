"""Server-side apply and managedFields against the real chain: raw HTTP, kubectl 1.27/1.30/1.33,
the official Python client, built-ins and a CRD with list-map-keys."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from support.procs import ChainHandle, kubectl_params

pytestmark = pytest.mark.integration

NS = "ssa"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
#: Every kubectl the issue names, 1.27 to 1.33 (each skipped, with the reason, where it is missing).
KUBECTL_VERSIONS = kubectl_params("1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33")


@pytest.fixture(scope="module", autouse=True)
def namespace(chain: ChainHandle) -> None:
    chain.kubectl("create", "namespace", NS, check=False)


def cm(name: str, data: dict[str, str] | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
    if data is not None:
        out["data"] = data
    return out


def deployment(name: str, replicas: int | None = 1, image: str = "nginx:1.25") -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": name}},
                            "template": {"metadata": {"labels": {"app": name}},
                                         "spec": {"containers": [{"name": "web", "image": image}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": spec}


def apply(chain: ChainHandle, path: str, body: Any, query: str = "fieldManager=test",
          raw: bytes | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else yaml.safe_dump(body).encode()
    status, _h, out = chain.request("PATCH", f"{path}?{query}" if query else path, raw=data, headers=APPLY)
    return status, json.loads(out) if out else None


def managers(obj: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"], e.get("subresource", "")): e["fieldsV1"]
            for e in obj["metadata"].get("managedFields") or []}


CM = f"/api/v1/namespaces/{NS}/configmaps"
DEP = f"/apis/apps/v1/namespaces/{NS}/deployments"


def test_apply_creates_then_updates_with_an_apply_entry(chain: ChainHandle) -> None:
    status, obj = apply(chain, f"{CM}/a1", cm("a1", {"k": "v"}))
    assert status == 201, obj
    [entry] = obj["metadata"]["managedFields"]
    assert entry["manager"] == "test" and entry["operation"] == "Apply" and entry["apiVersion"] == "v1"
    assert entry["fieldsType"] == "FieldsV1" and entry["time"].endswith("Z")
    assert entry["fieldsV1"] == {"f:data": {"f:k": {}}}
    status, obj = apply(chain, f"{CM}/a1", cm("a1", {"k": "v2"}))
    assert status == 200 and obj["data"] == {"k": "v2"}


def test_every_write_records_an_update_entry(chain: ChainHandle) -> None:
    status, obj = chain.json("POST", CM, cm("u1", {"a": "1"}), headers={"User-Agent": "python-requests/2.31"})
    assert status == 201
    assert managers(obj) == {("python-requests", "Update", ""): {"f:data": {".": {}, "f:a": {}}}}
    status, _h, raw = chain.request("PATCH", f"{CM}/u1?fieldManager=merger", raw=b'{"data":{"b":"2"}}',
                                    headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200
    assert managers(json.loads(raw))[("merger", "Update", "")] == {"f:data": {"f:b": {}}}
    obj = json.loads(raw)
    obj["data"]["a"] = "changed"
    status, obj = chain.json("PUT", f"{CM}/u1?fieldManager=putter", obj)
    assert status == 200
    got = managers(obj)
    assert got[("putter", "Update", "")] == {"f:data": {"f:a": {}}}
    assert got[("python-requests", "Update", "")] == {"f:data": {}}  # data.a taken, the map itself kept
    # A client may reset ownership with [{}] (or []); leaving the field out keeps it.
    status, _h, raw = chain.request("PATCH", f"{CM}/u1", raw=b'{"metadata":{"managedFields":[{}]}}',
                                    headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200 and "managedFields" not in json.loads(raw)["metadata"]


def test_apply_requires_a_field_manager_and_force_only_applies(chain: ChainHandle) -> None:
    status, body = apply(chain, f"{CM}/a2", cm("a2"), query="")
    assert status == 422
    assert body["message"] == ('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                               "is required for apply patch")
    status, _h, raw = chain.request("PATCH", f"{CM}/a1?force=true", raw=b"{}",
                                    headers={"Content-Type": "application/merge-patch+json"})
    assert status == 422
    assert json.loads(raw)["message"] == ('PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: '
                                          "may not be specified for non-apply patch")


def test_conflict_message_causes_and_force(chain: ChainHandle) -> None:
    assert apply(chain, f"{DEP}/c1", deployment("c1", 2), "fieldManager=alice")[0] == 201
    status, body = apply(chain, f"{DEP}/c1", deployment("c1", 3, image="nginx:1.26"), "fieldManager=bob")
    assert status == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == ('Apply failed with 2 conflicts: conflicts with "alice":\n- .spec.replicas\n'
                               '- .spec.template.spec.containers[name="web"].image')
    assert body["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "alice"', "field": ".spec.replicas"},
        {"reason": "FieldManagerConflict", "message": 'conflict with "alice"',
         "field": '.spec.template.spec.containers[name="web"].image'}]
    status, obj = apply(chain, f"{DEP}/c1", deployment("c1", 3, image="nginx:1.26"), "fieldManager=bob&force=true")
    assert status == 200 and obj["spec"]["replicas"] == 3
    got = managers(obj)
    assert "f:replicas" not in got[("alice", "Apply", "")]["f:spec"]
    assert got[("bob", "Apply", "")]["f:spec"]["f:replicas"] == {}


def test_scale_then_apply_takes_replicas_back_only_with_force(chain: ChainHandle) -> None:
    apply(chain, f"{DEP}/s1", deployment("s1", 2), "fieldManager=kubectl")
    status, _h, _raw = chain.request("PATCH", f"{DEP}/s1/scale?fieldManager=scaler", raw=b'{"spec":{"replicas":4}}',
                                    headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200
    status, body = apply(chain, f"{DEP}/s1", deployment("s1", 2), "fieldManager=kubectl")
    assert status == 409
    assert body["message"] == ('Apply failed with 1 conflict: conflict with "scaler" with subresource "scale" '
                               "using apps/v1: .spec.replicas")
    # Leaving replicas out of the configuration gives it up without a conflict.
    status, obj = apply(chain, f"{DEP}/s1", deployment("s1", None), "fieldManager=kubectl")
    assert status == 200 and obj["spec"]["replicas"] == 4


def test_fields_no_longer_applied_are_removed_unless_owned(chain: ChainHandle) -> None:
    apply(chain, f"{CM}/r1", cm("r1", {"a": "1", "b": "2", "c": "3"}), "fieldManager=one")
    apply(chain, f"{CM}/r1", cm("r1", {"c": "3"}), "fieldManager=two")
    status, obj = apply(chain, f"{CM}/r1", cm("r1", {"a": "1"}), "fieldManager=one")
    assert status == 200
    assert obj["data"] == {"a": "1", "c": "3"}  # b dropped; c stays, "two" owns it


def test_status_apply_records_the_subresource(chain: ChainHandle) -> None:
    apply(chain, f"{DEP}/st1", deployment("st1"), "fieldManager=creator")
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "st1"},
            "status": {"observedGeneration": 1, "replicas": 1}}
    status, obj = apply(chain, f"{DEP}/st1/status", body, "fieldManager=ctrl")
    assert status == 200, obj
    assert obj["status"]["replicas"] == 1
    assert managers(obj)[("ctrl", "Apply", "status")] == {"f:status": {"f:observedGeneration": {}, "f:replicas": {}}}


def test_dry_run_stores_nothing(chain: ChainHandle) -> None:
    status, obj = apply(chain, f"{CM}/dry1", cm("dry1", {"a": "1"}), "fieldManager=t&dryRun=All")
    assert status == 201 and obj["data"] == {"a": "1"}
    assert chain.json("GET", f"{CM}/dry1")[0] == 404


@pytest.mark.parametrize(("raw", "code", "message"), [
    (b"a: [1", 400, "error decoding YAML: "),
    (b"apiVersion: v1\nkind: Secret\nmetadata: {name: bad1}\n", 400, "invalid object type: /v1, Kind=Secret"),
    (b"{}", 400, "invalid object type: /, Kind="),
    (b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad1\n  managedFields: [{manager: x}]\n", 400,
     "metadata.managedFields must be nil"),
    (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n", 400,
     "the name of the object (other) does not match the name on the URL (bad1)"),
])
def test_malformed_apply_bodies(chain: ChainHandle, raw: bytes, code: int, message: str) -> None:
    status, body = apply(chain, f"{CM}/bad1", None, raw=raw)
    assert status == code, body
    assert body["message"].startswith(message)
    assert chain.json("GET", f"{CM}/bad1")[0] == 404


def test_duplicate_list_keys_answer_as_kube(chain: ChainHandle) -> None:
    dep = deployment("dup1")
    dep["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}, {"name": "A"}]
    status, body = apply(chain, f"{DEP}/dup1", dep)
    assert status == 500
    # kube names the object as the configuration does (no namespace in this one)
    assert body["message"] == ("failed to create typed patch object (/dup1; apps/v1, Kind=Deployment): "
                               '.spec.template.spec.containers[name="web"].env: duplicate entries for key '
                               '[name="A"]')
    assert chain.json("GET", f"{DEP}/dup1")[0] == 404


@pytest.mark.parametrize("version", KUBECTL_VERSIONS)
def test_kubectl_server_side_apply(chain: ChainHandle, tmp_path: Any, version: str) -> None:
    name = "k" + version.replace(".", "")
    manifest = tmp_path / "dep.yaml"
    manifest.write_text(yaml.safe_dump({**deployment(name, 2), "metadata": {"name": name, "namespace": NS}}))
    out = chain.kubectl("apply", "--server-side", "-f", str(manifest), version=version)
    assert "serverside-applied" in out.stdout
    chain.kubectl("scale", "-n", NS, f"deployment/{name}", "--replicas=5", version=version)
    failed = chain.kubectl("apply", "--server-side", "-f", str(manifest), version=version, check=False)
    assert failed.returncode != 0
    assert "Apply failed with 1 conflict: conflict with" in failed.stderr and ".spec.replicas" in failed.stderr
    chain.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(manifest), version=version)
    got = json.loads(chain.kubectl("get", "-n", NS, f"deployment/{name}", "-o", "json",
                                   "--show-managed-fields", version=version).stdout)
    assert got["spec"]["replicas"] == 2
    assert ("kubectl", "Apply", "") in managers(got)


def test_python_client_apply(chain: ChainHandle) -> None:
    core = client.CoreV1Api(config.new_client_from_config(config_file=chain.kubeconfig))
    body = cm("py1", {"a": "1"})
    created = core.patch_namespaced_config_map("py1", NS, body, field_manager="py",
                                               _content_type="application/apply-patch+yaml")
    assert created.data == {"a": "1"}
    [entry] = created.metadata.managed_fields
    assert (entry.manager, entry.operation, entry.fields_v1) == ("py", "Apply", {"f:data": {"f:a": {}}})


CRD_GROUP = "ssa.example.com"


def test_crd_list_map_keys_shared_by_two_managers(chain: ChainHandle) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"routes.{CRD_GROUP}"},
           "spec": {"group": CRD_GROUP, "scope": "Namespaced",
                    "names": {"plural": "routes", "singular": "route", "kind": "Route", "listKind": "RouteList"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "rules": {"type": "array", "x-kubernetes-list-type": "map",
                                      "x-kubernetes-list-map-keys": ["host", "port"],
                                      "items": {"type": "object", "required": ["host", "port"], "properties": {
                                          "host": {"type": "string"}, "port": {"type": "integer"},
                                          "backend": {"type": "string"}}}}}}}}}}]}}
    chain.kubectl("apply", "-f", "-", input=json.dumps(crd))
    chain.kubectl("wait", "--for", "condition=Established", f"crd/routes.{CRD_GROUP}", "--timeout=15s")
    path = f"/apis/{CRD_GROUP}/v1/namespaces/{NS}/routes/r1"

    def route(*rules: tuple[str, int, str]) -> dict[str, Any]:
        return {"apiVersion": f"{CRD_GROUP}/v1", "kind": "Route", "metadata": {"name": "r1"},
                "spec": {"rules": [{"host": h, "port": p, "backend": b} for h, p, b in rules]}}

    status, obj = apply(chain, path, route(("a", 80, "x")), "fieldManager=one")
    assert status == 201, obj
    assert managers(obj)[("one", "Apply", "")] == {"f:spec": {"f:rules": {'k:{"host":"a","port":80}': {
        ".": {}, "f:backend": {}, "f:host": {}, "f:port": {}}}}}
    status, obj = apply(chain, path, route(("b", 80, "y")), "fieldManager=two")
    assert status == 200
    assert [r["host"] for r in obj["spec"]["rules"]] == ["a", "b"]
    status, body = apply(chain, path, route(("a", 80, "z")), "fieldManager=two")
    assert status == 409
    assert body["message"] == ('Apply failed with 1 conflict: conflict with "one": '
                               '.spec.rules[host="a",port=80].backend')
    status, obj = apply(chain, path, route(), "fieldManager=one")
    assert status == 200
    assert [r["host"] for r in obj["spec"]["rules"]] == ["b"]


@pytest.mark.parametrize("version", KUBECTL_VERSIONS)
def test_kubectl_client_side_to_server_side_and_back(chain: ChainHandle, tmp_path: Any, version: str) -> None:
    name = "m" + version.replace(".", "")
    manifest = tmp_path / "dep.yaml"

    def write(replicas: int) -> None:
        manifest.write_text(yaml.safe_dump({**deployment(name, replicas), "metadata": {"name": name, "namespace": NS}}))

    write(2)
    chain.kubectl("apply", "-f", str(manifest), version=version)  # client-side: last-applied annotation
    write(3)
    diff = chain.kubectl("diff", "--server-side", "-f", str(manifest), version=version, check=False)
    assert diff.returncode == 1 and "+  replicas: 3" in diff.stdout
    # The fields kubectl-client-side-apply owns as last applied move to the server-side applier.
    chain.kubectl("apply", "--server-side", "-f", str(manifest), version=version)
    got = json.loads(chain.kubectl("get", "-n", NS, f"deployment/{name}", "-o", "json", "--show-managed-fields",
                                   version=version).stdout)
    assert got["spec"]["replicas"] == 3
    owners = managers(got)
    assert owners[("kubectl", "Apply", "")]["f:spec"]["f:replicas"] == {}
    assert not any("f:replicas" in fields.get("f:spec", {}) for key, fields in owners.items()
                   if key[0] != "kubectl")
    last = json.loads(got["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["spec"]["replicas"] == 3  # kept in step for a later client-side apply
    write(4)
    chain.kubectl("apply", "-f", str(manifest), version=version)  # and back to client-side
    got = json.loads(chain.kubectl("get", "-n", NS, f"deployment/{name}", "-o", "json", version=version).stdout)
    assert got["spec"]["replicas"] == 4


def test_last_applied_conflicts_are_allowed_only_while_live_matches(chain: ChainHandle) -> None:
    last = json.dumps({**cm("la1", {"a": "1"}), "metadata": {"name": "la1", "namespace": NS}})
    body = cm("la1", {"a": "1"})
    body["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": last}
    assert chain.json("POST", f"{CM}?fieldManager=kubectl-client-side-apply", body)[0] == 201
    status, obj = apply(chain, f"{CM}/la1", cm("la1", {"a": "2"}), "fieldManager=kubectl")
    assert status == 200 and obj["data"] == {"a": "2"}
    # Another applier gets the conflict: only kubectl migrates client-side ownership.
    chain.json("POST", f"{CM}?fieldManager=kubectl-client-side-apply", {**body, "metadata": {
        **body["metadata"], "name": "la2"}})
    status, err = apply(chain, f"{CM}/la2", cm("la2", {"a": "2"}), "fieldManager=helm")
    assert status == 409 and 'conflict with "kubectl-client-side-apply" using v1: .data.a' in err["message"]


def test_scale_apply_owns_replicas_on_the_parent(chain: ChainHandle) -> None:
    apply(chain, f"{DEP}/sc1", deployment("sc1", 2), "fieldManager=owner")
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "sc1"}, "spec": {"replicas": 6}}
    status, body = apply(chain, f"{DEP}/sc1/scale", scale, "fieldManager=hpa")
    assert status == 409
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "owner": .spec.replicas'
    status, body = apply(chain, f"{DEP}/sc1/scale", scale, "fieldManager=hpa&force=true")
    assert status == 200 and body["kind"] == "Scale" and body["spec"]["replicas"] == 6
    status, dep = chain.json("GET", f"{DEP}/sc1")
    assert managers(dep)[("hpa", "Apply", "scale")] == {"f:spec": {"f:replicas": {}}}
    bad = {**scale, "spec": {"replicas": -1}}
    status, body = apply(chain, f"{DEP}/sc1/scale", bad, "fieldManager=hpa")
    assert status == 422 and "spec.replicas" in body["message"]


def test_update_managers_are_capped_at_ten(chain: ChainHandle) -> None:
    chain.json("POST", f"{CM}?fieldManager=m00", cm("cap1", {"k00": "v"}))
    for i in range(1, 12):
        status, _h, raw = chain.request("PATCH", f"{CM}/cap1?fieldManager=m{i:02d}",
                                        raw=json.dumps({"data": {f"k{i:02d}": "v"}}).encode(),
                                        headers={"Content-Type": "application/merge-patch+json"})
        assert status == 200
    entries = json.loads(raw)["metadata"]["managedFields"]
    names = [e["manager"] for e in entries]
    assert len(entries) == 10 and "ancient-changes" in names
    ancient = next(e for e in entries if e["manager"] == "ancient-changes")
    assert set(ancient["fieldsV1"]["f:data"]) >= {"f:k00", "f:k01", "f:k02"}


def test_fields_added_by_admission_belong_to_nobody(chain: ChainHandle) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "adm1"},
           "spec": {"containers": [{"name": "app", "image": "nginx"}]}}
    status, obj = chain.json("POST", f"/api/v1/namespaces/{NS}/pods?fieldManager=creator", pod)
    assert status == 201, obj
    assert obj["spec"]["volumes"] and obj["spec"]["tolerations"]  # ServiceAccount and toleration admission
    spec_fields = managers(obj)[("creator", "Update", "")]["f:spec"]
    assert "f:volumes" not in spec_fields and "f:tolerations" not in spec_fields
    assert "f:volumeMounts" not in spec_fields["f:containers"]['k:{"name":"app"}']
    assert "f:dnsPolicy" in spec_fields  # defaults are the creator's, as kube decodes them


@pytest.mark.parametrize("validation", ["Strict", "Warn", "Ignore"])
def test_unknown_fields_fail_the_apply_as_kube_answers_them(chain: ChainHandle, validation: str) -> None:
    # kube types the configuration before anything else: an undeclared field is a plain error
    # (500, no reason) whatever fieldValidation says (kubernetes/kubernetes#122480), named by
    # the configuration's namespace and name; nothing is stored.
    name = "unk-" + validation.lower()
    body = cm(name, {"a": "1"})
    body["metadata"]["namespace"] = NS
    body["data_error"] = "x"
    status, out = apply(chain, f"{CM}/{name}", body, f"fieldManager=t&fieldValidation={validation}")
    assert status == 500, out
    assert out == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 500,
                   "message": f"failed to create typed patch object ({NS}/{name}; /v1, Kind=ConfigMap): "
                              ".data_error: field not declared in schema"}
    assert chain.json("GET", f"{CM}/{name}")[0] == 404


def test_unknown_fields_deep_in_an_apply_and_on_an_existing_object(chain: ChainHandle) -> None:
    status, _ = apply(chain, f"{DEP}/unk1", deployment("unk1"))
    assert status == 201
    body = deployment("unk1")
    body["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostname": "x"}]
    status, out = apply(chain, f"{DEP}/unk1", body)
    assert status == 500
    assert out["message"] == ("failed to create typed patch object (/unk1; apps/v1, Kind=Deployment): "
                              '.spec.template.spec.containers[name="web"].ports[containerPort=80,protocol="TCP"]'
                              ".hostname: field not declared in schema")
    # metadata is typed too; an atomic list's items are walked by index
    body = deployment("unk1")
    body["metadata"]["labelz"] = {"a": "b"}
    body["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh"]
    status, out = apply(chain, f"{DEP}/unk1", body)
    assert status == 500
    assert out["message"].endswith("): .metadata.labelz: field not declared in schema")
    # a field kube knows is fine, and the object is unchanged by the failed applies
    got = chain.json("GET", f"{DEP}/unk1")[1]
    assert "ports" not in got["spec"]["template"]["spec"]["containers"][0]


def test_unknown_fields_of_a_custom_resource_and_preserved_parts(chain: ChainHandle) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"gadgets.{CRD_GROUP}"},
           "spec": {"group": CRD_GROUP, "scope": "Namespaced",
                    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "size": {"type": "integer"},
                            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}}}]}}
    chain.kubectl("apply", "-f", "-", input=json.dumps(crd))
    chain.kubectl("wait", "--for", "condition=Established", f"crd/gadgets.{CRD_GROUP}", "--timeout=30s")
    path = f"/apis/{CRD_GROUP}/v1/namespaces/{NS}/gadgets/g1"
    body = {"apiVersion": f"{CRD_GROUP}/v1", "kind": "Gadget", "metadata": {"name": "g1", "namespace": NS},
            "spec": {"size": 1, "colour": "red"}}
    status, out = apply(chain, path, body)
    assert status == 500
    assert out["message"] == (f"failed to create typed patch object ({NS}/g1; {CRD_GROUP}/v1, Kind=Gadget): "
                              ".spec.colour: field not declared in schema")
    body["spec"] = {"size": 1, "extra": {"anything": {"goes": [1]}}}
    status, out = apply(chain, path, body)
    assert status == 201, out
    assert out["spec"]["extra"] == {"anything": {"goes": [1]}}


def test_embedded_resources_of_a_custom_resource(chain: ChainHandle) -> None:
    # kube's CRD OpenAPI gives an embedded resource apiVersion, kind and ObjectMeta: its metadata's
    # finalizers are a set, its labels granular, and a field it does not declare fails the apply.
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"blueprints.{CRD_GROUP}"},
           "spec": {"group": CRD_GROUP, "scope": "Namespaced",
                    "names": {"plural": "blueprints", "singular": "blueprint", "kind": "Blueprint",
                              "listKind": "BlueprintList"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                                         "properties": {"spec": {"type": "object", "properties": {
                                             "size": {"type": "integer"}}}}}}}}}}}]}}
    chain.kubectl("apply", "-f", "-", input=json.dumps(crd))
    chain.kubectl("wait", "--for", "condition=Established", f"crd/blueprints.{CRD_GROUP}", "--timeout=30s")
    path = f"/apis/{CRD_GROUP}/v1/namespaces/{NS}/blueprints/b1"

    def blueprint(**template: Any) -> dict[str, Any]:
        return {"apiVersion": f"{CRD_GROUP}/v1", "kind": "Blueprint", "metadata": {"name": "b1", "namespace": NS},
                "spec": {"template": {"apiVersion": "v1", "kind": "Thing", **template}}}

    body = blueprint(metadata={"labels": {"a": "1"}, "finalizers": ["x"]}, spec={"size": 1})
    status, obj = apply(chain, path, body, "fieldManager=one")
    assert status == 201, obj
    assert managers(obj)[("one", "Apply", "")] == {"f:spec": {"f:template": {
        "f:apiVersion": {}, "f:kind": {}, "f:metadata": {"f:finalizers": {'v:"x"': {}}, "f:labels": {"f:a": {}}},
        "f:spec": {"f:size": {}}}}}
    # a second manager adds a label and a finalizer beside the first one's
    status, obj = apply(chain, path, blueprint(metadata={"labels": {"b": "2"}, "finalizers": ["y"]}),
                        "fieldManager=two")
    assert status == 200, obj
    template = obj["spec"]["template"]
    assert template["metadata"] == {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]}
    for bad, field in (({"colour": "red"}, ".spec.template.colour"),
                       ({"metadata": {"labelz": {}}}, ".spec.template.metadata.labelz")):
        status, out = apply(chain, path, blueprint(**bad), "fieldManager=one")
        assert status == 500, out
        assert out["message"] == (f"failed to create typed patch object ({NS}/b1; {CRD_GROUP}/v1, Kind=Blueprint): "
                                  f"{field}: field not declared in schema")
    assert chain.json("GET", path)[1]["spec"]["template"] == template
