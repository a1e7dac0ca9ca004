"""CRConverter: strategy None, and Webhook against a real HTTPS webhook process (tests/support)."""

from __future__ import annotations

import copy
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from extensionsapi.conversion import CRConverter
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.serviceresolver import ServiceResolver, StaticLookup
from support.conversion_webhook import Pki, WebhookProcess, make_pki

from kubechain_cli.chain import free_port

GROUP = "conv.example.com"
SRC = f"conversion for {GROUP}/v1, Kind=Backend"
HOOK = "conversion webhook for /, Kind= failed"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("hook-pki"), ["localhost", "conv-hook.webhooks.svc"])


@pytest.fixture(scope="module")
def webhook(pki: Pki) -> Iterator[WebhookProcess]:
    proc = WebhookProcess.start(pki)
    yield proc
    proc.stop()


def crd(conversion: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"backends.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "names": {"kind": "Backend", "plural": "backends"},
                     "versions": [{"name": "v1", "served": True, "storage": True},
                                  {"name": "v2", "served": True, "storage": False}],
                     "conversion": conversion}}


def webhook_crd(client_config: dict[str, Any], review_versions: tuple[str, ...] = ("v1",)) -> dict[str, Any]:
    return crd({"strategy": "Webhook", "webhook": {"conversionReviewVersions": list(review_versions),
                                                   "clientConfig": client_config}})


def backend(name: str = "b1", version: str = "v1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Backend",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "7",
                         "generation": 3, "labels": {"app": "db"}},
            "spec": spec or {"host": "db.local", "port": 5432}}


@pytest.fixture
async def converters() -> AsyncIterator[list[CRConverter]]:
    made: list[CRConverter] = []
    yield made
    for c in made:
        await c.close()


def url_converter(made: list[CRConverter], webhook: WebhookProcess, path: str, ca: str | None = None,
                  review_versions: tuple[str, ...] = ("v1",), timeout: float = 30.0) -> CRConverter:
    config = {"url": f"{webhook.url}{path}", "caBundle": ca if ca is not None else webhook.pki.ca_bundle}
    c = CRConverter(webhook_crd(config, review_versions), None, timeout=timeout)
    made.append(c)
    return c


async def failure(conv: CRConverter, objs: list[dict[str, Any]], to: str = "v2") -> str:
    with pytest.raises(APIError) as info:
        await conv.convert(objs, to)
    assert (info.value.code, info.value.reason) == (500, "")
    return info.value.message


# -- strategy None ------------------------------------------------------------------------------

async def test_none_rewrites_api_version_only() -> None:
    conv = CRConverter(crd({"strategy": "None"}))
    original = backend()
    snapshot = copy.deepcopy(original)
    [out] = await conv.convert([original], "v2")
    assert out == {**snapshot, "apiVersion": f"{GROUP}/v2"}
    assert original == snapshot
    already = backend("b2", "v2", address="x:1")
    result = await conv.convert([already, original], "v2")
    assert result[0] is already and result[1]["apiVersion"] == f"{GROUP}/v2"


async def test_none_rejects_versions_the_crd_does_not_have() -> None:
    conv = CRConverter(crd({"strategy": "None"}))
    msg = await failure(conv, [backend()], "v9")
    assert msg == f"request to convert CR to an invalid group/version: {GROUP}/v9"
    msg = await failure(conv, [{**backend(), "apiVersion": "other.example.com/v1"}])
    assert msg == "request to convert CR from an invalid group/version: other.example.com/v1"
    msg = await failure(conv, [backend(), {**backend("b2"), "apiVersion": f"{GROUP}/v3"}])
    assert msg == f"request to convert CR list failed, list index 1 has invalid group/version: {GROUP}/v3"


def test_unknown_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match='unknown conversion strategy "Magic"'):
        CRConverter(crd({"strategy": "Magic"}))


# -- strategy Webhook: good answers ---------------------------------------------------------------

async def test_webhook_converts_both_ways_and_batches(webhook: WebhookProcess, converters: list[CRConverter]) -> None:
    conv = url_converter(converters, webhook, "/convert")
    v1 = backend()
    snapshot = copy.deepcopy(v1)
    [v2] = await conv.convert([v1], "v2")
    assert v2["apiVersion"] == f"{GROUP}/v2" and v2["spec"] == {"address": "db.local:5432"}
    assert v2["metadata"] == snapshot["metadata"]
    assert v1 == snapshot
    [back] = await conv.convert([v2], "v1")
    assert back == snapshot
    already = backend("b2", "v2", address="cache:6379")
    out = await conv.convert([backend("b3", host="a", port=1), already, backend("b4", host="b", port=2)], "v2")
    assert [o["spec"] for o in out] == [{"address": "a:1"}, {"address": "cache:6379"}, {"address": "b:2"}]
    assert out[1] is already


async def test_nothing_to_convert_calls_nobody(converters: list[CRConverter]) -> None:
    closed = free_port()
    conv = CRConverter(webhook_crd({"url": f"https://127.0.0.1:{closed}/convert"}))
    converters.append(conv)
    objs = [backend("b2", "v2", address="x:1")]
    assert await conv.convert(objs, "v2") == objs
    empty = {"apiVersion": f"{GROUP}/v1", "kind": "Backend"}
    assert await conv.convert([empty], "v2") == [{"apiVersion": f"{GROUP}/v2", "kind": "Backend"}]


async def test_only_labels_and_annotations_may_change(webhook: WebhookProcess,
                                                      converters: list[CRConverter]) -> None:
    conv = url_converter(converters, webhook, "/meta")
    [out] = await conv.convert([backend()], "v2")
    assert out["metadata"]["labels"] == {"app": "db", "converted-by": "webhook"}
    assert out["metadata"]["generation"] == 3
    assert "garbage" not in out["metadata"]


async def test_v1beta1_reviews_skip_the_uid_check(webhook: WebhookProcess, converters: list[CRConverter]) -> None:
    conv = url_converter(converters, webhook, "/wrong-uid", review_versions=("v1beta1", "v1"))
    [out] = await conv.convert([backend()], "v2")
    assert out["spec"] == {"address": "db.local:5432"}
    conv = url_converter(converters, webhook, "/convert", review_versions=("v2", "v3"))
    assert await failure(conv, [backend()]) == f"{SRC} failed: no supported conversion review versions"


# -- strategy Webhook: bad answers ----------------------------------------------------------------

async def test_wrong_uid(webhook: WebhookProcess, converters: list[CRConverter]) -> None:
    msg = await failure(url_converter(converters, webhook, "/wrong-uid"), [backend()])
    assert re.fullmatch(rf'{re.escape(SRC)} failed: {re.escape(HOOK)}: expected response\.uid="([0-9a-f-]+)", '
                        r'got "not-\1"', msg), msg


@pytest.mark.parametrize(("path", "expected"), [
    ("/wrong-count", f"{SRC} returned 0 objects, expected 1"),
    ("/change-name", f"{SRC} returned invalid converted object at index 1: must have the same name: b1 != b1-renamed"),
    ("/failure", f"{SRC} failed: {HOOK}: custom webhook conversion error"),
    ("/failure-nomessage", f"{SRC} failed: {HOOK}: response.result.status was 'Failure', not 'Success'"),
    ("/wrong-version", f"{SRC} returned invalid converted object at index 1: invalid groupVersion "
                       f"(expected {GROUP}/v2, received {GROUP}/v1)"),
    ("/no-response", f"{SRC} failed: {HOOK}: no response provided"),
    ("/v1beta1-response", f"{SRC} failed: {HOOK}: expected webhook response of apiextensions.k8s.io/v1, "
                          "Kind=ConversionReview, got apiextensions.k8s.io/v1beta1, Kind=ConversionReview"),
    ("/error-500", f'{SRC} failed: {HOOK}: an error on the server ("boom") has prevented the request from '
                   "succeeding"),
])
async def test_bad_answers(webhook: WebhookProcess, converters: list[CRConverter], path: str, expected: str) -> None:
    assert await failure(url_converter(converters, webhook, path), [backend()]) == expected


async def test_invalid_label_from_the_webhook(webhook: WebhookProcess, converters: list[CRConverter]) -> None:
    msg = await failure(url_converter(converters, webhook, "/bad-label"), [backend()])
    assert msg.startswith(f'{SRC} returned invalid metadata in object at index 1: metadata.labels: '
                          'Invalid value: "-not valid-": a valid label must be'), msg


async def test_count_is_checked_for_batches_too(webhook: WebhookProcess, converters: list[CRConverter]) -> None:
    msg = await failure(url_converter(converters, webhook, "/wrong-count"), [backend(), backend("b2")])
    assert msg == f"{SRC} returned 0 objects, expected 2"


async def test_timeout(webhook: WebhookProcess, converters: list[CRConverter]) -> None:
    conv = url_converter(converters, webhook, "/slow", timeout=1.0)
    msg = await failure(conv, [backend()])
    assert msg == f'{SRC} failed: {HOOK}: Post "{webhook.url}/slow?timeout=1s": context deadline exceeded'


# -- TLS and addressing ---------------------------------------------------------------------------

async def test_wrong_ca_bundle_is_a_tls_error(webhook: WebhookProcess, converters: list[CRConverter],
                                              tmp_path: Path) -> None:
    other = make_pki(tmp_path / "other", ["localhost"], ca_name="someone-else")
    conv = url_converter(converters, webhook, "/convert", ca=other.ca_bundle)
    msg = await failure(conv, [backend()])
    assert msg == (f'{SRC} failed: {HOOK}: Post "{webhook.url}/convert?timeout=30s": '
                   "tls: failed to verify certificate: x509: certificate signed by unknown authority")
    garbled = url_converter(converters, webhook, "/convert", ca="bm90IGEgUEVN")  # base64 of "not a PEM"
    assert await failure(garbled, [backend()]) == (
        f"{SRC} failed: {HOOK}: unable to load root certificates: unable to parse bytes as PEM block")


async def test_connection_refused(converters: list[CRConverter]) -> None:
    port = free_port()
    conv = CRConverter(webhook_crd({"url": f"https://127.0.0.1:{port}/convert"}))
    converters.append(conv)
    msg = await failure(conv, [backend()])
    assert msg == (f'{SRC} failed: {HOOK}: Post "https://127.0.0.1:{port}/convert?timeout=30s": '
                   f"dial tcp 127.0.0.1:{port}: connect: connection refused")


def external_name(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "webhooks"},
            "spec": {"type": "ExternalName", "externalName": "localhost"}}


async def test_service_reference_resolved_through_an_external_name(webhook: WebhookProcess,
                                                                   converters: list[CRConverter]) -> None:
    resolver = ServiceResolver(StaticLookup([external_name("conv-hook"), external_name("other-hook")]))
    config = {"service": {"namespace": "webhooks", "name": "conv-hook", "path": "/convert", "port": webhook.port},
              "caBundle": webhook.pki.ca_bundle}
    conv = CRConverter(webhook_crd(config), resolver)
    converters.append(conv)
    [out] = await conv.convert([backend()], "v2")
    assert out["spec"] == {"address": "db.local:5432"}

    # The certificate is verified against <name>.<namespace>.svc, not the resolved host.
    wrong = {**config, "service": {**config["service"], "name": "other-hook"}}
    conv = CRConverter(webhook_crd(wrong), resolver)
    converters.append(conv)
    msg = await failure(conv, [backend()])
    assert msg == (f'{SRC} failed: {HOOK}: Post "https://other-hook.webhooks.svc:{webhook.port}/convert'
                   '?timeout=30s": tls: failed to verify certificate: x509: certificate is valid for localhost, '
                   "conv-hook.webhooks.svc, not other-hook.webhooks.svc")

    missing = {**config, "service": {"namespace": "webhooks", "name": "gone", "path": "/convert"}}
    conv = CRConverter(webhook_crd(missing), resolver)
    converters.append(conv)
    msg = await failure(conv, [backend()])
    assert msg == (f'{SRC} failed: {HOOK}: Post "https://gone.webhooks.svc:443/convert?timeout=30s": '
                   'service "gone" not found')


# -- ConvertingWatcher: events converted, then selected; a failed conversion ends the watch with ERROR -------------
class _FakeInner:
    """Stands in for the cache's watcher: hands out prepared items."""

    def __init__(self, items: list[Any]) -> None:
        self.cache = None
        self.predicate = None
        self.items = list(items)
        self.closed = False

    async def next_item(self, wait: float | None) -> Any:
        return self.items.pop(0) if self.items else None

    def close(self) -> None:
        self.closed = True


def _obj(name: str, version: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": f"g.example.com/{version}", "kind": "K",
            "metadata": {"name": name, "labels": labels or {}}}


async def _to_v2_labelling(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A conversion that, as a webhook may, adds a label; 'broken' objects fail."""
    out = []
    for o in objs:
        if o["metadata"]["name"] == "broken":
            raise APIError(500, "", "conversion for g.example.com/v1, Kind=K failed: boom")
        c = copy.deepcopy(o)
        c["apiVersion"] = "g.example.com/v2"
        c["metadata"]["labels"] = {**c["metadata"]["labels"], "converted": "yes"}
        out.append(c)
    return out


async def test_watch_selects_on_the_converted_object() -> None:
    from extensionsapi.cr_store import ConvertingWatcher
    from genericapi.storage.cacher import CacheEvent

    def ev(kind: str, obj: dict[str, Any], prev: dict[str, Any] | None = None) -> CacheEvent:
        return CacheEvent(kind, obj["metadata"]["name"].encode(), obj, b"", prev, 7)

    wants_converted = lambda o: o["metadata"]["labels"].get("converted") == "yes"  # noqa: E731
    inner = _FakeInner([ev("ADDED", _obj("a", "v1"))])
    item = await ConvertingWatcher(inner, _to_v2_labelling, wants_converted).next_item(0.1)  # type: ignore[arg-type]
    assert item.type == "ADDED" and item.obj["apiVersion"] == "g.example.com/v2"  # type: ignore[union-attr]
    assert item.obj["metadata"]["labels"] == {"converted": "yes"}  # type: ignore[union-attr]
    # A selector the stored form would match but the converted one does not: the event is skipped.
    never = lambda o: "converted" not in o["metadata"]["labels"]  # noqa: E731
    inner = _FakeInner([ev("ADDED", _obj("a", "v1")), ev("MODIFIED", _obj("b", "v1"), _obj("b", "v1"))])
    assert await ConvertingWatcher(inner, _to_v2_labelling, never).next_item(0.1) is None  # type: ignore[arg-type]
    # Leaving the selection is a DELETED event; entering it an ADDED one.
    blue = lambda o: o["metadata"]["labels"].get("color") == "blue"  # noqa: E731
    inner = _FakeInner([ev("MODIFIED", _obj("c", "v1", {"color": "red"}), _obj("c", "v1", {"color": "blue"})),
                        ev("MODIFIED", _obj("d", "v1", {"color": "blue"}), _obj("d", "v1", {"color": "red"}))])
    watcher = ConvertingWatcher(inner, _to_v2_labelling, blue)  # type: ignore[arg-type]
    left, entered = await watcher.next_item(0.1), await watcher.next_item(0.1)
    assert left.type == "DELETED" and entered.type == "ADDED" and entered.prev is None  # type: ignore[union-attr]


async def test_watch_conversion_failure_is_an_error_event() -> None:
    from extensionsapi.cr_store import ConvertingWatcher
    from genericapi.registry.translate import to_api_error
    from genericapi.storage.cacher import CacheEvent, WatchClosed

    inner = _FakeInner([CacheEvent("ADDED", b"broken", _obj("broken", "v1"), b"", None, 3)])
    watcher = ConvertingWatcher(inner, _to_v2_labelling)  # type: ignore[arg-type]
    item = await watcher.next_item(0.1)
    assert isinstance(item, WatchClosed) and item.error is not None and inner.closed and watcher.closed
    status = to_api_error(item.error, None).status()  # type: ignore[arg-type]
    assert status["code"] == 500 and status["reason"] == "InternalError"
    assert status["message"] == "Internal error occurred: conversion for g.example.com/v1, Kind=K failed: boom"
