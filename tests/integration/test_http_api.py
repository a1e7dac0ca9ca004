"""The HTTP API through the gateway: Status bodies, status codes and wording for bad input."""

from __future__ import annotations

import json

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

STATUS_KEYS = ["kind", "apiVersion", "metadata", "status", "message", "reason", "details", "code"]


def cm(name: str) -> dict:  # type: ignore[type-arg]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}}


def test_not_found_status_is_byte_exact(chain: ChainHandle) -> None:
    status, headers, body = chain.request("GET", "/api/v1/namespaces/default/configmaps/missing")
    assert status == 404
    assert body == (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                    b'"message":"configmaps \\"missing\\" not found","reason":"NotFound",'
                    b'"details":{"name":"missing","kind":"configmaps"},"code":404}\n')
    assert headers["content-type"].startswith("application/json")


def test_group_resource_not_found_names_the_group(chain: ChainHandle) -> None:
    status, body = chain.json("GET", "/apis/apps/v1/namespaces/default/deployments/nope")
    assert status == 404 and body["message"] == 'deployments.apps "nope" not found'
    assert body["details"] == {"name": "nope", "group": "apps", "kind": "deployments"}


def test_unauthenticated_requests_are_anonymous_but_health_is_public(chain: ChainHandle) -> None:
    # kube's --anonymous-auth default: system:anonymous, whom RBAC's bootstrap policy lets read
    # version and health only (test_anonymous_auth.py has the rest).
    status, _h, body = chain.request("GET", "/api/v1/namespaces", auth=False)
    assert status == 403 and json.loads(body)["message"] == (
        'namespaces is forbidden: User "system:anonymous" cannot list resource "namespaces" in API group "" '
        "at the cluster scope")
    assert chain.request("GET", "/healthz", auth=False)[0] == 200
    status, _h, body = chain.request("GET", "/version", auth=False)
    assert status == 200 and json.loads(body)["gitVersion"].startswith("v1.33.")


def test_readyz_verbose_lists_checks(chain: ChainHandle) -> None:
    status, _h, body = chain.request("GET", "/readyz?verbose", auth=False)
    assert status == 200 and b"[+]ping ok" in body and body.endswith(b"readyz check passed\n")


def test_create_conflict_update_and_delete_status(chain: ChainHandle) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    status, created = chain.json("POST", base, cm("http-a"))
    assert status == 201
    status, body = chain.json("POST", base, cm("http-a"))
    assert status == 409 and body["reason"] == "AlreadyExists"
    assert body["message"] == 'configmaps "http-a" already exists'
    stale = dict(created, data={"a": "c"})
    status, _ = chain.json("PUT", f"{base}/http-a", stale)
    assert status == 200
    status, body = chain.json("PUT", f"{base}/http-a", stale)  # same (now stale) resourceVersion
    assert status == 409 and body["reason"] == "Conflict"
    assert body["message"] == ('Operation cannot be fulfilled on configmaps "http-a": the object has been '
                               "modified; please apply your changes to the latest version and try again")
    status, body = chain.json("DELETE", f"{base}/http-a")
    assert status == 200 and body["status"] == "Success" and body["details"]["name"] == "http-a"


def test_invalid_object_lists_causes(chain: ChainHandle) -> None:
    obj = cm("UPPER")
    obj["metadata"]["labels"] = {"bad key!": "x"}
    status, body = chain.json("POST", "/api/v1/namespaces/default/configmaps", obj)
    assert status == 422 and body["reason"] == "Invalid"
    fields = [c["field"] for c in body["details"]["causes"]]
    assert "metadata.name" in fields and "metadata.labels" in fields
    assert body["message"].startswith('ConfigMap "UPPER" is invalid: [')


def test_malformed_bodies(chain: ChainHandle) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    status, _h, body = chain.request("POST", base, raw=b"{not json")
    assert status == 400 and json.loads(body)["reason"] == "BadRequest"
    status, _h, body = chain.request("POST", base, raw=b"key: [unclosed", headers={"Content-Type": "application/yaml"})
    assert status == 400
    status, _h, body = chain.request("POST", base, raw=b"<xml/>", headers={"Content-Type": "application/xml"})
    assert status == 415 and json.loads(body)["reason"] == "UnsupportedMediaType"
    status, _h, body = chain.request("POST", base, raw=b"[1,2]")
    assert status == 400
    too_big = json.dumps({**cm("huge"), "data": {"x": "a" * (3 * 1024 * 1024 + 10)}}).encode()
    status, _h, body = chain.request("POST", base, raw=too_big)
    assert status == 413 and json.loads(body)["reason"] == "RequestEntityTooLarge"
    assert chain.json("GET", f"{base}/huge")[0] == 404  # nothing bad was stored


def test_wrong_kind_or_version_in_body(chain: ChainHandle) -> None:
    status, body = chain.json("POST", "/api/v1/namespaces/default/configmaps",
                              {"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    assert status == 400 and "does not match the expected API version" in body["message"]


def test_method_not_allowed_and_unknown_paths(chain: ChainHandle) -> None:
    status, body = chain.json("POST", "/api/v1/namespaces/default/configmaps/x", cm("x"))
    assert status == 405 and body["reason"] == "MethodNotAllowed"
    status, body = chain.json("GET", "/apis/nosuch.example.com/v1/things")
    assert status == 404 and body["reason"] == "NotFound"
    status, body = chain.json("GET", "/api/v1/nosuchresource")
    assert status == 404


def test_field_validation_modes(chain: ChainHandle) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    obj = dict(cm("fv-warn"), bogus=1)
    status, headers, body = chain.request("POST", base + "?fieldValidation=Warn", obj)
    assert status == 201 and 'unknown field \\"bogus\\"' in headers.get("warning", "")
    assert "bogus" not in json.loads(body)  # unknown fields are pruned, never stored
    status, body = chain.json("POST", base + "?fieldValidation=Strict", dict(cm("fv-strict"), bogus=1))
    assert status == 400 and 'strict decoding error: unknown field "bogus"' in body["message"]
    dup = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fv-dup","name":"fv-dup"}}'
    status, _h, body = chain.request("POST", base + "?fieldValidation=Strict", raw=dup)
    assert status == 400 and b'duplicate field \\"metadata.name\\"' in body
    status, _ = chain.json("POST", base + "?fieldValidation=Ignore", dict(cm("fv-ignore"), bogus=1))
    assert status == 201
    status, body = chain.json("POST", base + "?fieldValidation=Loud", cm("fv-bad"))
    assert status == 422 and body["message"] == ('CreateOptions.meta.k8s.io "" is invalid: fieldValidation: '
                                                 'Unsupported value: "Loud": supported values: "", "Ignore", '
                                                 '"Strict", "Warn"')


def test_dry_run_and_generate_name(chain: ChainHandle) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    status, body = chain.json("POST", base + "?dryRun=All", cm("dry-http"))
    assert status == 201 and body["metadata"]["uid"]
    assert chain.json("GET", f"{base}/dry-http")[0] == 404
    status, body = chain.json("POST", base + "?dryRun=Maybe", cm("dry-bad"))
    assert status == 422 and body["details"]["kind"] == "CreateOptions"
    assert 'dryRun: Unsupported value: []string{"Maybe"}: supported values: "All"' in body["message"]
    gen = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}
    status, body = chain.json("POST", base, gen)
    assert status == 201 and body["metadata"]["name"].startswith("gen-") and len(body["metadata"]["name"]) == 9


def test_generation_bumps_on_spec_only(chain: ChainHandle) -> None:
    base = "/apis/apps/v1/namespaces/default/deployments"
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gen-dep"},
           "spec": {"selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}},
                                 "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    status, body = chain.json("POST", base, dep)
    assert status == 201 and body["metadata"]["generation"] == 1
    patch = {"metadata": {"labels": {"x": "y"}}}
    status, _h, data = chain.request("PATCH", f"{base}/gen-dep", patch,
                                     headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200 and json.loads(data)["metadata"]["generation"] == 1
    status, _h, data = chain.request("PATCH", f"{base}/gen-dep", {"spec": {"replicas": 3}},
                                     headers={"Content-Type": "application/merge-patch+json"})
    assert json.loads(data)["metadata"]["generation"] == 2
    status, _h, data = chain.request("PATCH", f"{base}/gen-dep/status", {"status": {"replicas": 3}},
                                     headers={"Content-Type": "application/merge-patch+json"})
    body = json.loads(data)
    assert status == 200 and body["status"]["replicas"] == 3 and body["metadata"]["generation"] == 2
    status, _h, data = chain.request("PATCH", f"{base}/gen-dep", {"status": {"replicas": 9}},
                                     headers={"Content-Type": "application/merge-patch+json"})
    assert json.loads(data)["status"]["replicas"] == 3  # status is only written through /status


def test_scale_subresource(chain: ChainHandle) -> None:
    base = "/apis/apps/v1/namespaces/default/deployments"
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "scaled"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}},
                                 "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    assert chain.json("POST", base, dep)[0] == 201
    status, scale = chain.json("GET", f"{base}/scaled/scale")
    assert status == 200 and scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"]["replicas"] == 1 and scale["status"]["selector"] == "a=b"
    scale["spec"]["replicas"] = 4
    status, scale = chain.json("PUT", f"{base}/scaled/scale", scale)
    assert status == 200 and scale["spec"]["replicas"] == 4
    status, _ = chain.json("PUT", f"{base}/scaled/scale", dict(scale, spec={"replicas": -1}))
    assert status == 422
    assert chain.json("GET", f"{base}/scaled")[1]["spec"]["replicas"] == 4


def test_server_side_apply_needs_the_name_to_create(chain: ChainHandle) -> None:
    # (server-side apply itself: test_server_side_apply.py)
    status, _h, body = chain.request("PATCH", "/api/v1/namespaces/default/configmaps/ssa?fieldManager=t",
                                     raw=b"apiVersion: v1\nkind: ConfigMap\n",
                                     headers={"Content-Type": "application/apply-patch+yaml"})
    assert status == 400
    assert json.loads(body)["message"] == "the name of the object () does not match the name on the URL (ssa)"


def test_watch_from_expired_version_gets_410_event(chain: ChainHandle) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    status, created = chain.json("POST", base, cm("expiring"))
    old = created["metadata"]["resourceVersion"]
    for i in range(210):  # more events than the test chain's watch cache keeps (200)
        chain.json("PUT", f"{base}/expiring", dict(cm("expiring"), data={"n": str(i)}))
    status, _h, body = chain.request("GET", f"{base}?watch=1&resourceVersion={old}")
    assert status == 200
    event = json.loads(body.splitlines()[0])
    assert event["type"] == "ERROR" and event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"


def test_table_and_partial_metadata(chain: ChainHandle) -> None:
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io"
    status, _h, body = chain.request("GET", "/api/v1/namespaces?includeObject=None", headers={"Accept": accept})
    table = json.loads(body)
    assert status == 200 and table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]][:2] == ["Name", "Status"]
    partial = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
    status, _h, body = chain.request("GET", "/api/v1/namespaces", headers={"Accept": partial})
    doc = json.loads(body)
    assert doc["kind"] == "PartialObjectMetadataList" and "spec" not in doc["items"][0]


def test_selectors_on_list(chain: ChainHandle) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    for name, tier in (("sel-a", "web"), ("sel-b", "db")):
        obj = cm(name)
        obj["metadata"]["labels"] = {"tier": tier}
        chain.json("POST", base, obj)
    status, body = chain.json("GET", base + "?labelSelector=tier%20in%20(web)")
    assert [i["metadata"]["name"] for i in body["items"]] == ["sel-a"]
    status, body = chain.json("GET", base + "?fieldSelector=metadata.name%3Dsel-b")
    assert [i["metadata"]["name"] for i in body["items"]] == ["sel-b"]
    status, body = chain.json("GET", base + "?labelSelector=tier%20in%20(")
    assert status == 400
    status, body = chain.json("GET", base + "?fieldSelector=spec.nope%3D1")
    assert status == 400


def test_discovery_documents(chain: ChainHandle) -> None:
    status, apis = chain.json("GET", "/apis")
    names = [g["name"] for g in apis["groups"]]
    assert status == 200 and names.index("apps") < names.index("batch")
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    status, headers, body = chain.request("GET", "/apis", headers={"Accept": accept})
    assert headers["content-type"] == accept
    agg = json.loads(body)
    assert agg["kind"] == "APIGroupDiscoveryList" and agg["items"][0]["versions"][0]["freshness"] == "Current"
    status, core = chain.json("GET", "/api/v1")
    pods = next(r for r in core["resources"] if r["name"] == "pods")
    assert pods["shortNames"] == ["po"] and pods["categories"] == ["all"]


def test_openapi_v3_has_patch_metadata(chain: ChainHandle) -> None:
    status, index = chain.json("GET", "/openapi/v3")
    url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
    status, headers, body = chain.request("GET", url)
    assert status == 200 and "immutable" in headers.get("cache-control", "")
    doc = json.loads(body)
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    assert any(p.get("name") == "fieldValidation" for p in patch.get("parameters", []))


def test_include_object_modes(chain: ChainHandle) -> None:
    accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    _s, _h, body = chain.request("GET", "/api/v1/namespaces?includeObject=None", headers=accept)
    assert "object" not in json.loads(body)["rows"][0]
    _s, _h, body = chain.request("GET", "/api/v1/namespaces?includeObject=Object", headers=accept)
    assert json.loads(body)["rows"][0]["object"]["kind"] == "Namespace"
    _s, _h, body = chain.request("GET", "/api/v1/namespaces", headers=accept)
    assert json.loads(body)["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    status, _h, body = chain.request("GET", "/api/v1/namespaces?includeObject=Everything", headers=accept)
    assert status == 400


def test_watch_bookmarks(chain: ChainHandle) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    status, created = chain.json("POST", base, cm("bookmarked"))
    rv = created["metadata"]["resourceVersion"]
    # The test chain sends bookmarks every second; the watch ends after 3 s.
    status, _h, body = chain.request(
        "GET", f"{base}?watch=1&allowWatchBookmarks=true&timeoutSeconds=3&resourceVersion={rv}")
    events = [json.loads(line) for line in body.splitlines()]
    marks = [e for e in events if e["type"] == "BOOKMARK"]
    assert status == 200 and marks
    assert marks[0]["object"]["kind"] == "ConfigMap"
    assert int(marks[0]["object"]["metadata"]["resourceVersion"]) >= int(rv)
    status, _h, body = chain.request("GET", f"{base}?watch=1&timeoutSeconds=2&resourceVersion={rv}")
    assert not [line for line in body.splitlines() if b"BOOKMARK" in line]  # only when asked for


def test_send_initial_events_over_http(chain: ChainHandle) -> None:
    chain.json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": "initial"}})
    chain.json("POST", "/api/v1/namespaces/initial/configmaps", cm("first"))
    _status, _h, body = chain.request(
        "GET", "/api/v1/namespaces/initial/configmaps?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
               "&resourceVersionMatch=NotOlderThan&timeoutSeconds=2&fieldSelector=metadata.name%3Dfirst")
    events = [json.loads(line) for line in body.splitlines()]
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "first"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_delete_collection_with_selector(chain: ChainHandle) -> None:
    chain.json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dc"}})
    for name, keep in (("x1", "no"), ("x2", "no"), ("x3", "yes")):
        obj = cm(name)
        obj["metadata"]["labels"] = {"keep": keep}
        chain.json("POST", "/api/v1/namespaces/dc/configmaps", obj)
    status, body = chain.json("DELETE", "/api/v1/namespaces/dc/configmaps?labelSelector=keep%3Dno")
    assert status == 200 and sorted(i["metadata"]["name"] for i in body["items"]) == ["x1", "x2"]
    status, body = chain.json("GET", "/api/v1/namespaces/dc/configmaps?labelSelector=keep")
    assert [i["metadata"]["name"] for i in body["items"]] == ["x3"]


def test_delete_options_and_preconditions(chain: ChainHandle) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    status, created = chain.json("POST", base, cm("precond"))
    status, body = chain.json("DELETE", f"{base}/precond", {"preconditions": {"uid": "not-the-uid"}})
    assert status == 409 and "Precondition failed: UID in precondition: not-the-uid" in body["message"]
    status, body = chain.json("DELETE", f"{base}/precond?propagationPolicy=Sideways")
    assert status == 422
    status, body = chain.json("DELETE", f"{base}/precond", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                            "preconditions": {"uid": created["metadata"]["uid"]},
                                                            "propagationPolicy": "Background"})
    assert status == 200
    status, body = chain.json("DELETE", f"{base}/precond")
    assert status == 404


def test_finalizers_via_http(chain: ChainHandle) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    obj = cm("held")
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    chain.json("POST", base, obj)
    status, body = chain.json("DELETE", f"{base}/held")
    assert status == 200 and body["metadata"]["deletionTimestamp"]  # kube: 202 only for orphanDependents=false
    status, _h, _data = chain.request("PATCH", f"{base}/held", {"metadata": {"finalizers": None}},
                                     headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200
    assert chain.json("GET", f"{base}/held")[0] == 404


def test_metrics_count_requests(chain: ChainHandle) -> None:
    chain.json("GET", "/api/v1/namespaces/default/configmaps")
    status, _h, body = chain.request("GET", "/metrics")
    assert status == 200
    counted = [line for line in body.decode().splitlines()
               if line.startswith("apiserver_request_total{") and 'resource="configmaps"' in line
               and 'verb="LIST"' in line and 'code="200"' in line]
    assert counted and float(counted[0].rsplit(" ", 1)[1]) >= 1


def test_legacy_watch_path_and_all_namespaces_list(chain: ChainHandle) -> None:
    chain.json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    _s, created = chain.json("POST", "/api/v1/namespaces/other/configmaps", cm("everywhere"))
    status, body = chain.json("GET", "/api/v1/configmaps")
    assert status == 200 and ("other", "everywhere") in {
        (i["metadata"]["namespace"], i["metadata"]["name"]) for i in body["items"]}
    rv = int(created["metadata"]["resourceVersion"]) - 1
    status, _h, data = chain.request(
        "GET", f"/api/v1/watch/namespaces/other/configmaps/everywhere?resourceVersion={rv}&timeoutSeconds=1")
    events = [json.loads(line) for line in data.splitlines()]
    assert status == 200 and [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "everywhere")]
    status, _h, data = chain.request(
        "GET", f"/api/v1/namespaces/other/configmaps/everywhere?watch=1&resourceVersion={rv}&timeoutSeconds=1")
    assert status == 200 and [json.loads(line)["type"] for line in data.splitlines()] == ["ADDED"]
    status, _h, data = chain.request("GET", "/api/v1/watch/configmaps?timeoutSeconds=1")
    assert status == 200 and b'"everywhere"' in data  # all namespaces, initial state first
    status, body = chain.json("GET", "/api/v1/pods/some-pod")  # namespaced objects need a namespace
    assert status == 404


def test_pretty_output(chain: ChainHandle) -> None:
    status, _h, body = chain.request("GET", "/api/v1/namespaces/default?pretty=true")
    assert status == 200 and body.startswith(b'{\n  "') and body.endswith(b"\n")


def test_events_are_one_resource_seen_through_two_apis(chain: ChainHandle) -> None:
    core_event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "ev-one", "namespace": "default"},
                  "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
                  "reason": "Started", "message": "hello", "type": "Normal", "count": 2,
                  "source": {"component": "kubelet"}}
    status, _ = chain.json("POST", "/api/v1/namespaces/default/events", core_event)
    assert status == 201
    status, ev = chain.json("GET", "/apis/events.k8s.io/v1/namespaces/default/events/ev-one")
    assert status == 200 and ev["apiVersion"] == "events.k8s.io/v1"
    assert ev["regarding"]["name"] == "p" and ev["note"] == "hello" and ev["deprecatedCount"] == 2
    ev["note"] = "changed"
    status, _ = chain.json("PUT", "/apis/events.k8s.io/v1/namespaces/default/events/ev-one", ev)
    assert status == 200
    status, back = chain.json("GET", "/api/v1/namespaces/default/events/ev-one")
    assert back["message"] == "changed" and back["involvedObject"]["name"] == "p"


def test_hpa_v1_and_v2_share_storage(chain: ChainHandle) -> None:
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "minReplicas": 1, "maxReplicas": 5,
                    "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                        "type": "Utilization", "averageUtilization": 60}}}]}}
    status, _ = chain.json("POST", "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers", hpa)
    assert status == 201
    status, v1 = chain.json("GET", "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/web")
    assert status == 200 and v1["spec"]["targetCPUUtilizationPercentage"] == 60
    status, listed = chain.json("GET", "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["web"]


def test_failed_json_patch_test_is_worded_as_kube(chain: ChainHandle) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    chain.json("POST", base, cm("jp-test"))
    ops = [{"op": "test", "path": "/data/a", "value": "b"}, {"op": "test", "path": "/data/a", "value": "z"}]
    status, _h, body = chain.request("PATCH", f"{base}/jp-test", ops,
                                     headers={"Content-Type": "application/json-patch+json"})
    doc = json.loads(body)
    assert status == 422 and doc["reason"] == "Invalid"
    assert doc["message"].endswith("testing value /data/a failed: test failed")
    assert "class" not in doc["message"]


def test_metrics_need_credentials_but_health_and_version_do_not(chain: ChainHandle) -> None:
    # kube serves /metrics behind authentication and authorization (system:monitoring): anonymous is a 403.
    status, _h, body = chain.request("GET", "/metrics", auth=False)
    assert status == 403 and json.loads(body)["message"] == \
        'forbidden: User "system:anonymous" cannot get path "/metrics"'
    assert chain.request("GET", "/metrics")[0] == 200
    for path in ("/healthz", "/livez", "/readyz", "/version", "/version/"):
        assert chain.request("GET", path, auth=False)[0] == 200, path
        # Credentials that do not authenticate are refused everywhere, as kube's filter does (kr8s's
        # test_bad_auth reads /version with a bad token and expects Unauthorized).
        status, _h, body = chain.request("GET", path, auth=False, headers={"Authorization": "Bearer abc123"})
        assert status == 401 and json.loads(body)["reason"] == "Unauthorized", path
