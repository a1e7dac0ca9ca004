"""ValidatingAdmissionPolicy on the running chain, through real kubectl 1.33 and 1.27: policies and bindings
applied with kubectl deny creates with kube's message and code (built-ins in core-api, custom resources in
extensions-api), params from a ConfigMap and from a custom resource, Warn as a Warning header, bad policies
refused with kube's field errors. Every policy here is bound only in namespaces labelled ``vap-it``, so other
tests sharing the session's chain never meet them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from support.procs import ChainHandle, kubectl_params
from support.waiting import eventually
from test_audit import by_id, read_events, wait_events

pytestmark = pytest.mark.integration

SCOPE = {"namespaceSelector": {"matchLabels": {"vap-it": "yes"}}}


@pytest.fixture(scope="module")
def ns(chain: ChainHandle) -> Iterator[str]:
    name = f"vap-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", name)
    chain.kubectl("label", "namespace", name, "vap-it=yes")
    yield name
    chain.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=false", check=False)


def apply(chain: ChainHandle, *objs: dict[str, Any], version: str = "") -> None:
    chain.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objs)}),
                  version=version)


def vap(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name}, "spec": spec}


def binding(name: str, policy: str, actions: list[str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": policy, "validationActions": actions, "matchResources": SCOPE, **spec}}


def rules(group: str, resource: str, ops: tuple[str, ...] = ("CREATE", "UPDATE"), version: str = "*") -> dict[str, Any]:
    return {"resourceRules": [{"apiGroups": [group], "apiVersions": [version], "operations": list(ops),
                               "resources": [resource]}]}


def cleanup(chain: ChainHandle, *names: str) -> None:
    for name in names:
        chain.kubectl("delete", "validatingadmissionpolicybinding", f"{name}-binding", "--ignore-not-found",
                      check=False)
        chain.kubectl("delete", "validatingadmissionpolicy", name, "--ignore-not-found", check=False)


def deployment(name: str, ns: str, replicas: int, labels: dict[str, str] | None = None) -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})


def denied_dry_run(chain: ChainHandle, manifest: str, text: str) -> Any:
    """Retry a server-side dry-run create until admission denies it with ``text`` (watch caches settle)."""
    def check() -> Any:
        proc = chain.kubectl("create", "--dry-run=server", "-f", "-", input=manifest, check=False)
        return proc if proc.returncode != 0 and text in proc.stderr else None
    return eventually(check, timeout=20, what=f"a dry-run create denied with {text!r}")


@pytest.mark.parametrize("version", kubectl_params("1.33", "1.27"))
def test_deny_on_a_builtin_with_kubes_message_and_code(chain: ChainHandle, ns: str, version: str) -> None:
    name = f"max-replicas-{version.replace('.', '')}"
    apply(chain, vap(name, {
        "matchConstraints": rules("apps", "deployments"),
        "validations": [{"expression": "object.spec.replicas <= 5",
                         "messageExpression": "'replicas must be at most 5, got ' + string(object.spec.replicas)"},
                        {"expression": "object.metadata.name.size() < 40", "reason": "Forbidden"}]}),
        binding(f"{name}-binding", name, ["Deny"]), version=version)
    try:
        cause = (f"ValidatingAdmissionPolicy '{name}' with binding '{name}-binding' denied request: "
                 "replicas must be at most 5, got 10")
        denied_dry_run(chain, deployment("big", ns, 10), cause)
        proc = chain.kubectl("create", "-f", "-", input=deployment("big", ns, 10), check=False, version=version)
        assert proc.returncode == 1
        # kubectl prints a 422 Invalid with its causes: kube's StatusError, cause field empty.
        assert proc.stderr.strip() == f'The deployments "big" is invalid: : {cause}'
        assert chain.kubectl("get", "deployment", "big", "-n", ns, check=False).returncode == 1  # nothing stored
        # The Status itself, exactly as kube-apiserver writes it.
        status, body = chain.json("POST", f"/apis/apps/v1/namespaces/{ns}/deployments",
                                  json.loads(deployment("big", ns, 10)))
        assert status == 422
        assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": f'deployments.apps "big" is forbidden: {cause}', "reason": "Invalid",
                        "details": {"name": "big", "group": "apps", "kind": "deployments",
                                    "causes": [{"message": cause}]}, "code": 422}
        # A validation with reason Forbidden answers 403.
        long_name = "x" * 45
        proc = chain.kubectl("create", "-f", "-", input=deployment(long_name, ns, 1), check=False, version=version)
        assert proc.returncode == 1
        assert (f'deployments.apps "{long_name}" is forbidden: ValidatingAdmissionPolicy \'{name}\' with binding '
                f"'{name}-binding' denied request: failed expression: object.metadata.name.size() < 40") in proc.stderr
        assert "Error from server (Forbidden)" in proc.stderr
        # Allowed writes pass, and an update is checked too.
        chain.kubectl("create", "-f", "-", input=deployment("small", ns, 2), version=version)
        proc = chain.kubectl("patch", "deployment", "small", "-n", ns, "--type=merge", "-p", '{"spec":{"replicas":7}}',
                             check=False, version=version)
        assert proc.returncode == 1 and "replicas must be at most 5, got 7" in proc.stderr
        # kubectl scale writes deployments/scale, which a policy on deployments does not match (as kube)
        chain.kubectl("scale", "deployment", "small", "-n", ns, "--replicas=7", version=version)
    finally:
        cleanup(chain, name)
        chain.kubectl("delete", "deployment", "small", "-n", ns, "--ignore-not-found", check=False)


WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.vap.example.com"},
    "spec": {"group": "vap.example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {"type": "object", "properties": {
                     "size": {"type": "integer"}, "max": {"type": "integer"}}}}}}}]}}


@pytest.fixture(scope="module")
def widgets(chain: ChainHandle) -> Iterator[None]:
    apply(chain, WIDGET_CRD)
    chain.kubectl("wait", "--for", "condition=Established", "crd/widgets.vap.example.com", "--timeout=20s")
    yield
    chain.kubectl("delete", "crd", "widgets.vap.example.com", "--ignore-not-found", "--wait=false", check=False)


def widget(name: str, ns: str, **spec: int) -> dict[str, Any]:
    return {"apiVersion": "vap.example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


@pytest.mark.parametrize("version", kubectl_params("1.33", "1.27"))
def test_deny_on_a_custom_resource(chain: ChainHandle, ns: str, widgets: None, version: str) -> None:
    name = f"widget-size-{version.replace('.', '')}"
    apply(chain, vap(name, {"matchConstraints": rules("vap.example.com", "widgets"),
                            "variables": [{"name": "size", "expression": "object.spec.size"}],
                            "validations": [{"expression": "variables.size <= 10", "message": "widgets are small"}]}),
          binding(f"{name}-binding", name, ["Deny"]), version=version)
    try:
        cause = f"ValidatingAdmissionPolicy '{name}' with binding '{name}-binding' denied request: widgets are small"
        denied_dry_run(chain, json.dumps(widget("huge", ns, size=50)), cause)
        proc = chain.kubectl("create", "-f", "-", input=json.dumps(widget("huge", ns, size=50)), check=False,
                             version=version)
        assert proc.returncode == 1 and proc.stderr.strip() == f'The widgets "huge" is invalid: : {cause}'
        status, body = chain.json("POST", f"/apis/vap.example.com/v1/namespaces/{ns}/widgets", widget("huge", ns,
                                                                                                       size=50))
        assert status == 422 and body["message"] == f'widgets.vap.example.com "huge" is forbidden: {cause}'
        assert body["details"] == {"name": "huge", "group": "vap.example.com", "kind": "widgets",
                                   "causes": [{"message": cause}]}
        chain.kubectl("create", "-f", "-", input=json.dumps(widget("tiny", ns, size=3)), version=version)
    finally:
        cleanup(chain, name)
        chain.kubectl("delete", "widgets.vap.example.com", "tiny", "-n", ns, "--ignore-not-found", check=False)


def test_params_from_a_configmap_and_parameter_not_found(chain: ChainHandle, ns: str) -> None:
    name = "replicas-from-configmap"
    chain.kubectl("create", "configmap", "limits", "-n", ns, "--from-literal=max=3")
    apply(chain, vap(name, {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                            "matchConstraints": rules("apps", "deployments"),
                            "validations": [{"expression": "object.spec.replicas <= int(params.data.max)",
                                             "messageExpression": "'at most ' + params.data.max + ' replicas'"}]}),
          binding(f"{name}-binding", name, ["Deny"],
                  paramRef={"name": "limits", "parameterNotFoundAction": "Deny"}))
    try:
        cause = f"ValidatingAdmissionPolicy '{name}' with binding '{name}-binding' denied request: at most 3 replicas"
        denied_dry_run(chain, deployment("p4", ns, 4), cause)
        chain.kubectl("create", "--dry-run=server", "-f", "-", input=deployment("p3", ns, 3))
        # The param changes: the policy follows the ConfigMap's watch.
        chain.kubectl("patch", "configmap", "limits", "-n", ns, "-p", '{"data":{"max":"8"}}')
        eventually(lambda: chain.kubectl("create", "--dry-run=server", "-f", "-", input=deployment("p4", ns, 4),
                                         check=False).returncode == 0, timeout=20, what="max raised to 8")
        # No param with parameterNotFoundAction Deny: kube's configuration error.
        chain.kubectl("delete", "configmap", "limits", "-n", ns)
        denied_dry_run(chain, deployment("p1", ns, 1),
                       f"ValidatingAdmissionPolicy '{name}' with binding '{name}-binding' denied request: failed to "
                       "configure binding: no params found for policy binding with `Deny` parameterNotFoundAction")
        # Allow: a binding without params lets everything through.
        apply(chain, binding(f"{name}-binding", name, ["Deny"],
                             paramRef={"name": "limits", "parameterNotFoundAction": "Allow"}))
        eventually(lambda: chain.kubectl("create", "--dry-run=server", "-f", "-", input=deployment("p9", ns, 9),
                                         check=False).returncode == 0, timeout=20, what="Allow without params")
    finally:
        cleanup(chain, name)
        chain.kubectl("delete", "configmap", "limits", "-n", ns, "--ignore-not-found", check=False)


def test_params_from_a_custom_resource_selected_by_labels(chain: ChainHandle, ns: str, widgets: None) -> None:
    name = "replicas-from-widgets"
    a, b = widget("limit-a", ns, max=6), widget("limit-b", ns, max=4)
    a["metadata"]["labels"] = b["metadata"]["labels"] = {"limits": "replicas"}
    apply(chain, a, b)
    apply(chain, vap(name, {"paramKind": {"apiVersion": "vap.example.com/v1", "kind": "Widget"},
                            "matchConstraints": rules("apps", "deployments"),
                            "validations": [{"expression": "object.spec.replicas <= params.spec.max",
                                             "messageExpression": "params.metadata.name + ' allows ' + "
                                                                  "string(params.spec.max)"}]}),
          binding(f"{name}-binding", name, ["Deny"], paramRef={
              "selector": {"matchLabels": {"limits": "replicas"}}, "parameterNotFoundAction": "Allow"}))
    try:
        # Every selected param is evaluated: 5 replicas pass limit-a (6) and fail limit-b (4).
        denied_dry_run(chain, deployment("w5", ns, 5),
                       f"ValidatingAdmissionPolicy '{name}' with binding '{name}-binding' denied request: "
                       "limit-b allows 4")
        chain.kubectl("create", "--dry-run=server", "-f", "-", input=deployment("w4", ns, 4))
    finally:
        cleanup(chain, name)
        chain.kubectl("delete", "widgets.vap.example.com", "limit-a", "limit-b", "-n", ns, "--ignore-not-found",
                      check=False)


@pytest.mark.parametrize("version", kubectl_params("1.33", "1.27"))
def test_warn_and_audit_let_the_write_through_with_a_warning(chain: ChainHandle, ns: str, version: str) -> None:
    name = f"warn-labels-{version.replace('.', '')}"
    apply(chain, vap(name, {"matchConstraints": rules("", "configmaps"),
                            "validations": [{"expression": "has(object.metadata.labels) && "
                                                           "'team' in object.metadata.labels",
                                             "message": "configmaps should name their team"}],
                            "auditAnnotations": [{"key": "name", "valueExpression": "object.metadata.name"}]}),
          binding(f"{name}-binding", name, ["Warn", "Audit"]), version=version)
    warning = (f"Warning: Validation failed for ValidatingAdmissionPolicy '{name}' with binding '{name}-binding': "
               "configmaps should name their team")
    try:
        def warned() -> Any:
            proc = chain.kubectl("create", "configmap", "probe", "-n", ns, "--dry-run=server", version=version)
            return proc if warning in proc.stderr else None
        eventually(warned, timeout=20, what="the Warn action's warning")
        proc = chain.kubectl("create", "configmap", f"unlabelled-{version.replace('.', '')}", "-n", ns,
                             version=version)
        assert warning in proc.stderr and "created" in proc.stdout
    finally:
        cleanup(chain, name)


def test_warn_and_audit_on_a_custom_resource_with_a_custom_resource_param(chain: ChainHandle, ns: str,
                                                                         widgets: None) -> None:
    """Warn and Audit together, on a custom resource (extensions-api) checked against a param of
    another kind's object: the write goes through with kube's Warning header and the
    validation_failure audit annotation in the gateway's audit event."""
    name = "widget-size-audited"
    limit = widget("size-limit", ns, max=5)
    apply(chain, limit)
    apply(chain, vap(name, {"paramKind": {"apiVersion": "vap.example.com/v1", "kind": "Widget"},
                            "matchConstraints": rules("vap.example.com", "widgets", ops=("CREATE",)),
                            "matchConditions": [{"name": "not-the-limit",
                                                 "expression": "object.metadata.name != 'size-limit'"}],
                            "validations": [{"expression": "object.spec.size <= params.spec.max",
                                             "messageExpression": "'size ' + string(object.spec.size) + "
                                                                  "' is over ' + string(params.spec.max)"}]}),
          binding(f"{name}-binding", name, ["Warn", "Audit"],
                  paramRef={"name": "size-limit", "parameterNotFoundAction": "Deny"}))

    def log() -> list[dict[str, Any]]:
        return read_events([chain.chain.audit_log(0)])

    message = "size 9 is over 5"
    try:
        n = 0

        def warned() -> Any:
            nonlocal n
            n += 1
            audit_id = f"vap-audit-{uuid.uuid4()}"
            status, headers, _ = chain.request("POST", f"/apis/vap.example.com/v1/namespaces/{ns}/widgets",
                                               widget(f"big-{n}", ns, size=9), headers={"Audit-ID": audit_id})
            assert status == 201
            return (audit_id, headers["warning"]) if headers.get("warning") else None

        audit_id, warning = eventually(warned, timeout=20, what="the Warn action's warning")
        assert warning == (f'299 - "Validation failed for ValidatingAdmissionPolicy \'{name}\' with binding '
                           f'\'{name}-binding\': {message}"')
        [event] = wait_events(log, by_id(audit_id))
        failure = json.loads(event["annotations"]["validation.policy.admission.k8s.io/validation_failure"])
        assert failure == [{"message": message, "policy": name, "binding": f"{name}-binding", "expressionIndex": 0,
                            "validationActions": ["Warn", "Audit"]}]
        # A widget within the param's limit: neither warned nor annotated.
        status, headers, _ = chain.request("POST", f"/apis/vap.example.com/v1/namespaces/{ns}/widgets",
                                           widget("small", ns, size=2))
        assert status == 201 and "warning" not in headers
    finally:
        cleanup(chain, name)
        chain.kubectl("delete", "widgets.vap.example.com", "--all", "-n", ns, check=False)


def test_bad_policies_and_bindings_are_refused_with_kubes_field_errors(chain: ChainHandle) -> None:
    bad = vap("bad-policy", {"matchConstraints": rules("apps", "deployments"),
                             "validations": [{"expression": "object.spec.replicas <"},
                                             {"expression": "true", "reason": "Teapot"}]})
    proc = chain.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        'The ValidatingAdmissionPolicy "bad-policy" is invalid: \n'
        '* spec.validations[0].expression: Invalid value: "object.spec.replicas <": compilation failed: '
        "ERROR: <input>:1:23: Syntax error: mismatched input '<EOF>' expecting")
    assert ('* spec.validations[1].reason: Unsupported value: "Teapot": supported values: "Forbidden", "Invalid", '
            '"RequestEntityTooLarge", "Unauthorized"') in proc.stderr
    bad_binding = binding("bad-binding", "", ["Deny", "Warn"])
    proc = chain.kubectl("apply", "-f", "-", input=json.dumps(bad_binding), check=False)
    assert proc.returncode == 1
    assert 'The ValidatingAdmissionPolicyBinding "bad-binding" is invalid: \n* spec.policyName: Required value' \
        in proc.stderr
    assert ('* spec.validationActions: Invalid value: ["Deny","Warn"]: must not contain both Deny and Warn '
            "(repeating the same validation failure information in the API response and headers serves no "
            "purpose)") in proc.stderr
    status, body = chain.json("POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
                              vap("no-rules", {"matchConstraints": {}, "validations": [{"expression": "true"}]}))
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"] == ('ValidatingAdmissionPolicy.admissionregistration.k8s.io "no-rules" is invalid: '
                               "spec.matchConstraints.resourceRules: Required value")


def test_type_checking_status_for_a_bad_field_reference(chain: ChainHandle) -> None:
    name = "typecheck-replicas"
    # kube type-checks only the kinds the rules name explicitly (apiVersions "*" would check none).
    apply(chain, vap(name, {"matchConstraints": rules("apps", "deployments", version="v1"),
                            "validations": [{"expression": "object.replicas > 1"},
                                            {"expression": "object.spec.replicas > 1"}]}))
    try:
        def status() -> Any:
            obj = json.loads(chain.kubectl("get", "validatingadmissionpolicy", name, "-o", "json").stdout)
            return obj if (obj.get("status") or {}).get("observedGeneration") == 1 else None
        obj = eventually(status, timeout=30, what="the status controller's observedGeneration")
        assert obj["status"]["typeChecking"] == {"expressionWarnings": [{
            "fieldRef": "spec.validations[0].expression",
            "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'\n"
                       " | object.replicas > 1\n | ......^"}]}
        # A fixed policy (a new generation) is checked again: no warnings left.
        fixed = vap(name, {"matchConstraints": rules("apps", "deployments", version="v1"),
                           "validations": [{"expression": "object.spec.replicas > 1"}]})
        apply(chain, fixed)

        def clean() -> Any:
            obj = json.loads(chain.kubectl("get", "validatingadmissionpolicy", name, "-o", "json",
                                           "--show-managed-fields").stdout)
            st = obj.get("status") or {}
            return obj if st.get("observedGeneration") == 2 and "expressionWarnings" not in (
                st.get("typeChecking") or {}) else None
        obj = eventually(clean, timeout=30, what="typeChecking cleared for generation 2")
        # The controller server-side applies an empty typeChecking. kube 1.33's structured-merge-diff
        # (v4.6) drops a map that pruning emptied, so the status has no typeChecking (kube 1.34's v6
        # keeps it as {}); the controller still owns the field.
        assert "typeChecking" not in obj["status"], obj["status"]
        owned = [e for e in obj["metadata"]["managedFields"] if e.get("subresource") == "status"
                 and e["manager"] == "validatingadmissionpolicy-status"]
        assert len(owned) == 1 and "f:typeChecking" in owned[0]["fieldsV1"]["f:status"], owned
    finally:
        cleanup(chain, name)


def test_authorizer_in_cel_answers_with_the_chains_rbac(chain: ChainHandle, ns: str) -> None:
    """``authorizer`` asks core-api's authorizer about the requesting user (RBAC: alice may edit the
    namespace, not delete nodes; the admin is in system:masters)."""
    name = "node-deleters-only"
    chain.kubectl("create", "rolebinding", "alice-edit", "-n", ns, "--clusterrole=edit", "--user=alice")
    apply(chain, vap(name, {"matchConstraints": rules("", "configmaps"),
                            "validations": [{"expression": "authorizer.group('').resource('nodes')"
                                                           ".check('delete').allowed()",
                                             "messageExpression": "request.userInfo.username + ' may not delete "
                                                                  "nodes'", "reason": "Forbidden"}]}),
          binding(f"{name}-binding", name, ["Deny"]))
    try:
        cause = f"ValidatingAdmissionPolicy '{name}' with binding '{name}-binding' denied request: alice may not " \
                "delete nodes"

        def denied() -> Any:
            proc = chain.kubectl("create", "configmap", "by-alice", "-n", ns, "--as=alice", "--dry-run=server",
                                 check=False)
            return proc if cause in proc.stderr else None
        proc = eventually(denied, timeout=20, what="alice denied by the authorizer check")
        assert proc.stderr.strip() == f'error: failed to create configmap: configmaps "by-alice" is forbidden: {cause}'
        status, body = chain.json("POST", f"/api/v1/namespaces/{ns}/configmaps?dryRun=All",
                                  {"metadata": {"name": "by-alice"}}, headers={"Impersonate-User": "alice"})
        assert (status, body["reason"], body["details"]["causes"]) == (403, "Forbidden", [{"message": cause}])
        chain.kubectl("create", "configmap", "by-admin", "-n", ns, "--dry-run=server")
    finally:
        cleanup(chain, name)
        chain.kubectl("delete", "rolebinding", "alice-edit", "-n", ns, "--ignore-not-found", check=False)


def test_quantifier_macros_fold_errors_as_cel_go(chain: ChainHandle, ns: str) -> None:
    """``all()``/``exists()`` over containers where one lacks the field read: cel-go's fold lets another
    element decide (a privileged container denies with the policy's message, a container with the
    env var admits), and the error is the answer only when no element decides."""
    name = "containers-quantifiers"
    priv = "object.spec.template.spec.containers.all(c, c.securityContext.privileged == false)"
    owner = "object.spec.template.spec.containers.exists(c, c.env.exists(e, e.name == 'OWNER'))"
    apply(chain, vap(name, {"matchConstraints": rules("apps", "deployments"), "failurePolicy": "Fail",
                            "validations": [{"expression": priv, "message": "privileged containers are not allowed"},
                                            {"expression": owner, "message": "a container must name its OWNER"}]}),
          binding(f"{name}-binding", name, ["Deny"]))

    def dep(dname: str, *containers: dict[str, Any]) -> str:
        return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": dname, "namespace": ns},
                           "spec": {"selector": {"matchLabels": {"app": dname}}, "template": {
                               "metadata": {"labels": {"app": dname}},
                               "spec": {"containers": [{"image": "nginx", **c} for c in containers]}}}})
    plain = {"name": "plain", "securityContext": {"privileged": False}}  # no env: e.env is no such key
    bare = {"name": "bare"}  # no securityContext
    owned = {"name": "owned", "securityContext": {"privileged": False}, "env": [{"name": "OWNER", "value": "me"}]}
    prefix = f"ValidatingAdmissionPolicy '{name}' with binding '{name}-binding' denied request: "
    try:
        # The first container errors in both rules; the second decides each (false, true): denied by rule 1.
        denied_dry_run(chain, dep("q1", bare, {"name": "root", "securityContext": {"privileged": True},
                                                 "env": [{"name": "OWNER"}]}),
                       prefix + "privileged containers are not allowed")
        # The first container errors in rule 2 and the second makes it true: admitted and stored.
        chain.kubectl("create", "-f", "-", input=dep("q2", plain, owned))
        assert chain.kubectl("get", "deployment", "q2", "-n", ns, "-o", "name").stdout.strip() == \
            "deployment.apps/q2"
        # Nothing decides rule 1 (the one container without securityContext errors, the other is true):
        # the error is the answer, failurePolicy Fail denies with it.
        proc = chain.kubectl("create", "-f", "-", input=dep("q3", owned, bare), check=False)
        assert proc.returncode == 1
        assert (prefix + f"expression '{priv}' resulted in error: no such key: securityContext") in proc.stderr
        # Nothing decides rule 2 either way once no container has env: the error, not a false.
        proc = chain.kubectl("create", "-f", "-", input=dep("q4", plain), check=False)
        assert proc.returncode == 1
        assert (prefix + f"expression '{owner}' resulted in error: no such key: env") in proc.stderr
    finally:
        cleanup(chain, name)
        chain.kubectl("delete", "deployment", "q2", "-n", ns, "--ignore-not-found", check=False)
