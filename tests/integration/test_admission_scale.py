"""``/scale`` writes as admission sees them on kube-apiserver 1.33 (``ScaleREST.Update``): the
record names the parent resource with subresource ``scale`` and carries ``autoscaling/v1`` Scale
objects; a mutating webhook's patch applies to the Scale and its replicas are what is stored; a
``deployments``-only rule does not fire; ValidatingAdmissionPolicy sees the Scale as ``object``.
A real webhook process (tests/support/admission_webhook.py) and real kubectl, through the chain.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from support.admission_webhook import AdmissionWebhook
from support.conversion_webhook import make_pki
from support.procs import ChainHandle
from support.waiting import eventually
from test_admission_webhooks import Env, reviews
from test_crds import establish
from test_validating_admission_policy import apply, binding, cleanup, deployment, vap

pytestmark = pytest.mark.integration

SCALE_RULE = [{"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
               "resources": ["deployments/scale"]}]
PARENT_RULE = [{"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdmissionWebhook]:
    proc = AdmissionWebhook.start(make_pki(tmp_path_factory.mktemp("scale-pki"), ["localhost"],
                                           ca_name="scale-webhook-test-ca"))
    yield proc
    proc.stop()


@pytest.fixture
def env(chain: ChainHandle, webhook: AdmissionWebhook) -> Iterator[Env]:
    e = Env(chain, webhook)
    yield e
    e.cleanup()


def _ops(ops: list[dict[str, Any]]) -> str:
    return base64.urlsafe_b64encode(json.dumps(ops).encode()).decode()


def _replicas(chain: ChainHandle, ns: str, name: str) -> int:
    out = chain.kubectl("get", "deployment", name, "-n", ns, "-o", "jsonpath={.spec.replicas}").stdout
    return int(out)


def _scale_until(env: Env, name: str, wanted: int, check: Any, what: str) -> Any:
    """``kubectl scale`` (replicas alternating so each call is a change) until ``check`` holds:
    configurations reach the services through watch caches."""
    counter = [wanted]

    def attempt() -> Any:
        counter[0] = wanted if counter[0] != wanted else wanted + 1
        proc = env.chain.kubectl("scale", "deployment", name, "-n", env.ns, f"--replicas={counter[0]}", check=False)
        return check(proc)

    return eventually(attempt, 20, what)


def test_kubectl_scale_reaches_scale_webhooks_with_scale_objects(env: Env) -> None:
    env.hook.requests(clear=True)
    env.register("ValidatingWebhookConfiguration",
                 env.webhook("scale.w13.example.com", "/deny/message=no%20scaling", rules=SCALE_RULE),
                 env.webhook("parent.w13.example.com", "/allow", rules=PARENT_RULE))
    env.chain.kubectl("create", "-f", "-", input=deployment("web", env.ns, 2))
    uid = env.chain.kubectl("get", "deployment", "web", "-n", env.ns, "-o", "jsonpath={.metadata.uid}").stdout

    err = _scale_until(env, "web", 3, lambda p: p.stderr if p.returncode else None, "the scale refused")
    assert 'admission webhook "scale.w13.example.com" denied the request: no scaling' in err
    assert _replicas(env.chain, env.ns, "web") == 2  # nothing stored
    assert not reviews(env.hook, "allow"), "a deployments-only webhook was called for deployments/scale"
    request = reviews(env.hook, "deny")[-1]["request"]
    assert request["operation"] == "UPDATE"
    assert request["resource"] == {"group": "apps", "version": "v1", "resource": "deployments"}
    assert request["requestResource"] == request["resource"]
    assert request["subResource"] == "scale" and request["requestSubResource"] == "scale"
    assert request["kind"]["kind"] == "Scale" and request["requestKind"]["kind"] == "Scale"
    assert request["name"] == "web" and request["namespace"] == env.ns
    obj, old = request["object"], request["oldObject"]
    assert obj["kind"] == old["kind"] == "Scale" and obj["apiVersion"] == old["apiVersion"] == "autoscaling/v1"
    assert obj["spec"]["replicas"] in (3, 4) and old["spec"]["replicas"] == 2
    assert old["metadata"]["name"] == "web" and old["metadata"]["namespace"] == env.ns
    assert old["metadata"]["uid"] == uid
    assert old["status"] == {"replicas": 0, "selector": "app=web"}
    assert request["options"]["kind"] == "UpdateOptions"
    # the object itself still reaches the deployments webhook, not the scale one
    env.chain.kubectl("label", "deployment", "web", "-n", env.ns, "tier=front")
    parent = reviews(env.hook, "allow")[-1]["request"]
    assert parent["kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"} and "subResource" not in parent


def test_mutating_webhook_caps_replicas_through_scale(env: Env) -> None:
    env.hook.requests(clear=True)
    cap = _ops([{"op": "replace", "path": "/spec/replicas", "value": 3}])
    env.register("MutatingWebhookConfiguration",
                 env.webhook("cap.w13.example.com", f"/patch/ops={cap}", rules=SCALE_RULE))
    env.chain.kubectl("create", "-f", "-", input=deployment("capped", env.ns, 1))
    _scale_until(env, "capped", 10, lambda p: p.returncode == 0 and _replicas(env.chain, env.ns, "capped") == 3,
                 "replicas capped at 3 by the webhook")
    request = reviews(env.hook, "patch")[-1]["request"]
    assert request["object"]["kind"] == "Scale" and request["subResource"] == "scale"
    # PUT of a Scale and a JSON patch of /scale are admitted the same way
    status, scale = env.chain.json("GET", f"/apis/apps/v1/namespaces/{env.ns}/deployments/capped/scale")
    assert status == 200, scale
    scale["spec"]["replicas"] = 9
    status, body = env.chain.json("PUT", f"/apis/apps/v1/namespaces/{env.ns}/deployments/capped/scale", scale)
    assert status == 200 and body["spec"]["replicas"] == 3, body
    status, body = env.chain.json("PATCH", f"/apis/apps/v1/namespaces/{env.ns}/deployments/capped/scale",
                                  [{"op": "replace", "path": "/spec/replicas", "value": 8}],
                                  headers={"Content-Type": "application/json-patch+json"})
    assert status == 200 and body["spec"]["replicas"] == 3, body
    assert _replicas(env.chain, env.ns, "capped") == 3


def test_webhook_patch_making_the_scale_invalid_is_refused(env: Env) -> None:
    bad = _ops([{"op": "replace", "path": "/spec/replicas", "value": -1}])
    env.register("MutatingWebhookConfiguration",
                 env.webhook("negative.w13.example.com", f"/patch/ops={bad}", rules=SCALE_RULE))
    env.chain.kubectl("create", "-f", "-", input=deployment("neg", env.ns, 1))
    err = _scale_until(env, "neg", 2, lambda p: p.stderr if p.returncode else None, "the invalid Scale refused")
    assert 'The Scale "neg" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0' in err
    assert _replicas(env.chain, env.ns, "neg") == 1
    status, body = env.chain.json("PATCH", f"/apis/apps/v1/namespaces/{env.ns}/deployments/neg/scale",
                                  {"spec": {"replicas": 5}},
                                  headers={"Content-Type": "application/merge-patch+json"})
    assert status == 422, body
    assert body["message"] == ('Scale.autoscaling "neg" is invalid: spec.replicas: Invalid value: -1: '
                               "must be greater than or equal to 0")
    assert body["reason"] == "Invalid" and body["details"] == {
        "name": "neg", "group": "autoscaling", "kind": "Scale",
        "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value: -1: must be greater than or equal to 0",
                    "field": "spec.replicas"}]}


def test_validating_admission_policy_on_deployments_scale(env: Env) -> None:
    name = f"scale-max-{uuid.uuid4().hex[:6]}"
    policy = vap(name, {
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                "operations": ["UPDATE"], "resources": ["deployments/scale"]}]},
        "validations": [{"expression": "object.kind != 'Scale' || object.spec.replicas <= 4",
                         "messageExpression": "'at most 4 replicas, got ' + string(object.spec.replicas)"},
                        {"expression": "request.subResource == 'scale' && oldObject.kind == 'Scale'"}]})
    bound = binding(f"{name}-binding", name, ["Deny"])
    bound["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {"w13-test": env.ns}}}
    apply(env.chain, policy, bound)
    try:
        env.chain.kubectl("create", "-f", "-", input=deployment("vapped", env.ns, 1))
        cause = (f"ValidatingAdmissionPolicy '{name}' with binding '{name}-binding' denied request: "
                 "at most 4 replicas, got 6")
        err = _scale_until(env, "vapped", 5, lambda p: p.stderr if p.returncode and "got 6" in p.stderr else None,
                           "the policy denying the scale")
        assert f'The deployments "vapped" is invalid: : {cause}' in err  # kubectl's text of kube's 422
        status, body = env.chain.json("PATCH", f"/apis/apps/v1/namespaces/{env.ns}/deployments/vapped/scale",
                                      {"spec": {"replicas": 6}},
                                      headers={"Content-Type": "application/merge-patch+json"})
        assert status == 422 and body["message"] == f'deployments.apps "vapped" is forbidden: {cause}', body
        assert _replicas(env.chain, env.ns, "vapped") == 1
        env.chain.kubectl("scale", "deployment", "vapped", "-n", env.ns, "--replicas=4")
        assert _replicas(env.chain, env.ns, "vapped") == 4
        # a write of the Deployment itself is not a deployments/scale request
        env.chain.kubectl("patch", "deployment", "vapped", "-n", env.ns, "--type=merge",
                          "-p", '{"spec":{"replicas":9}}')
        assert _replicas(env.chain, env.ns, "vapped") == 9
    finally:
        cleanup(env.chain, name)


def _scalable_crd(group: str) -> str:
    schema = {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}}
    return json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"crowds.{group}"},
        "spec": {"group": group, "scope": "Namespaced", "names": {"kind": "Crowd", "plural": "crowds"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema, "subresources": {
                     "status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                             "statusReplicasPath": ".status.replicas"}}}]}})


def test_custom_resource_scale_is_admitted_as_a_scale(env: Env, chain: ChainHandle) -> None:
    group = "w13-crowds.example.com"
    establish(chain, _scalable_crd(group), f"crowds.{group}")
    env.hook.requests(clear=True)
    cap = _ops([{"op": "replace", "path": "/spec/replicas", "value": 2}])
    env.register("MutatingWebhookConfiguration", env.webhook("crowd.w13.example.com", f"/patch/ops={cap}", rules=[
        {"operations": ["UPDATE"], "apiGroups": [group], "apiVersions": ["v1"], "resources": ["crowds/scale"]}]))
    base = f"/apis/{group}/v1/namespaces/{env.ns}/crowds"
    status, body = chain.json("POST", base, {"apiVersion": f"{group}/v1", "kind": "Crowd",
                                              "metadata": {"name": "c1"}, "spec": {"replicas": 1}})
    assert status == 201, body

    def capped() -> Any:
        chain.kubectl("scale", f"crowds.{group}", "c1", "-n", env.ns, "--replicas=7")
        _, obj = chain.json("GET", f"{base}/c1")
        return obj["spec"]["replicas"] == 2 or None

    eventually(capped, 20, "the custom resource's replicas capped by the scale webhook")
    request = reviews(env.hook, "patch")[-1]["request"]
    assert request["resource"] == {"group": group, "version": "v1", "resource": "crowds"}
    assert request["subResource"] == "scale" and request["kind"]["kind"] == "Scale"
    assert request["object"]["apiVersion"] == "autoscaling/v1" and request["oldObject"]["kind"] == "Scale"
    chain.kubectl("delete", "crd", f"crowds.{group}", "--wait=false")


def test_scale_kind_is_autoscaling_v1(env: Env) -> None:
    env.hook.requests(clear=True)
    env.register("ValidatingWebhookConfiguration", env.webhook(
        "kind.w13.example.com", "/allow", rules=SCALE_RULE,
        matchConditions=[{"name": "scale-kind", "expression": "request.kind.group == 'autoscaling'"}]))
    env.chain.kubectl("create", "-f", "-", input=deployment("kinded", env.ns, 1))
    _scale_until(env, "kinded", 2, lambda p: (p.returncode == 0 and bool(reviews(env.hook, "allow"))) or None,
                 "the scale webhook called (its matchCondition reads request.kind)")
    request = reviews(env.hook, "allow")[-1]["request"]
    scale_kind = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert request["kind"] == scale_kind and request["requestKind"] == scale_kind


def test_scale_options_warnings_and_apply(env: Env) -> None:
    env.hook.requests(clear=True)
    env.register("ValidatingWebhookConfiguration",
                 env.webhook("warn.w13.example.com", "/warn/text=scaled", rules=SCALE_RULE))
    env.chain.kubectl("create", "-f", "-", input=deployment("opts", env.ns, 1))
    path = f"/apis/apps/v1/namespaces/{env.ns}/deployments/opts/scale"

    def warned() -> Any:
        replicas = 2 if _replicas(env.chain, env.ns, "opts") != 2 else 3
        status, headers, data = env.chain.request("PATCH", f"{path}?fieldManager=scaler", raw=json.dumps(
            {"spec": {"replicas": replicas}}).encode(), headers={"Content-Type": "application/merge-patch+json"})
        assert status == 200, data
        return "scaled" in headers.get("warning", "") or None

    eventually(warned, 20, "the scale webhook's warning")
    request = reviews(env.hook, "warn")[-1]["request"]
    assert request["options"] == {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "scaler"}
    # server-side apply to /scale is admitted as a Scale too
    env.hook.requests(clear=True)
    status, _, data = env.chain.request(
        "PATCH", f"{path}?fieldManager=applier&force=true", raw=json.dumps(
            {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "opts"},
             "spec": {"replicas": 5}}).encode(), headers={"Content-Type": "application/apply-patch+yaml"})
    assert status == 200, data
    request = reviews(env.hook, "warn")[-1]["request"]
    assert request["subResource"] == "scale" and request["object"]["kind"] == "Scale"
    assert request["object"]["spec"]["replicas"] == 5 and request["options"]["fieldManager"] == "applier"


def test_custom_resource_scale_under_match_policy_equivalent(env: Env, chain: ChainHandle) -> None:
    """A webhook registered for v1 ``crowds/scale`` is called for a /scale write through v2 (the
    Scale is the same autoscaling/v1 object at every version: nothing to convert)."""
    group = "w13-crowds2.example.com"
    crd = json.loads(_scalable_crd(group))
    second = json.loads(json.dumps(crd["spec"]["versions"][0]))
    second.update(name="v2", storage=False)
    crd["spec"]["versions"].append(second)
    establish(chain, json.dumps(crd), f"crowds.{group}")
    env.hook.requests(clear=True)
    cap = _ops([{"op": "replace", "path": "/spec/replicas", "value": 2}])
    env.register("MutatingWebhookConfiguration", env.webhook("equiv-scale.w13.example.com", f"/patch/ops={cap}", rules=[
        {"operations": ["UPDATE"], "apiGroups": [group], "apiVersions": ["v1"], "resources": ["crowds/scale"]}]))
    status, body = chain.json("POST", f"/apis/{group}/v2/namespaces/{env.ns}/crowds", {
        "apiVersion": f"{group}/v2", "kind": "Crowd", "metadata": {"name": "c2"}, "spec": {"replicas": 1}})
    assert status == 201, body

    def capped() -> Any:
        status, scale = chain.json("PATCH", f"/apis/{group}/v2/namespaces/{env.ns}/crowds/c2/scale",
                                   {"spec": {"replicas": 6}}, headers={"Content-Type": "application/merge-patch+json"})
        assert status == 200, scale
        return scale["spec"]["replicas"] == 2 or None

    eventually(capped, 20, "the v2 scale write capped by the v1 scale webhook")
    request = reviews(env.hook, "patch")[-1]["request"]
    assert request["resource"] == {"group": group, "version": "v1", "resource": "crowds"}
    assert request["requestResource"] == {"group": group, "version": "v2", "resource": "crowds"}
    assert request["object"]["kind"] == "Scale" and request["object"]["apiVersion"] == "autoscaling/v1"
    chain.kubectl("delete", "crd", f"crowds.{group}", "--wait=false")


def test_scale_uid_precondition(chain: ChainHandle) -> None:
    """kube's scaleUpdatedObjectInfo: a Scale naming another object's UID is a 409 Conflict."""
    ns = f"w13-uid-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", ns)
    try:
        chain.kubectl("create", "-f", "-", input=deployment("pinned", ns, 1))
        path = f"/apis/apps/v1/namespaces/{ns}/deployments/pinned/scale"
        status, scale = chain.json("GET", path)
        assert status == 200, scale
        uid = scale["metadata"]["uid"]
        scale["metadata"]["uid"] = "not-the-uid"
        scale["spec"]["replicas"] = 4
        status, body = chain.json("PUT", path, scale)
        assert status == 409, body
        assert body["message"] == ('Operation cannot be fulfilled on deployments/scale.apps "pinned": Precondition '
                                   f"failed: UID in precondition: not-the-uid, UID in object meta: {uid}")
        assert chain.json("GET", path)[1]["spec"]["replicas"] == 1
        scale["metadata"]["uid"] = uid
        status, body = chain.json("PUT", path, scale)
        assert status == 200 and body["spec"]["replicas"] == 4, body
    finally:
        chain.kubectl("delete", "namespace", ns, "--wait=false", check=False)
