"""A ValidatingAdmissionPolicy whose rule names only v1 of a two-version CRD, met by a request through
v2: with ``matchPolicy: Equivalent`` (the default) kube-apiserver evaluates it on ``object`` /
``oldObject`` converted to v1 (through the CRD's conversion webhook, or with strategy None only the
apiVersion changed), with ``request.kind`` / ``request.resource`` the matched v1 and
``request.requestKind`` / ``request.requestResource`` the v2 the client addressed; with
``matchPolicy: Exact`` the v2 request is not matched at all, and a rule naming a version the CRD does
not serve is equivalent to nothing. Policies are bound only in namespaces
labelled ``vap-equiv-it``, so other tests sharing the session's chain never meet them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from support.conversion_webhook import Pki, WebhookProcess, make_pki
from support.procs import ChainHandle
from support.waiting import eventually
from test_crd_conversion import backends_crd
from test_crds import establish

pytestmark = pytest.mark.integration

LABEL = "vap-equiv-it"


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    pki: Pki = make_pki(tmp_path_factory.mktemp("vap-equiv-pki"), ["localhost"])
    proc = WebhookProcess.start(pki)
    yield proc
    proc.stop()


def policy(name: str, group: str, validations: list[dict[str, Any]], match_policy: str | None = None,
           version: str = "v1") -> dict[str, Any]:
    constraints: dict[str, Any] = {"resourceRules": [{"apiGroups": [group], "apiVersions": [version],
                                                      "operations": ["CREATE", "UPDATE"], "resources": ["backends"]}]}
    if match_policy is not None:
        constraints["matchPolicy"] = match_policy
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name}, "spec": {"matchConstraints": constraints, "validations": validations}}


def binding(name: str) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": f"{name}-binding"},
            "spec": {"policyName": name, "validationActions": ["Deny"],
                     "matchResources": {"namespaceSelector": {"matchLabels": {LABEL: "yes"}}}}}


def denial(name: str, message: str) -> str:
    return f"ValidatingAdmissionPolicy '{name}' with binding '{name}-binding' denied request: {message}"


def setup(chain: ChainHandle, crd: str, group: str, policies: list[dict[str, Any]]) -> str:
    """The CRD, the policies with their bindings and a labelled namespace; the namespace's name."""
    establish(chain, crd, f"backends.{group}")
    items = [*policies, *(binding(p["metadata"]["name"]) for p in policies)]
    chain.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    ns = f"vapequiv-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", ns)
    chain.kubectl("label", "namespace", ns, f"{LABEL}=yes")
    return ns


def teardown(chain: ChainHandle, group: str, ns: str, names: list[str]) -> None:
    for name in names:
        chain.kubectl("delete", "validatingadmissionpolicybinding", f"{name}-binding", "--ignore-not-found",
                      check=False)
        chain.kubectl("delete", "validatingadmissionpolicy", name, "--ignore-not-found", check=False)
    chain.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false", check=False)
    chain.kubectl("delete", "crd", f"backends.{group}", "--ignore-not-found", "--wait=false", check=False)


def backend(group: str, version: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{group}/{version}", "kind": "Backend", "metadata": {"name": name}, "spec": spec}


def test_webhook_conversion_policy_sees_v1_object_and_old_object(chain: ChainHandle, webhook: WebhookProcess) -> None:
    group = f"vapequiv-hook-{uuid.uuid4().hex[:4]}.example.com"
    crd = backends_crd(group, {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
        "url": f"{webhook.url}/convert", "caBundle": webhook.pki.ca_bundle}}})
    equiv, exact = f"equiv-{group}", f"exact-{group}"
    validations = [
        {"expression": f"object.apiVersion == '{group}/v1' && has(object.spec.host) && !has(object.spec.address)",
         "messageExpression": "'saw ' + object.apiVersion"},
        {"expression": "object.spec.port < 6000",
         "messageExpression": "'port ' + string(object.spec.port) + ' too high (request at ' + "
                              "request.requestKind.version + '/' + request.requestResource.version + ', matched ' + "
                              "request.kind.version + '/' + request.resource.version + ')'"},
        {"expression": "request.operation != 'UPDATE' || "
                       f"(oldObject.apiVersion == '{group}/v1' && oldObject.spec.host == object.spec.host)",
         "message": "host is immutable"}]
    ns = setup(chain, crd, group, [
        policy(equiv, group, validations),
        policy(exact, group, [{"expression": "!object.metadata.name.startsWith('exact-')",
                               "message": "exact saw it"}], "Exact")])
    base = f"/apis/{group}"
    try:
        def denied_at_v2() -> Any:
            status, body = chain.json("POST", f"{base}/v2/namespaces/{ns}/backends?dryRun=All",
                                      backend(group, "v2", "big", {"address": "db.local:6000"}))
            return body if status == 422 else None

        body = eventually(denied_at_v2, timeout=30, what="the Equivalent policy denies a v2 create")
        message = denial(equiv, "port 6000 too high (request at v2/v2, matched v1/v1)")
        assert body["message"] == f'backends.{group} "big" is forbidden: {message}', body
        assert body["reason"] == "Invalid" and body["details"]["causes"] == [{"message": message}]

        # Admitted through v2 (the policy's first rule sees host/port at v1); the Exact policy does
        # not match v2, so a name it forbids at v1 passes here.
        status, created = chain.json("POST", f"{base}/v2/namespaces/{ns}/backends",
                                     backend(group, "v2", "exact-db", {"address": "db.local:5432"}))
        assert status == 201, created
        assert created["apiVersion"] == f"{group}/v2" and created["spec"] == {"address": "db.local:5432"}

        # The Exact policy is live: the same name through v1 is denied.
        status, body = chain.json("POST", f"{base}/v1/namespaces/{ns}/backends?dryRun=All",
                                  backend(group, "v1", "exact-db2", {"host": "db.local", "port": 5432}))
        assert status == 422 and body["message"] == \
            f'backends.{group} "exact-db2" is forbidden: {denial(exact, "exact saw it")}', body

        # UPDATE through v2: oldObject is converted too (host changed at v1 is refused, port alone is not).
        path = f"{base}/v2/namespaces/{ns}/backends/exact-db"
        status, body = chain.json("PATCH", path, {"spec": {"address": "other.local:5432"}},
                                  headers={"Content-Type": "application/merge-patch+json"})
        assert status == 422 and body["message"] == \
            f'backends.{group} "exact-db" is forbidden: {denial(equiv, "host is immutable")}', body
        status, body = chain.json("PATCH", path, {"spec": {"address": "db.local:5433"}},
                                  headers={"Content-Type": "application/merge-patch+json"})
        assert status == 200 and body["spec"] == {"address": "db.local:5433"}, body
    finally:
        teardown(chain, group, ns, [equiv, exact])


def test_conversion_none_policy_sees_v1_api_version(chain: ChainHandle) -> None:
    group = f"vapequiv-none-{uuid.uuid4().hex[:4]}.example.com"
    name, unserved = f"equiv-{group}", f"v9-{group}"
    ns = setup(chain, backends_crd(group, {"strategy": "None"}), group, [policy(name, group, [
        {"expression": f"object.apiVersion == '{group}/v1'", "messageExpression": "'saw ' + object.apiVersion"},
        {"expression": "object.spec.address != 'deny'", "message": "address deny refused"}]),
        policy(unserved, group, [{"expression": "false", "message": "v9 policy matched"}], version="v9")])
    base = f"/apis/{group}"
    try:
        def denied_at_v2() -> Any:
            status, body = chain.json("POST", f"{base}/v2/namespaces/{ns}/backends?dryRun=All",
                                      backend(group, "v2", "b", {"address": "deny"}))
            return body if status == 422 else None

        body = eventually(denied_at_v2, timeout=30, what="the Equivalent policy denies a v2 create")
        assert body["message"] == f'backends.{group} "b" is forbidden: {denial(name, "address deny refused")}', body
        status, created = chain.json("POST", f"{base}/v2/namespaces/{ns}/backends",
                                     backend(group, "v2", "b", {"address": "db:5432"}))
        assert status == 201 and created["apiVersion"] == f"{group}/v2", created
    finally:
        teardown(chain, group, ns, [name, unserved])


def test_built_in_hpa_v2_request_seen_at_v1_in_core_api(chain: ChainHandle) -> None:
    """core-api: a policy on autoscaling/v1 HorizontalPodAutoscalers sees a v2 create converted to v1
    (``spec.targetCPUUtilizationPercentage`` from the v2 CPU metric)."""
    name = f"equiv-hpa-{uuid.uuid4().hex[:6]}"
    pol = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
           "metadata": {"name": name},
           "spec": {"matchConstraints": {"resourceRules": [{
               "apiGroups": ["autoscaling"], "apiVersions": ["v1"], "operations": ["CREATE"],
               "resources": ["horizontalpodautoscalers"]}]},
               "validations": [{"expression": "object.apiVersion == 'autoscaling/v1' && "
                                              "object.spec.targetCPUUtilizationPercentage <= 80",
                                "messageExpression": "'cpu ' + string(object.spec.targetCPUUtilizationPercentage) + "
                                                     "' at ' + object.apiVersion + ' (request at ' + "
                                                     "request.requestKind.version + ')'"}]}}
    chain.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                         "items": [pol, binding(name)]}))
    ns = f"vapequiv-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", ns)
    chain.kubectl("label", "namespace", ns, f"{LABEL}=yes")

    def hpa(cpu: int) -> dict[str, Any]:
        return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                         "minReplicas": 1, "maxReplicas": 3,
                         "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                             "type": "Utilization", "averageUtilization": cpu}}}]}}
    path = f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers"
    try:
        def denied() -> Any:
            status, body = chain.json("POST", f"{path}?dryRun=All", hpa(90))
            return body if status == 422 else None

        body = eventually(denied, timeout=30, what="the Equivalent policy denies a v2 HPA")
        assert body["message"] == f'horizontalpodautoscalers.autoscaling "web" is forbidden: ' \
                                  f'{denial(name, "cpu 90 at autoscaling/v1 (request at v2)")}', body
        status, created = chain.json("POST", path, hpa(50))
        assert status == 201 and created["apiVersion"] == "autoscaling/v2", created
    finally:
        chain.kubectl("delete", "validatingadmissionpolicybinding", f"{name}-binding", "--ignore-not-found",
                      check=False)
        chain.kubectl("delete", "validatingadmissionpolicy", name, "--ignore-not-found", check=False)
        chain.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false", check=False)
