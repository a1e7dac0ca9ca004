"""kube's Request-level ``patch.webhook.admission.k8s.io/round_<r>_index_<i>`` audit annotation through a
chain whose audit policy logs ConfigMaps in one namespace at Request and the rest at Metadata: the
mutating webhook's JSONPatch (kube's PatchAuditAnnotation text) is in the Request event only, the
Metadata-level ``mutation.webhook...`` annotation in both.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.admission_webhook import AdmissionWebhook
from support.conversion_webhook import make_pki
from support.procs import ChainHandle, start_chain
from test_audit import by_id, read_events, wait_events

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    users: ["system:apiserver"]
  - level: Request
    namespaces: ["lvl-request"]
    resources: [{group: "", resources: ["configmaps"]}]
  - level: Metadata
"""
# the webhook's own member order and an HTML character: Go sorts an operation's keys and escapes '<'
OPS = b'[{"value": {"note": "<b> & x", "by": "hook"}, "path": "/metadata/annotations", "op": "add"}]'
PATCH_KEY = "patch.webhook.admission.k8s.io/round_0_index_0"
MUTATION_KEY = "mutation.webhook.admission.k8s.io/round_0_index_0"


@pytest.fixture(scope="module")
def leveled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ChainHandle, Path, AdmissionWebhook]]:
    data = tmp_path_factory.mktemp("audit-levels")
    (data / "policy.yaml").write_text(POLICY)
    log = data / "audit.log"
    hook = AdmissionWebhook.start(make_pki(data / "pki", ["localhost"], ca_name="audit-levels-ca"))
    chain = Chain(data / "chain", port=free_port(), audit_policy=str(data / "policy.yaml"),
                  audit_flags=["--audit-log-path", str(log)])
    try:
        handle = start_chain(chain)
        for ns in ("lvl-request", "lvl-metadata"):
            handle.kubectl("create", "-f", "-", input=json.dumps({
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"lvl": "yes"}}}))
        handle.kubectl("create", "-f", "-", input=json.dumps({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "lvl-stamp"},
            "webhooks": [{"name": "stamp.lvl.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                          "clientConfig": {"url": hook.url("/patch/ops=" + base64.urlsafe_b64encode(OPS).decode()),
                                           "caBundle": hook.pki.ca_bundle},
                          "namespaceSelector": {"matchLabels": {"lvl": "yes"}},
                          "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                     "resources": ["configmaps"]}]}]}))
        yield handle, log, hook
    finally:
        chain.stop()
        hook.stop()


def _stamped_event(chain: ChainHandle, log: Path, ns: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:  # the configuration takes effect once core-api's watch cache has it
        audit_id = f"lvl-{uuid.uuid4()}"
        status, _h, data = chain.request("POST", f"/api/v1/namespaces/{ns}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "s-"}},
            headers={"Audit-ID": audit_id})
        assert status == 201
        if json.loads(data)["metadata"].get("annotations") == {"note": "<b> & x", "by": "hook"}:
            [event] = wait_events(lambda: read_events([log]), by_id(audit_id))
            return event
        assert time.monotonic() < deadline, "the webhook never took effect"
        time.sleep(0.3)


def test_patch_annotation_only_at_request_level(leveled: tuple[ChainHandle, Path, AdmissionWebhook]) -> None:
    chain, log, _hook = leveled
    request = _stamped_event(chain, log, "lvl-request")
    assert request["level"] == "Request"
    # Go's json.Marshal of PatchAuditAnnotation: the operation's keys sorted, HTML-safe escapes
    assert request["annotations"][PATCH_KEY] == (
        '{"configuration":"lvl-stamp","webhook":"stamp.lvl.example.com","patch":[{"op":"add",'
        '"path":"/metadata/annotations","value":{"note":"\\u003cb\\u003e \\u0026 x","by":"hook"}}],'
        '"patchType":"JSONPatch"}')
    assert json.loads(request["annotations"][MUTATION_KEY]) == {
        "configuration": "lvl-stamp", "webhook": "stamp.lvl.example.com", "mutated": True}

    metadata = _stamped_event(chain, log, "lvl-metadata")
    assert metadata["level"] == "Metadata"
    assert PATCH_KEY not in metadata["annotations"]
    assert MUTATION_KEY in metadata["annotations"]
