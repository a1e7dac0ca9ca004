"""Admission webhooks through the whole chain: configurations registered with kubectl, a real TLS
webhook process (tests/support/admission_webhook.py), writes through core-api and extensions-api.

Every configuration selects the test's own namespace (a label) so nothing else in the session is
affected, and is deleted after the test. Configurations reach the services through watch caches,
so each test first waits until its webhook is in effect.
"""

from __future__ import annotations

import base64
import json
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.admission_webhook import AdmissionWebhook
from support.conversion_webhook import make_pki
from support.procs import ChainHandle, kubectl_params
from support.waiting import eventually
from test_audit import by_id, session_log, wait_events
from test_crds import establish

pytestmark = pytest.mark.integration

SERVICE_NS = "w13-webhooks"
SERVICE_NAME = "admission-hook"
CONFIGMAPS = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdmissionWebhook]:
    pki = make_pki(tmp_path_factory.mktemp("admission-pki"), ["localhost", f"{SERVICE_NAME}.{SERVICE_NS}.svc"],
                   ca_name="admission-webhook-test-ca")
    proc = AdmissionWebhook.start(pki)
    yield proc
    proc.stop()


class Env:
    """One test's namespace and the configurations it registered (removed after the test)."""

    def __init__(self, chain: ChainHandle, hook: AdmissionWebhook) -> None:
        self.chain = chain
        self.hook = hook
        self.ns = f"w13-{uuid.uuid4().hex[:8]}"
        self.configs: list[tuple[str, str]] = []
        chain.kubectl("create", "-f", "-", input=json.dumps({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns, "labels": {"w13-test": self.ns}}}))

    def webhook(self, name: str, path: str = "", *, service: bool = False, rules: list[dict[str, Any]] | None = None,
                **extra: Any) -> dict[str, Any]:
        client: dict[str, Any] = {"caBundle": self.hook.pki.ca_bundle}
        if service:
            client["service"] = {"namespace": SERVICE_NS, "name": SERVICE_NAME, "port": 443, "path": path}
        elif "url" in extra:
            client["url"] = extra.pop("url")
        else:
            client["url"] = self.hook.url(path)
        out: dict[str, Any] = {"name": name, "clientConfig": client, "rules": rules or CONFIGMAPS,
                               "sideEffects": "None", "admissionReviewVersions": ["v1"],
                               "namespaceSelector": {"matchLabels": {"w13-test": self.ns}}}
        out.update(extra)
        return out

    def register(self, kind: str, *webhooks: dict[str, Any], name: str = "", version: str = "") -> str:
        name = name or f"{self.ns}-{kind.lower()[:4]}-{len(self.configs)}"
        self.chain.kubectl("create", "-f", "-", version=version, input=json.dumps({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
            "webhooks": list(webhooks)}))
        self.configs.append((kind, name))
        return name

    def configmap(self, name: str, labels: dict[str, str] | None = None, query: str = "") -> tuple[int, Any]:
        meta: dict[str, Any] = {"name": name}
        if labels:
            meta["labels"] = labels
        return self.chain.json("POST", f"/api/v1/namespaces/{self.ns}/configmaps{query}",
                               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}})

    def cleanup(self) -> None:
        for kind, name in self.configs:
            self.chain.kubectl("delete", kind.lower(), name, "--ignore-not-found", check=False)
        self.chain.kubectl("delete", "namespace", self.ns, "--wait=false", check=False)


@pytest.fixture
def env(chain: ChainHandle, webhook: AdmissionWebhook) -> Iterator[Env]:
    e = Env(chain, webhook)
    yield e
    e.cleanup()


def refused_until(env: Env, expected: int, timeout: float = 15) -> Any:
    """Create ConfigMaps (names unique) until one is refused with ``expected``; that Status."""

    def attempt() -> Any:
        status, body = env.configmap(f"probe-{uuid.uuid4().hex[:6]}")
        if status == expected:
            return body
        assert status == 201, body
        return None

    return eventually(attempt, timeout, f"a create refused with {expected}")


def reviews(hook: AdmissionWebhook, mode: str) -> list[dict[str, Any]]:
    return [r["review"] for r in hook.requests() if r["mode"] == mode]


# -- refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", kubectl_params("1.33", "1.27"))
def test_validating_webhook_denies_with_kubes_message(env: Env, version: str) -> None:
    env.register("ValidatingWebhookConfiguration", env.webhook("deny.w13.example.com", "/deny/message=no%20thanks"),
                 version=version)
    body = refused_until(env, 400)
    assert body["message"] == 'admission webhook "deny.w13.example.com" denied the request: no thanks'
    assert body["code"] == 400 and "reason" not in body
    proc = env.chain.kubectl("create", "configmap", "refused", "-n", env.ns, "--from-literal=a=b", version=version,
                             check=False)
    assert proc.returncode != 0
    assert 'admission webhook "deny.w13.example.com" denied the request: no thanks' in proc.stderr
    # nothing was stored
    assert env.chain.json("GET", f"/api/v1/namespaces/{env.ns}/configmaps/refused")[0] == 404
    proc = env.chain.kubectl("apply", "-f", "-", version=version, check=False, input=json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied", "namespace": env.ns}}))
    assert proc.returncode != 0 and "denied the request: no thanks" in proc.stderr


def test_denial_keeps_the_webhooks_code_and_reason(env: Env) -> None:
    env.register("ValidatingWebhookConfiguration",
                 env.webhook("coded.w13.example.com", "/deny/code=403/reason=Forbidden"),
                 env.webhook("silent.w13.example.com", "/deny/code=200", rules=[{
                     "operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["secrets"]}]))
    body = refused_until(env, 403)
    assert body["reason"] == "Forbidden"
    assert body["message"] == 'admission webhook "coded.w13.example.com" denied the request: Forbidden'

    def secret() -> tuple[int, Any]:
        return env.chain.json("POST", f"/api/v1/namespaces/{env.ns}/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"generateName": "s-"}})

    body = eventually(lambda: (lambda r: r[1] if r[0] == 400 else None)(secret()), 15, "the secret refused")
    assert body["message"] == 'admission webhook "silent.w13.example.com" denied the request without explanation'


# -- mutation -----------------------------------------------------------------------------


def test_mutating_patch_is_applied_then_validated_and_seen_by_validating_webhooks(env: Env) -> None:
    env.hook.requests(clear=True)
    env.register("MutatingWebhookConfiguration", env.webhook("label.w13.example.com", "/label/key=team/value=blue"))
    env.register("ValidatingWebhookConfiguration", env.webhook("look.w13.example.com", "/allow"))

    def labelled() -> Any:
        status, body = env.configmap(f"cm-{uuid.uuid4().hex[:6]}")
        assert status == 201, body
        return body if (body["metadata"].get("labels") or {}).get("team") == "blue" else None

    created = eventually(labelled, 15, "the label patched in")
    name = created["metadata"]["name"]
    stored = env.chain.json("GET", f"/api/v1/namespaces/{env.ns}/configmaps/{name}")[1]
    assert stored["metadata"]["labels"] == {"team": "blue"}
    seen = [r for r in reviews(env.hook, "allow") if (r["request"].get("name") == name)]
    assert seen, "the validating webhook saw the create"
    request = seen[-1]["request"]
    assert request["object"]["metadata"]["labels"] == {"team": "blue"}  # after the mutation
    assert request["operation"] == "CREATE" and request["namespace"] == env.ns
    assert request["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert request["requestKind"] == request["kind"] and request["requestResource"] == request["resource"]
    assert request["oldObject"] is None and request["dryRun"] is False
    assert request["options"]["kind"] == "CreateOptions" and request["options"]["apiVersion"] == "meta.k8s.io/v1"
    assert request["userInfo"]["username"] == "kubernetes-admin" or request["userInfo"]["username"]
    # A patch that breaks validation is refused by the strategy afterwards (nothing stored).
    ops = base64.urlsafe_b64encode(json.dumps([{"op": "add", "path": "/metadata/labels",
                                                "value": {"bad key!": "x"}}]).encode()).decode()
    env.register("MutatingWebhookConfiguration", env.webhook("breaker.w13.example.com", f"/patch/ops={ops}",
                                                             objectSelector={"matchLabels": {"break": "yes"}}))

    def broken() -> Any:
        status, body = env.configmap("breakme", labels={"break": "yes"})
        if status == 201:
            env.chain.kubectl("delete", "configmap", "breakme", "-n", env.ns)
            return None
        return body

    body = eventually(broken, 15, "the broken patch refused")
    assert body["code"] == 422 and body["reason"] == "Invalid" and "metadata.labels" in body["message"]
    assert env.chain.json("GET", f"/api/v1/namespaces/{env.ns}/configmaps/breakme")[0] == 404


def test_webhook_by_service_reference(env: Env, chain: ChainHandle) -> None:
    chain.kubectl("create", "namespace", SERVICE_NS, check=False)
    chain.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE_NAME, "namespace": SERVICE_NS},
         "spec": {"ports": [{"port": 443, "targetPort": env.hook.port}]}},
        {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": SERVICE_NAME, "namespace": SERVICE_NS},
         "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": env.hook.port}]}]}]}))
    env.register("MutatingWebhookConfiguration",
                 env.webhook("svc.w13.example.com", "/label", service=True))

    def labelled() -> Any:
        status, body = env.configmap(f"cm-{uuid.uuid4().hex[:6]}")
        assert status == 201, body
        return (body["metadata"].get("labels") or {}).get("webhook") == "was-here"

    eventually(labelled, 20, "the service-backed webhook called")


def test_reinvocation_if_needed(env: Env) -> None:
    env.hook.requests(clear=True)
    # Configurations run in name order: "a" adds its label, then "b" adds another; "a" asked to be
    # reinvoked if needed, so it sees the object again with b's label.
    env.register("MutatingWebhookConfiguration",
                 env.webhook("a.w13.example.com", "/label/key=a/value=1", reinvocationPolicy="IfNeeded"),
                 name=f"{env.ns}-a")
    env.register("MutatingWebhookConfiguration", env.webhook("b.w13.example.com", "/label/key=b/value=2"),
                 name=f"{env.ns}-b")

    def both() -> Any:
        status, body = env.configmap(f"cm-{uuid.uuid4().hex[:6]}")
        assert status == 201, body
        labels = body["metadata"].get("labels") or {}
        return body if labels == {"a": "1", "b": "2"} else None

    name = eventually(both, 15, "both labels")["metadata"]["name"]
    calls = [(r["mode"], r["query"].get("key")) for r in env.hook.requests()
             if r["review"].get("request", {}).get("name") == name]
    assert calls == [("label", "a"), ("label", "b"), ("label", "a")]


# -- warnings, dry-run, deletes, updates, subresources ------------------------------------------


def test_warnings_reach_the_client(env: Env) -> None:
    env.register("ValidatingWebhookConfiguration", env.webhook("warn.w13.example.com", "/warn/text=mind%20the%20gap"))

    def warned() -> Any:
        status, headers, _ = env.chain.request("POST", f"/api/v1/namespaces/{env.ns}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "w-"}})
        assert status == 201
        return headers.get("warning")

    assert eventually(warned, 15, "a warning") == '299 - "mind the gap"'
    proc = env.chain.kubectl("create", "configmap", "warned", "-n", env.ns)
    assert "Warning: mind the gap" in proc.stderr


def test_audit_annotations_join_the_requests_audit_event(env: Env) -> None:
    env.register("ValidatingWebhookConfiguration", env.webhook("audited.w13.example.com", "/warn/text=noted"))
    log = session_log(env.chain)
    deadline = time.monotonic() + 30
    while True:  # the configuration takes effect once the services' watch caches have it
        audit_id = f"w13-{uuid.uuid4()}"
        status, headers, _ = env.chain.request("POST", f"/api/v1/namespaces/{env.ns}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "a-"}},
            headers={"Audit-ID": audit_id})
        assert status == 201
        if headers.get("warning") == '299 - "noted"':
            break
        assert time.monotonic() < deadline, "the webhook never took effect"
        time.sleep(0.3)
    [event] = wait_events(log, by_id(audit_id))
    assert event["annotations"]["audited.w13.example.com/checked"] == "yes"


def _audited_create(env: Env, until: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    """POST ConfigMaps (generateName) with an Audit-ID until the request's audit event satisfies ``until``."""
    log = session_log(env.chain)
    deadline = time.monotonic() + 30
    while True:  # configurations take effect once the services' watch caches have them
        audit_id = f"w13-{uuid.uuid4()}"
        status, _, _ = env.chain.request("POST", f"/api/v1/namespaces/{env.ns}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "a-"}},
            headers={"Audit-ID": audit_id})
        assert status == 201
        [event] = wait_events(log, by_id(audit_id))
        if until(event):
            return event
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def test_kubes_mutation_and_failed_open_audit_annotations(env: Env) -> None:
    port = _closed_port()
    mutating = env.register("MutatingWebhookConfiguration",
                            env.webhook("stamp.w13.example.com", "/label/key=stamp/value=1"),
                            env.webhook("same.w13.example.com", "/allow"),
                            env.webhook("down-m.w13.example.com", url=f"https://127.0.0.1:{port}/m",
                                        failurePolicy="Ignore"))
    env.register("ValidatingWebhookConfiguration",
                 env.webhook("down-v.w13.example.com", url=f"https://127.0.0.1:{port}/v", failurePolicy="Ignore"))

    def mutations(event: dict[str, Any]) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in event.get("annotations", {}).items()
                if k.startswith("mutation.webhook.admission.k8s.io/round_0_index_")}

    event = _audited_create(env, lambda e: len(mutations(e)) == 3
                            and "failed-open.validating.webhook.admission.k8s.io/round_0_index_0" in e["annotations"],
                            "kube's webhook annotations")
    found = sorted(mutations(event).values(), key=lambda v: v["webhook"])
    assert found == [{"configuration": mutating, "webhook": "down-m.w13.example.com", "mutated": False},
                     {"configuration": mutating, "webhook": "same.w13.example.com", "mutated": False},
                     {"configuration": mutating, "webhook": "stamp.w13.example.com", "mutated": True}]
    annotations = event["annotations"]
    # the value's field order is kube's (Go struct order)
    key = next(k for k, v in annotations.items() if k.startswith("mutation.") and "stamp.w13" in v)
    assert annotations[key] == json.dumps({"configuration": mutating, "webhook": "stamp.w13.example.com",
                                           "mutated": True}, separators=(",", ":"))
    failed_open = [k for k, v in annotations.items() if v == "down-m.w13.example.com"]
    assert len(failed_open) == 1
    assert failed_open[0].startswith("failed-open.mutation.webhook.admission.k8s.io/round_0_index_")
    assert failed_open[0].rsplit("_", 1)[1] == mutations_index(annotations, "down-m.w13.example.com")
    assert annotations["failed-open.validating.webhook.admission.k8s.io/round_0_index_0"] == "down-v.w13.example.com"
    # The stamp webhook's JSONPatch is kube's Request-level patch.webhook annotation: a Metadata event
    # (the default policy's level for ConfigMaps) never shows it.
    assert event["level"] == "Metadata"
    assert [k for k in annotations if k.startswith("patch.webhook.admission.k8s.io/")] == []


def mutations_index(annotations: dict[str, str], webhook: str) -> str:
    key = next(k for k, v in annotations.items() if k.startswith("mutation.") and json.loads(v)["webhook"] == webhook)
    return key.rsplit("_", 1)[1]


def test_a_webhook_accepting_only_v1beta1_gets_a_v1beta1_review(env: Env) -> None:
    env.hook.requests(clear=True)
    env.register("ValidatingWebhookConfiguration", env.webhook("beta.w13.example.com", "/allow",
                                                               admissionReviewVersions=["v1beta1"]))
    eventually(lambda: env.configmap(f"b-{uuid.uuid4().hex[:5]}")[0] == 201 and reviews(env.hook, "allow"), 15,
               "the webhook called")
    review = reviews(env.hook, "allow")[-1]
    assert review["apiVersion"] == "admission.k8s.io/v1beta1" and review["kind"] == "AdmissionReview"
    assert review["request"]["operation"] == "CREATE" and review["request"]["uid"]


def test_dry_run_reaches_side_effect_free_webhooks_only(env: Env) -> None:
    env.hook.requests(clear=True)
    env.register("ValidatingWebhookConfiguration", env.webhook("dry.w13.example.com", "/allow",
                                                               sideEffects="NoneOnDryRun"))
    eventually(lambda: env.configmap(f"c-{uuid.uuid4().hex[:5]}")[0] == 201 and reviews(env.hook, "allow"), 15,
               "the webhook called")
    status, _ = env.configmap("dry", query="?dryRun=All")
    assert status == 201
    request = [r for r in reviews(env.hook, "allow") if r["request"].get("name") == "dry"][-1]["request"]
    assert request["dryRun"] is True and request["options"]["dryRun"] == ["All"]
    assert env.chain.json("GET", f"/api/v1/namespaces/{env.ns}/configmaps/dry")[0] == 404


def test_delete_sees_the_old_object_and_can_be_refused(env: Env) -> None:
    env.hook.requests(clear=True)
    rules = [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]
    env.register("ValidatingWebhookConfiguration", env.webhook("keep.w13.example.com", "/deny-label/key=keep",
                                                               rules=rules))
    assert env.configmap("kept", labels={"keep": "yes"})[0] == 201
    assert env.configmap("gone")[0] == 201

    def refused() -> Any:
        status, body = env.chain.json("DELETE", f"/api/v1/namespaces/{env.ns}/configmaps/kept")
        return body if status == 400 else None

    body = eventually(refused, 15, "the delete refused")
    assert body["message"] == 'admission webhook "keep.w13.example.com" denied the request: label keep is not allowed'
    assert env.chain.json("GET", f"/api/v1/namespaces/{env.ns}/configmaps/kept")[0] == 200
    env.chain.kubectl("delete", "configmap", "gone", "-n", env.ns)
    request = [r for r in reviews(env.hook, "deny-label") if r["request"].get("name") == "gone"][-1]["request"]
    assert request["operation"] == "DELETE" and request["object"] is None
    assert request["oldObject"]["metadata"]["name"] == "gone"
    assert request["options"]["kind"] == "DeleteOptions"


def test_updates_and_status_subresource(env: Env) -> None:
    env.hook.requests(clear=True)
    env.register("ValidatingWebhookConfiguration", env.webhook(
        "status.w13.example.com", "/deny/message=status%20is%20mine",
        rules=[{"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
                "resources": ["deployments/status"]}]),
        env.webhook("update.w13.example.com", "/allow", rules=[{
            "operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]))
    env.chain.kubectl("create", "deployment", "web", "--image=nginx", "-n", env.ns)

    def status_refused() -> Any:
        proc = env.chain.kubectl("patch", "deployment", "web", "-n", env.ns, "--subresource=status", "--type=merge",
                                 "-p", '{"status":{"observedGeneration":1}}', check=False)
        return proc.stderr if proc.returncode else None

    err = eventually(status_refused, 15, "the status patch refused")
    assert 'admission webhook "status.w13.example.com" denied the request: status is mine' in err
    env.chain.kubectl("label", "deployment", "web", "-n", env.ns, "tier=front")  # the object itself: allowed
    request = [r for r in reviews(env.hook, "allow")][-1]["request"]
    assert request["operation"] == "UPDATE" and "subResource" not in request
    assert request["object"]["metadata"]["labels"]["tier"] == "front"
    assert "tier" not in (request["oldObject"]["metadata"].get("labels") or {})
    assert request["options"]["kind"] == "UpdateOptions"
    status_request = reviews(env.hook, "deny")[-1]["request"]
    assert status_request["subResource"] == "status" and status_request["requestSubResource"] == "status"


def test_object_selector_and_match_conditions(env: Env) -> None:
    env.register("ValidatingWebhookConfiguration",
                 env.webhook("selected.w13.example.com", "/deny/message=selected",
                             objectSelector={"matchExpressions": [{"key": "guard", "operator": "Exists"}]}),
                 env.webhook("conditioned.w13.example.com", "/deny/message=conditioned",
                             matchConditions=[{"name": "prefix",
                                               "expression": "object.metadata.name.startsWith('cond-')"}]))

    def refused(name: str, labels: dict[str, str] | None = None) -> Any:
        status, body = env.configmap(name, labels)
        if status == 201:
            env.chain.kubectl("delete", "configmap", name, "-n", env.ns)
            return None
        return body["message"]

    assert eventually(lambda: refused("guarded", {"guard": "1"}), 15) == \
        'admission webhook "selected.w13.example.com" denied the request: selected'
    assert eventually(lambda: refused("cond-x"), 15) == \
        'admission webhook "conditioned.w13.example.com" denied the request: conditioned'
    assert env.configmap("free")[0] == 201


# -- failures -------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_webhook_follows_the_failure_policy(env: Env) -> None:
    port = _closed_port()
    url = f"https://127.0.0.1:{port}/check"
    env.register("ValidatingWebhookConfiguration", env.webhook("down.w13.example.com", url=url))
    body = refused_until(env, 500)
    assert body["reason"] == "InternalError"
    assert body["message"] == (
        'Internal error occurred: failed calling webhook "down.w13.example.com": failed to call webhook: '
        f'Post "https://127.0.0.1:{port}/check?timeout=10s": dial tcp 127.0.0.1:{port}: connect: connection refused')
    env.chain.kubectl("patch", "validatingwebhookconfiguration", env.configs[-1][1], "--type=json",
                      "-p", '[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]')
    eventually(lambda: env.configmap(f"ok-{uuid.uuid4().hex[:5]}")[0] == 201, 15, "failing open")


def test_slow_webhook_is_cut_at_its_timeout(env: Env) -> None:
    env.register("ValidatingWebhookConfiguration",
                 env.webhook("slow.w13.example.com", "/sleep/seconds=6", timeoutSeconds=1))
    started = time.monotonic()
    body = refused_until(env, 500, timeout=30)
    assert time.monotonic() - started < 25
    assert body["message"] == (
        'Internal error occurred: failed calling webhook "slow.w13.example.com": failed to call webhook: '
        f'Post "{env.hook.url("/sleep/seconds=6")}?timeout=1s": context deadline exceeded')
    began = time.monotonic()
    status, _ = env.configmap("late")
    assert status == 500 and time.monotonic() - began < 4


BAD_RESPONSES = [
    ("/junk", "failed to call webhook: couldn't get version/kind; json parse error: "
              "invalid character 'h' in literal true (expecting 'r')"),
    ("/wrong-uid", "received invalid webhook response: expected response.uid="),
    ("/wrong-version", "received invalid webhook response: expected webhook response of admission.k8s.io/v1, "
                       "Kind=AdmissionReview, got admission.k8s.io/v1beta1, Kind=AdmissionReview"),
    ("/no-response", "received invalid webhook response: webhook response was absent"),
    ("/error-500", 'failed to call webhook: an error on the server ("boom") has prevented the request from '
                   "succeeding"),
    ("/label", "received invalid webhook response: validating webhook may not return response.patchType"),
]


@pytest.mark.parametrize(("path", "message"), BAD_RESPONSES)
def test_bad_webhook_responses(env: Env, path: str, message: str) -> None:
    env.register("ValidatingWebhookConfiguration", env.webhook("bad.w13.example.com", path))
    body = refused_until(env, 500)
    prefix = 'Internal error occurred: failed calling webhook "bad.w13.example.com": '
    assert body["message"].startswith(prefix + message), body["message"]


def test_mutating_patch_may_not_move_the_object(env: Env) -> None:
    ops = base64.urlsafe_b64encode(json.dumps([{"op": "replace", "path": "/metadata/namespace",
                                                "value": "default"}]).encode()).decode()
    env.register("MutatingWebhookConfiguration", env.webhook("mover.w13.example.com", f"/patch/ops={ops}"))
    body = refused_until(env, 400)
    assert body["message"] == "the namespace of the provided object does not match the namespace sent on the request"


def test_mutating_patch_removing_metadata_is_refused_by_validation(env: Env) -> None:
    ops = base64.urlsafe_b64encode(json.dumps([{"op": "remove", "path": "/metadata"}]).encode()).decode()
    env.register("MutatingWebhookConfiguration", env.webhook("wiper.w13.example.com", f"/patch/ops={ops}"))
    body = refused_until(env, 422)
    # kube: the namespace is filled in from the request again, the name is gone (nothing stored)
    assert body["reason"] == "Invalid"
    assert body["message"] == 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
    assert body["details"]["causes"] == [{"reason": "FieldValueRequired", "message":
                                          "Required value: name or generateName is required",
                                          "field": "metadata.name"}]
    listed = env.chain.json("GET", f"/api/v1/namespaces/{env.ns}/configmaps")[1]
    assert [i["metadata"]["name"] for i in listed["items"]] == ["kube-root-ca.crt"]  # the root CA controller's


def test_generate_name_creates_reach_webhooks_with_the_requests_empty_name(env: Env) -> None:
    """kube's admission attributes keep the name the request gave: "" for a generateName create,
    while the validating webhooks' object carries the generated name."""
    env.hook.requests(clear=True)
    env.register("MutatingWebhookConfiguration", env.webhook("named.w13.example.com", "/label/key=m/value=1"))
    env.register("ValidatingWebhookConfiguration", env.webhook("seen.w13.example.com", "/allow"))

    def generated() -> Any:
        status, body = env.chain.json("POST", f"/api/v1/namespaces/{env.ns}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}})
        assert status == 201, body
        return body if (body["metadata"].get("labels") or {}).get("m") == "1" else None

    made = eventually(generated, 15, "the mutating webhook in effect")
    name = made["metadata"]["name"]
    assert name.startswith("gen-") and len(name) == len("gen-") + 5

    def validated() -> Any:
        found = [r["request"] for r in reviews(env.hook, "allow")
                 if (r["request"].get("object") or {}).get("metadata", {}).get("name") == name]
        return found[-1] if found else None

    request = eventually(validated, 15, "the validating webhook called for the generated object")
    # AdmissionRequest.name is omitempty: an empty name is left out of the review
    assert "name" not in request and request["namespace"] == env.ns
    assert request["object"]["metadata"]["generateName"] == "gen-"
    mutated = [r["review"]["request"] for r in env.hook.requests() if r["mode"] == "label"][-1]
    assert "name" not in mutated and "name" not in mutated["object"]["metadata"]


# -- custom resources -------------------------------------------------------------------------


def _crd(group: str) -> str:
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}
    return json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced", "names": {"kind": "Gadget", "plural": "gadgets"},
                 "conversion": {"strategy": "None"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema},
                              {"name": "v2", "served": True, "storage": False, "schema": schema}]}})


def test_custom_resources_and_match_policy(env: Env, chain: ChainHandle) -> None:
    group = "w13-gadgets.example.com"
    establish(chain, _crd(group), f"gadgets.{group}")
    env.hook.requests(clear=True)
    v1_only = [{"operations": ["CREATE"], "apiGroups": [group], "apiVersions": ["v1"], "resources": ["gadgets"]}]
    env.register("MutatingWebhookConfiguration",
                 env.webhook("equiv.w13.example.com", "/label/key=seen/value=equivalent", rules=v1_only),
                 env.webhook("exact.w13.example.com", "/label/key=exact/value=yes", rules=v1_only,
                             matchPolicy="Exact"))

    def create(version: str) -> dict[str, Any]:
        status, body = chain.json("POST", f"/apis/{group}/{version}/namespaces/{env.ns}/gadgets", {
            "apiVersion": f"{group}/{version}", "kind": "Gadget", "metadata": {"generateName": "g-"},
            "spec": {"size": 1}})
        assert status == 201, body
        out: dict[str, Any] = body
        return out

    eventually(lambda: (create("v1")["metadata"].get("labels") or {}).get("exact") == "yes", 15, "the CR webhook")
    made = create("v2")  # reaches the v1 webhook under Equivalent, converted; not the Exact one
    assert made["apiVersion"] == f"{group}/v2"
    assert made["metadata"]["labels"] == {"seen": "equivalent"}
    request = [r["review"]["request"] for r in env.hook.requests()
               if r["review"]["request"].get("object", {}).get("metadata", {}).get("generateName") == "g-"][-1]
    assert request["kind"] == {"group": group, "version": "v1", "kind": "Gadget"}
    assert request["requestKind"] == {"group": group, "version": "v2", "kind": "Gadget"}
    assert request["requestResource"]["version"] == "v2" and request["object"]["apiVersion"] == f"{group}/v1"
    chain.kubectl("delete", "crd", f"gadgets.{group}", "--wait=false")


@pytest.mark.parametrize("version", kubectl_params("1.33", "1.27"))
def test_configurations_are_validated_as_kube(chain: ChainHandle, version: str) -> None:
    proc = chain.kubectl("create", "-f", "-", version=version, check=False, input=json.dumps({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "w13-invalid"},
        "webhooks": [{"name": "short", "clientConfig": {"url": "http://hooks.example.com/x?y=1"},
                      "sideEffects": "Some", "timeoutSeconds": 40, "admissionReviewVersions": ["v1"]}]}))
    assert proc.returncode != 0
    err = proc.stderr
    assert 'The ValidatingWebhookConfiguration "w13-invalid" is invalid' in err
    for part in ('webhooks[0].name: Invalid value: "short": should be a domain with at least three segments '
                 "separated by dots",
                 'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"',
                 "webhooks[0].timeoutSeconds: Invalid value: 40: the timeout value must be between 1 and 30 seconds",
                 "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme"
                 "; desired format: https://host[/path]"):
        assert part.replace('\\"', '"') in err, (part, err)
