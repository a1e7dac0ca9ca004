"""A create walks its object against the schema once when it can (issue 15): the request body's walk
stands for the object validated when nothing but server-set metadata changed in between. When
mutating admission changes the object, it is walked again: a webhook that takes out a required
field gets the very answer a client sending that object gets."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.admission_webhook import AdmissionWebhook
from support.procs import ChainHandle
from support.waiting import eventually
from test_admission_webhooks import Env
from test_admission_webhooks import webhook as webhook  # the module-scoped webhook server fixture, re-exported

pytestmark = pytest.mark.integration


@pytest.fixture
def env(chain: ChainHandle, webhook: AdmissionWebhook) -> Iterator[Env]:
    e = Env(chain, webhook)
    yield e
    e.cleanup()


SERVICES = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["services"]}]


def service(name: str, port: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"labels": labels} if labels else {})}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"ports": [port], "selector": {"app": "x"}}}


def test_a_webhook_removing_a_required_field_gets_the_answer_a_client_gets(env: Env, chain: ChainHandle) -> None:
    path = f"/api/v1/namespaces/{env.ns}/services"
    # What the full validation answers for a Service whose port lacks its number (nothing stored).
    status, direct = chain.json("POST", path, service("broken", {"protocol": "TCP", "targetPort": 80}))
    assert status == 422 and direct["reason"] == "Invalid", direct
    assert "spec.ports[0].port" in direct["message"], direct
    # A clean body whose port a mutating webhook takes out on the way.
    ops = base64.urlsafe_b64encode(json.dumps([{"op": "remove", "path": "/spec/ports/0/port"}]).encode()).decode()
    env.register("MutatingWebhookConfiguration", env.webhook("portless.schema-once.example.com", f"/patch/ops={ops}",
                                                             rules=SERVICES,
                                                             objectSelector={"matchLabels": {"portless": "yes"}}))

    def mutated() -> Any:
        status, body = chain.json("POST", path, service("broken", {"protocol": "TCP", "targetPort": 80, "port": 80},
                                                        labels={"portless": "yes"}))
        if status == 201:  # the webhook configuration not seen yet
            chain.kubectl("delete", "service", "broken", "-n", env.ns)
            return None
        return body

    body = eventually(mutated, 15, "the webhook's patch applied")
    assert body == direct
    assert chain.json("GET", f"{path}/broken")[0] == 404
    # The same clean body without the label: created (the walk of the body stands), port kept.
    status, created = chain.json("POST", path, service("fine", {"protocol": "TCP", "targetPort": 80, "port": 80}))
    assert status == 201, created
    assert created["spec"]["ports"][0]["port"] == 80


def test_updates_and_patches_a_webhook_breaks_are_walked_again(env: Env, chain: ChainHandle) -> None:
    path = f"/api/v1/namespaces/{env.ns}/services"
    status, stored = chain.json("POST", path, service("svc", {"protocol": "TCP", "targetPort": 80, "port": 80}))
    assert status == 201, stored
    # What the full validation answers for an update whose port lacks its number.
    portless = json.loads(json.dumps(stored))
    del portless["spec"]["ports"][0]["port"]
    status, direct = chain.json("PUT", f"{path}/svc", portless)
    assert status == 422 and "spec.ports[0].port" in direct["message"], direct
    ops = base64.urlsafe_b64encode(json.dumps([{"op": "remove", "path": "/spec/ports/0/port"}]).encode()).decode()
    env.register("MutatingWebhookConfiguration", env.webhook(
        "portless-update.schema-once.example.com", f"/patch/ops={ops}",
        rules=[{**SERVICES[0], "operations": ["UPDATE"]}], objectSelector={"matchLabels": {"portless": "yes"}}))
    labelled = json.loads(json.dumps(stored))
    labelled["metadata"]["labels"] = {"portless": "yes"}

    def put() -> Any:
        status, body = chain.json("PUT", f"{path}/svc", labelled)
        assert status in (200, 422), body
        if status == 200:  # the webhook configuration not seen yet: put the label back off
            body["metadata"].pop("labels", None)
            assert chain.json("PUT", f"{path}/svc", body)[0] == 200
            labelled["metadata"]["resourceVersion"] = chain.json("GET", f"{path}/svc")[1]["metadata"]["resourceVersion"]
            return None
        return body

    assert eventually(put, 15, "the webhook's patch applied to the update") == direct
    status, patched = chain.json("PATCH", f"{path}/svc", {"metadata": {"labels": {"portless": "yes"}}},
                                 headers={"Content-Type": "application/merge-patch+json"})
    assert status == 422 and patched == direct, patched
    # Untouched by the webhook (no label): the clean patch stands on its walk, port kept.
    status, fine = chain.json("PATCH", f"{path}/svc", {"metadata": {"labels": {"other": "yes"}}},
                              headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200 and fine["spec"]["ports"][0]["port"] == 80, fine
