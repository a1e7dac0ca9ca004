"""The CEL ``authorizer`` of a ValidatingAdmissionPolicy on a custom resource (admitted in extensions-api)
answers with the chain's authorization, for the requesting user, as kube-apiserver's does: under RBAC (the
session's chain) a user whose RoleBinding allows ``delete`` on the widgets is admitted and one whose does
not is denied with kube's message; a chain started with ``--authorization-mode=AlwaysAllow`` admits
everyone. Policies here are bound only in namespaces labelled ``vap-authz-it``, so other tests sharing the
session's chain never meet them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.admission_webhook import AdmissionWebhook
from support.conversion_webhook import make_pki
from support.procs import ChainHandle, start_chain
from support.waiting import eventually

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration

GROUP = "vapauthz.example.com"
LABEL = "vap-authz-it"
POLICY = "widget-deleters-only"

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {"type": "object", "properties": {
                     "size": {"type": "integer"}}}}}}}]}}

#: May the requesting user delete widgets in the object's namespace? And a rule that does not ask the
#: authorizer, so a run where the policy never took effect cannot pass as "allowed".
POLICY_OBJ = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": POLICY},
    "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [GROUP], "apiVersions": ["*"],
                                                     "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}]},
             "validations": [
                 {"expression": f"authorizer.group('{GROUP}').resource('widgets')"
                                ".namespace(object.metadata.namespace).check('delete').allowed()",
                  "messageExpression": "request.userInfo.username + ' may not delete widgets'",
                  "reason": "Forbidden"},
                 {"expression": "!has(object.spec.size) || object.spec.size <= 10", "message": "widgets are small"}]}}

BINDING = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
    "metadata": {"name": f"{POLICY}-binding"},
    "spec": {"policyName": POLICY, "validationActions": ["Deny"],
             "matchResources": {"namespaceSelector": {"matchLabels": {LABEL: "yes"}}}}}


def widget(name: str, ns: str, size: int = 1) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name, "namespace": ns},
            "spec": {"size": size}}


def cause(user: str) -> str:
    return f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}-binding' denied request: " \
           f"{user} may not delete widgets"


def install(chain: ChainHandle) -> str:
    """The CRD, the policy and its binding, and a labelled namespace; the namespace's name."""
    chain.kubectl("apply", "-f", "-", input=json.dumps(CRD))
    chain.kubectl("wait", "--for", "condition=Established", f"crd/widgets.{GROUP}", "--timeout=30s")
    chain.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                         "items": [POLICY_OBJ, BINDING]}))
    ns = f"vapauthz-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", ns)
    chain.kubectl("label", "namespace", ns, f"{LABEL}=yes")
    return ns


def uninstall(chain: ChainHandle, ns: str) -> None:
    chain.kubectl("delete", "validatingadmissionpolicybinding", f"{POLICY}-binding", "--ignore-not-found",
                  check=False)
    chain.kubectl("delete", "validatingadmissionpolicy", POLICY, "--ignore-not-found", check=False)
    chain.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false", check=False)
    chain.kubectl("delete", "crd", f"widgets.{GROUP}", "--ignore-not-found", "--wait=false", check=False)


def create(chain: ChainHandle, obj: dict[str, Any], user: str, dry_run: bool = False) -> tuple[int, Any]:
    query = "?dryRun=All" if dry_run else ""
    ns = obj["metadata"]["namespace"]
    return chain.json("POST", f"/apis/{GROUP}/v1/namespaces/{ns}/widgets{query}", obj,
                      headers={"Impersonate-User": user})


def forbidden_body(name: str, user: str) -> dict[str, Any]:
    """kube-apiserver's Status for a policy validation with reason Forbidden on a custom resource."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'widgets.{GROUP} "{name}" is forbidden: {cause(user)}', "reason": "Forbidden",
            "details": {"name": name, "group": GROUP, "kind": "widgets", "causes": [{"message": cause(user)}]},
            "code": 403}


def grant(chain: ChainHandle, ns: str) -> None:
    """alice may create and delete widgets in ``ns``; bob may only create them."""
    chain.kubectl("create", "role", "widget-admin", "-n", ns, "--verb=create,delete,get",
                  f"--resource=widgets.{GROUP}")
    chain.kubectl("create", "role", "widget-maker", "-n", ns, "--verb=create,get", f"--resource=widgets.{GROUP}")
    chain.kubectl("create", "rolebinding", "alice-widgets", "-n", ns, "--role=widget-admin", "--user=alice")
    chain.kubectl("create", "rolebinding", "bob-widgets", "-n", ns, "--role=widget-maker", "--user=bob")


@pytest.fixture(scope="module")
def rbac_ns(chain: ChainHandle) -> Iterator[str]:
    ns = install(chain)
    grant(chain, ns)
    yield ns
    uninstall(chain, ns)


def test_rbac_denies_the_user_not_bound_to_delete_and_admits_the_one_who_is(chain: ChainHandle,
                                                                             rbac_ns: str) -> None:
    ns = rbac_ns

    def bob_denied() -> Any:
        status, body = create(chain, widget("by-bob", ns), "bob", dry_run=True)
        return body if status == 403 and cause("bob") in body.get("message", "") else None
    eventually(bob_denied, timeout=30, what="bob's widget denied by the policy's authorizer check")

    status, body = create(chain, widget("by-bob", ns), "bob")
    assert (status, body) == (403, forbidden_body("by-bob", "bob"))
    proc = chain.kubectl("create", "-f", "-", "--as=bob", input=json.dumps(widget("by-bob", ns)), check=False)
    assert proc.returncode == 1
    assert "Error from server (Forbidden)" in proc.stderr
    assert f'widgets.{GROUP} "by-bob" is forbidden: {cause("bob")}' in proc.stderr
    assert chain.kubectl("get", f"widgets.{GROUP}", "by-bob", "-n", ns, check=False).returncode == 1  # not stored

    def alice_admitted() -> Any:
        status, body = create(chain, widget("by-alice", ns), "alice", dry_run=True)
        return body if status == 201 else None
    eventually(alice_admitted, timeout=30, what="alice's widget admitted (her RoleBinding allows delete)")
    chain.kubectl("create", "-f", "-", "--as=alice", input=json.dumps(widget("by-alice", ns)))
    got = json.loads(chain.kubectl("get", f"widgets.{GROUP}", "by-alice", "-n", ns, "-o", "json").stdout)
    assert got["spec"] == {"size": 1}
    # The other rule still applies to alice: the authorizer check is one validation among others.
    status, body = create(chain, widget("huge", ns, size=50), "alice")
    assert status == 422 and body["message"].endswith("denied request: widgets are small")

    # system:masters (the admin's kubeconfig) may do anything: admitted without a binding.
    chain.kubectl("create", "-f", "-", input=json.dumps(widget("by-admin", ns)))


def test_a_new_binding_changes_the_answer(chain: ChainHandle, rbac_ns: str) -> None:
    """The authorizer reads RBAC from watch caches: granting carol delete admits her, without a restart."""
    ns = rbac_ns
    chain.kubectl("create", "rolebinding", "carol-makes", "-n", ns, "--role=widget-maker", "--user=carol")

    def carol_denied() -> Any:
        status, body = create(chain, widget("by-carol", ns), "carol", dry_run=True)
        return body if status == 403 and cause("carol") in body.get("message", "") else None
    eventually(carol_denied, timeout=30, what="carol denied while she may not delete widgets")
    chain.kubectl("create", "rolebinding", "carol-deletes", "-n", ns, "--role=widget-admin", "--user=carol")

    def carol_admitted() -> Any:
        status, body = create(chain, widget("by-carol", ns), "carol")
        return body if status == 201 else None
    eventually(carol_admitted, timeout=30, what="carol admitted once a RoleBinding lets her delete widgets")


def test_service_account_checks_ask_rbac_for_that_service_account(chain: ChainHandle, rbac_ns: str) -> None:
    """``authorizer.serviceAccount(ns, name)`` asks about that service account (kube's
    ``system:serviceaccount:<ns>:<name>`` in its groups), whoever makes the request."""
    ns = f"vapauthz-sa-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", ns)
    chain.kubectl("label", "namespace", ns, f"vapauthz-sa={ns}")
    grant(chain, ns)
    name = f"{ns}-robot"
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": name},
              "spec": {"matchConstraints": POLICY_OBJ["spec"]["matchConstraints"],
                       "validations": [{"expression": "authorizer.serviceAccount(object.metadata.namespace, 'robot')"
                                                      f".group('{GROUP}').resource('widgets')"
                                                      ".namespace(object.metadata.namespace).check('delete')"
                                                      ".allowed()",
                                        "message": "robot may not delete widgets"}]}}
    bound = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
             "metadata": {"name": f"{name}-binding"},
             "spec": {"policyName": name, "validationActions": ["Deny"],
                      "matchResources": {"namespaceSelector": {"matchLabels": {"vapauthz-sa": ns}}}}}
    chain.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [policy, bound]}))
    try:
        message = (f'widgets.{GROUP} "by-alice" is forbidden: ValidatingAdmissionPolicy \'{name}\' with binding '
                   f"'{name}-binding' denied request: robot may not delete widgets")

        def denied() -> Any:
            status, body = create(chain, widget("by-alice", ns), "alice", dry_run=True)
            return body if status == 422 and body.get("message") == message else None
        eventually(denied, timeout=30, what="alice's widget denied: the robot may not delete widgets")
        # alice may delete widgets herself: the check is about the robot, not the requester.
        chain.kubectl("create", "rolebinding", "robot-widgets", "-n", ns, "--role=widget-admin",
                      f"--serviceaccount={ns}:robot")

        def admitted() -> Any:
            status, body = create(chain, widget("by-alice", ns), "alice")
            return body if status == 201 else None
        eventually(admitted, timeout=30, what="alice's widget admitted once the robot may delete widgets")
    finally:
        chain.kubectl("delete", "validatingadmissionpolicybinding", f"{name}-binding", "--ignore-not-found",
                      check=False)
        chain.kubectl("delete", "validatingadmissionpolicy", name, "--ignore-not-found", check=False)
        chain.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdmissionWebhook]:
    pki = make_pki(tmp_path_factory.mktemp("vapauthz-webhook-pki"), ["localhost"], ca_name="vapauthz-webhook-ca")
    proc = AdmissionWebhook.start(pki)
    yield proc
    proc.stop()


def users_seen(webhook: AdmissionWebhook, ns: str) -> list[str]:
    """Who the webhook was asked about in ``ns`` since the last call (the log is cleared)."""
    return [r["review"]["request"]["userInfo"]["username"] for r in webhook.requests(clear=True)
            if r["review"]["request"].get("namespace") == ns]


def test_webhook_match_conditions_ask_rbac_on_custom_resources(chain: ChainHandle, rbac_ns: str,
                                                               webhook: AdmissionWebhook) -> None:
    """extensions-api's webhook plugin asks the same authorizer: a webhook whose matchCondition is
    "the user may delete widgets" is called for alice (and denies her), never for bob."""
    ns = f"vapauthz-hook-{uuid.uuid4().hex[:6]}"  # not labelled for the policy: only the webhook here
    chain.kubectl("create", "namespace", ns)
    chain.kubectl("label", "namespace", ns, f"vapauthz-hook={ns}")
    grant(chain, ns)
    name = f"{ns}-config"
    hook = {"name": "deleters.vapauthz.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": webhook.url("/deny/message=deleters%20denied"),
                             "caBundle": webhook.pki.ca_bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": [GROUP], "apiVersions": ["v1"],
                       "resources": ["widgets"]}],
            "namespaceSelector": {"matchLabels": {"vapauthz-hook": ns}},
            "matchConditions": [{"name": "may-delete",
                                 "expression": f"authorizer.group('{GROUP}').resource('widgets')"
                                               ".namespace(object.metadata.namespace).check('delete').allowed()"}]}
    chain.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name}, "webhooks": [hook]}))
    try:
        message = 'admission webhook "deleters.vapauthz.example.com" denied the request: deleters denied'

        def alice_denied() -> Any:
            status, body = create(chain, widget("by-alice", ns), "alice", dry_run=True)
            return body if status == 400 and body.get("message") == message else None
        eventually(alice_denied, timeout=30, what="alice's widget sent to the webhook and denied")
        webhook.requests(clear=True)
        status, body = create(chain, widget("by-alice", ns), "alice")
        assert (status, body["message"]) == (400, message)
        assert users_seen(webhook, ns) == ["alice"]
        status, body = create(chain, widget("by-bob", ns), "bob")
        assert status == 201, body
        assert users_seen(webhook, ns) == []  # bob's create never reached the webhook
    finally:
        chain.kubectl("delete", "validatingwebhookconfiguration", name, "--ignore-not-found", check=False)
        chain.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture(scope="module")
def always_allow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChainHandle]:
    data: Path = tmp_path_factory.mktemp("always-allow-chain")
    c = Chain(data, port=free_port(), authorization_mode="AlwaysAllow")
    yield start_chain(c)
    c.stop()


def test_always_allow_admits_everyone(always_allow: ChainHandle) -> None:
    chain = always_allow
    ns = install(chain)
    try:
        # The policy is in force (its other rule denies) ...
        def huge_denied() -> Any:
            status, body = create(chain, widget("huge", ns, size=50), "bob", dry_run=True)
            return body if status == 422 and "widgets are small" in body.get("message", "") else None
        eventually(huge_denied, timeout=30, what="the policy in force in the AlwaysAllow chain")
        # ... and its authorizer check allows a user nobody bound (kube's AlwaysAllow).
        status, body = create(chain, widget("by-bob", ns), "bob")
        assert status == 201, body
        assert body["metadata"]["name"] == "by-bob"
    finally:
        uninstall(chain, ns)
