"""The webhook client and HTTP/2 (genericapi.admission.client), against the real test webhook in its
own process: hypercorn offering ``h2`` and ``http/1.1`` by ALPN, and aiohttp's HTTP/1.1-only server.

With ``KUBECHAIN_WEBHOOK_HTTP2=true`` the client offers ``h2`` as Go's does and the h2 webhook sees
HTTP/2 (calls in flight share its one connection); the HTTP/1.1-only webhook still answers. Without
it (the default) every webhook is called over HTTP/1.1. Over HTTP/2 the error texts are kube's as
over HTTP/1.1 (status errors, a refused connection, an unknown CA, a timeout, after which the
connection still serves).
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from genericapi.admission import client as webhook_client
from genericapi.admission.client import CallError, WebhookClient
from support.admission_webhook import AdmissionWebhook, serving
from support.conversion_webhook import Pki, make_pki

REVIEW = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                     "request": {"uid": "u-1", "object": {"metadata": {"name": "x"}}}}).encode()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("h2-pki"), ["localhost"], ca_name="h2-webhook-test-ca")


@pytest.fixture(scope="module")
def h2_hook(pki: Pki) -> Iterator[AdmissionWebhook]:
    with serving(pki, http2=True) as hook:
        yield hook


@pytest.fixture(scope="module")
def h1_hook(pki: Pki) -> Iterator[AdmissionWebhook]:
    with serving(pki) as hook:
        yield hook


@pytest.fixture
def offered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(webhook_client.HTTP2_ENV, "true")


@pytest.fixture
async def clients() -> AsyncIterator[list[WebhookClient]]:
    made: list[WebhookClient] = []
    yield made
    for c in made:
        await c.close()


def _client(made: list[WebhookClient], url: str, pki: Pki | None) -> WebhookClient:
    config: dict[str, str] = {"url": url}
    if pki is not None:
        config["caBundle"] = pki.ca_bundle
    made.append(WebhookClient(config, None))
    return made[-1]


def _versions(hook: AdmissionWebhook, mode: str) -> list[str]:
    return [r["http_version"] for r in hook.requests() if r["mode"] == mode]


async def test_h2_webhook_is_called_over_http2_when_offered(offered: None, pki: Pki, h2_hook: AdmissionWebhook,
                                                            clients: list[WebhookClient]) -> None:
    h2_hook.requests(clear=True)
    hook = _client(clients, h2_hook.url("/allow"), pki)
    answers = await asyncio.gather(*(hook.post(REVIEW, 10) for _ in range(20)))
    assert hook.protocol == "h2"
    assert all(json.loads(a)["response"] == {"uid": "u-1", "allowed": True} for a in answers)
    assert _versions(h2_hook, "allow") == ["2"] * 20
    labelled = _client(clients, h2_hook.url("/label/key=a/value=b"), pki)
    patch = json.loads(await labelled.post(REVIEW, 10))["response"]["patch"]
    assert json.loads(base64.b64decode(patch)) == [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]


async def test_http1_only_webhook_still_works_when_offered(offered: None, pki: Pki, h1_hook: AdmissionWebhook,
                                                           clients: list[WebhookClient]) -> None:
    h1_hook.requests(clear=True)
    hook = _client(clients, h1_hook.url("/allow"), pki)
    await asyncio.gather(*(hook.post(REVIEW, 10) for _ in range(5)))
    assert hook.protocol == "http/1.1"
    assert _versions(h1_hook, "allow") == ["1.1"] * 5


async def test_http1_by_default_even_to_an_h2_webhook(monkeypatch: pytest.MonkeyPatch, pki: Pki,
                                                       h2_hook: AdmissionWebhook,
                                                       clients: list[WebhookClient]) -> None:
    monkeypatch.delenv(webhook_client.HTTP2_ENV, raising=False)
    h2_hook.requests(clear=True)
    hook = _client(clients, h2_hook.url("/allow"), pki)
    await hook.post(REVIEW, 10)
    assert _versions(h2_hook, "allow") == ["1.1"]


async def test_errors_over_http2_in_kubes_words(offered: None, pki: Pki, h2_hook: AdmissionWebhook,
                                                clients: list[WebhookClient], tmp_path: Path) -> None:
    failing = _client(clients, h2_hook.url("/error-500"), pki)
    with pytest.raises(CallError) as err:
        await failing.post(REVIEW, 10)
    assert str(err.value) == 'an error on the server ("boom") has prevented the request from succeeding'
    assert failing.protocol == "h2"

    slow = _client(clients, h2_hook.url("/sleep/seconds=3"), pki)
    with pytest.raises(CallError) as err:
        await slow.post(REVIEW, 1)
    assert str(err.value) == f'Post "{h2_hook.url("/sleep/seconds=3")}?timeout=1s": context deadline exceeded'
    # the stream was cut, the connection still serves the next call
    assert json.loads(await slow.post(REVIEW, 10))["response"]["allowed"] is True

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    refused = _client(clients, f"https://127.0.0.1:{port}/allow", pki)
    with pytest.raises(CallError) as err:
        await refused.post(REVIEW, 10)
    assert str(err.value) == (f'Post "https://127.0.0.1:{port}/allow?timeout=10s": dial tcp 127.0.0.1:{port}: '
                              "connect: connection refused")

    stranger = make_pki(tmp_path / "other", ["localhost"], ca_name="another-ca")
    untrusted = _client(clients, h2_hook.url("/allow"), stranger)
    with pytest.raises(CallError) as err:
        await untrusted.post(REVIEW, 10)
    assert str(err.value) == (f'Post "{h2_hook.url("/allow")}?timeout=10s": tls: failed to verify certificate: '
                              "x509: certificate signed by unknown authority")


async def test_calls_in_flight_stay_bounded_over_http2(offered: None, monkeypatch: pytest.MonkeyPatch, pki: Pki,
                                                       h2_hook: AdmissionWebhook,
                                                       clients: list[WebhookClient]) -> None:
    monkeypatch.setattr(webhook_client, "MAX_IN_FLIGHT", 3)
    h2_hook.requests(clear=True)
    url = h2_hook.url("/sleep/seconds=3")
    hook = _client(clients, url, pki)
    results = await asyncio.gather(*(hook.post(REVIEW, 5) for _ in range(9)), return_exceptions=True)
    assert hook.protocol == "h2"
    answered = [r for r in results if isinstance(r, bytes)]
    cut = [r for r in results if isinstance(r, CallError)]
    assert len(answered) == 3 and len(cut) == 6, results  # a second round of 3 s would end past 5 s
    assert {str(e) for e in cut} == {f'Post "{url}?timeout=5s": context deadline exceeded'}
    # the second round reached the webhook once the first freed its slots; the third never did
    assert 3 < len(_versions(h2_hook, "sleep")) <= 6
