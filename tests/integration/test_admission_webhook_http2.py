"""Admission webhooks over HTTP/2 through a whole chain started with ``KUBECHAIN_WEBHOOK_HTTP2=true``
(core-api offers ``h2`` by ALPN as kube-apiserver's Go client does): a validating webhook served by
hypercorn sees HTTP/2 and its denial reaches kubectl in kube's words, a mutating webhook that speaks
only HTTP/1.1 still patches the same write, and a slow HTTP/2 webhook is cut at its timeout. The
session's chain (no option) calls the same h2 webhook over HTTP/1.1.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from genericapi.admission.client import HTTP2_ENV
from support.admission_webhook import AdmissionWebhook, serving
from support.conversion_webhook import Pki, make_pki
from support.procs import ChainHandle, start_chain
from support.waiting import eventually

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration

CONFIGMAPS = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("h2-admission-pki"), ["localhost"], ca_name="h2-admission-test-ca")


@pytest.fixture(scope="module")
def h2_hook(pki: Pki) -> Iterator[AdmissionWebhook]:
    with serving(pki, http2=True) as hook:
        yield hook


@pytest.fixture(scope="module")
def h1_hook(pki: Pki) -> Iterator[AdmissionWebhook]:
    with serving(pki) as hook:
        yield hook


@pytest.fixture(scope="module")
def h2_chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChainHandle]:
    before = os.environ.get(HTTP2_ENV)
    os.environ[HTTP2_ENV] = "true"  # the chain's processes inherit it
    try:
        chain = Chain(tmp_path_factory.mktemp("h2-chain") / "chain", port=free_port())
        handle = start_chain(chain)
    finally:
        if before is None:
            os.environ.pop(HTTP2_ENV, None)
        else:
            os.environ[HTTP2_ENV] = before
    yield handle
    chain.stop()


def _webhook(name: str, hook: AdmissionWebhook, path: str, ns: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "clientConfig": {"url": hook.url(path), "caBundle": hook.pki.ca_bundle},
            "rules": CONFIGMAPS, "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "namespaceSelector": {"matchLabels": {"h2-test": ns}}, **extra}


def _register(chain: ChainHandle, kind: str, name: str, *webhooks: dict[str, Any]) -> None:
    chain.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
        "webhooks": list(webhooks)}))


def _namespace(chain: ChainHandle) -> str:
    ns = f"h2-{uuid.uuid4().hex[:8]}"
    chain.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"h2-test": ns}}}))
    return ns


def _calls(hook: AdmissionWebhook, ns: str) -> list[tuple[str, str, str]]:
    return [(r["mode"], r["http_version"], r["review"]["request"]["name"]) for r in hook.requests()
            if r["review"].get("request", {}).get("namespace") == ns]


def test_http2_webhook_beside_an_http1_only_one(h2_chain: ChainHandle, h2_hook: AdmissionWebhook,
                                                h1_hook: AdmissionWebhook) -> None:
    ns = _namespace(h2_chain)
    _register(h2_chain, "ValidatingWebhookConfiguration", f"{ns}-v",
              _webhook("deny-blocked.h2.example.com", h2_hook, "/deny-label/key=blocked", ns))
    _register(h2_chain, "MutatingWebhookConfiguration", f"{ns}-m",
              _webhook("stamp.h2.example.com", h1_hook, "/label/key=stamped/value=yes", ns))
    try:
        def stamped() -> Any:
            name = f"cm-{uuid.uuid4().hex[:6]}"
            status, body = h2_chain.json("POST", f"/api/v1/namespaces/{ns}/configmaps",
                                         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
            assert status == 201, body
            seen = {mode for mode, _v, n in _calls(h2_hook, ns) if n == name}
            return body if body["metadata"].get("labels") == {"stamped": "yes"} and seen else None

        created = eventually(stamped, 20, "both webhooks in effect")["metadata"]["name"]
        calls = [c for c in _calls(h2_hook, ns) + _calls(h1_hook, ns) if c[2] == created]
        assert sorted(calls) == [("deny-label", "2", created), ("label", "1.1", created)]

        proc = h2_chain.kubectl("create", "configmap", "no", "-n", ns, check=False)
        assert proc.returncode == 0
        proc = h2_chain.kubectl("label", "configmap", "no", "-n", ns, "blocked=1", check=False)
        assert proc.returncode == 0  # only CREATE is registered
        proc = h2_chain.kubectl("create", "-f", "-", check=False, input=json.dumps({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "blocked", "namespace": ns,
                                                                  "labels": {"blocked": "1"}}}))
        assert proc.returncode == 1
        assert proc.stderr.strip() == ('Error from server: error when creating "STDIN": admission webhook '
                                       '"deny-blocked.h2.example.com" denied the request: label blocked is not '
                                       "allowed")
        assert ("deny-label", "2", "blocked") in _calls(h2_hook, ns)
    finally:
        for kind, name in (("validatingwebhookconfiguration", f"{ns}-v"), ("mutatingwebhookconfiguration", f"{ns}-m")):
            h2_chain.kubectl("delete", kind, name, "--ignore-not-found", check=False)
        h2_chain.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_slow_http2_webhook_is_cut_at_its_timeout(h2_chain: ChainHandle, h2_hook: AdmissionWebhook) -> None:
    ns = _namespace(h2_chain)
    _register(h2_chain, "ValidatingWebhookConfiguration", f"{ns}-slow",
              _webhook("slow.h2.example.com", h2_hook, "/sleep/seconds=5", ns, timeoutSeconds=1))
    try:
        def refused() -> Any:
            status, body = h2_chain.json("POST", f"/api/v1/namespaces/{ns}/configmaps", {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"s-{uuid.uuid4().hex[:6]}"}})
            return body if status == 500 else None

        body = eventually(refused, 30, "the slow webhook in effect")
        assert body["message"] == (f'Internal error occurred: failed calling webhook "slow.h2.example.com": failed '
                                   f'to call webhook: Post "{h2_hook.url("/sleep/seconds=5")}?timeout=1s": context '
                                   "deadline exceeded")
        assert {v for mode, v, _n in _calls(h2_hook, ns) if mode == "sleep"} == {"2"}
    finally:
        h2_chain.kubectl("delete", "validatingwebhookconfiguration", f"{ns}-slow", "--ignore-not-found", check=False)
        h2_chain.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_http1_without_the_option(chain: ChainHandle, h2_hook: AdmissionWebhook) -> None:
    ns = _namespace(chain)
    _register(chain, "ValidatingWebhookConfiguration", f"{ns}-v",
              _webhook("allow.h2.example.com", h2_hook, "/allow", ns))
    try:
        def called() -> Any:
            status, body = chain.json("POST", f"/api/v1/namespaces/{ns}/configmaps", {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c-{uuid.uuid4().hex[:6]}"}})
            assert status == 201, body
            return _calls(h2_hook, ns) or None

        assert {v for _m, v, _n in eventually(called, 20, "the webhook in effect")} == {"1.1"}
    finally:
        chain.kubectl("delete", "validatingwebhookconfiguration", f"{ns}-v", "--ignore-not-found", check=False)
        chain.kubectl("delete", "namespace", ns, "--wait=false", check=False)
