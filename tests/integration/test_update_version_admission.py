"""An update's resourceVersion is checked after mutating admission, as kube's Store.Update does.

kube reads the version off the object UpdatedObject returns, and the mutating webhooks run inside
UpdatedObject (the update's object transformers): a PUT that names no version reaches the webhooks
without one, and a PUT at a stale version is admitted before it gets its 409. Through the chain, with
the admission tests' webhook process and namespace-scoped configuration (test_admission_webhooks).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from support.waiting import eventually
from test_admission_webhooks import Env, env, reviews, webhook

pytestmark = pytest.mark.integration

__all__ = ["env", "webhook"]  # the fixtures this module uses

UPDATES = [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]


def test_put_version_is_checked_after_mutating_admission(env: Env) -> None:
    env.hook.requests(clear=True)
    env.register("MutatingWebhookConfiguration",
                 env.webhook("version.cu.example.com", "/label/key=seen/value=yes", rules=UPDATES))
    status, created = env.configmap("v")
    assert status == 201, created
    path = f"/api/v1/namespaces/{env.ns}/configmaps/v"

    def unconditional() -> dict[str, Any] | None:
        s, body = env.chain.json("PUT", path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "v"},
                                               "data": {"k": uuid.uuid4().hex}})
        assert s == 200, body
        labelled = (body["metadata"].get("labels") or {}).get("seen") == "yes"
        return body if labelled else None

    updated = eventually(unconditional, 15, "a PUT the mutating webhook labels")
    request = reviews(env.hook, "label")[-1]["request"]
    assert request["operation"] == "UPDATE"
    assert "resourceVersion" not in request["object"]["metadata"]  # as sent: no version
    assert request["oldObject"]["metadata"]["resourceVersion"]

    seen = len(reviews(env.hook, "label"))
    status, body = env.chain.json("PUT", path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "v", "resourceVersion": created["metadata"]["resourceVersion"]}, "data": {"k": "stale"}})
    assert status == 409 and body["reason"] == "Conflict", body
    stale = reviews(env.hook, "label")[seen:]
    assert stale and all(r["request"]["object"]["metadata"]["resourceVersion"]
                         == created["metadata"]["resourceVersion"] for r in stale)
    assert env.chain.json("GET", path)[1]["data"] == updated["data"]
