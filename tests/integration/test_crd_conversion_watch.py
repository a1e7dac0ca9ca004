"""Watches of a webhook-converted custom resource through the real chain and a real conversion webhook.

kube's watch cache converts each event once per served version and every watcher of that version
gets the same object (and bytes): N watchers of one change cost one conversion webhook call, not
N. An object leaving a watcher's label selection is sent DELETED with its previous content at the
change's resourceVersion (kube's ``cacheWatcher.convertToWatchEvent``). A webhook that goes away
ends the watches with kube's error, and once it is back new watches convert again (a failed
conversion is not remembered).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from support.conversion_webhook import Pki, WebhookProcess, make_pki
from support.procs import ChainHandle
from test_crd_conversion import backends_crd
from test_crds import establish, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def hook_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("watch-hook-pki"), ["localhost"])


@pytest.fixture
def webhook(hook_pki: Pki) -> Iterator[list[WebhookProcess]]:
    """The webhook, in a list so a test can stop it and start it again on its port."""
    procs = [WebhookProcess.start(hook_pki)]
    yield procs
    procs[-1].stop()


def _crd(chain: ChainHandle, webhook: WebhookProcess, group: str, ns: str) -> str:
    """A Backend CRD stored at v1, served at v2 through the webhook's ``/convert``; its v2 base path."""
    chain.kubectl("create", "namespace", ns)
    establish(chain, backends_crd(group, {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"url": f"{webhook.url}/convert", "caBundle": webhook.pki.ca_bundle}}}),
        f"backends.{group}")
    return f"/apis/{group}/v2/namespaces/{ns}/backends"


def _create_v1(chain: ChainHandle, group: str, ns: str, name: str, labels: dict[str, str] | None = None) -> str:
    """Created at the storage version (no conversion on the way in); its resourceVersion."""
    status, body = chain.json("POST", f"/apis/{group}/v1/namespaces/{ns}/backends", {
        "apiVersion": f"{group}/v1", "kind": "Backend", "metadata": {"name": name, "labels": labels or {}},
        "spec": {"host": f"{name}.local", "port": 80}})
    assert status == 201, body
    return str(body["metadata"]["resourceVersion"])


def _list_rv(chain: ChainHandle, group: str, ns: str) -> str:
    status, listed = chain.json("GET", f"/apis/{group}/v1/namespaces/{ns}/backends")  # storage version: no call
    assert status == 200, listed
    return str(listed["metadata"]["resourceVersion"])


class Watch(threading.Thread):
    """One client watch read line by line until it has ``want`` events, an ERROR, or its end."""

    def __init__(self, chain: ChainHandle, path: str, want: int) -> None:
        super().__init__(daemon=True)
        self.chain, self.path, self.want = chain, path, want
        self.events: list[dict[str, Any]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            req = urllib.request.Request(self.chain.url + self.path)
            with urllib.request.urlopen(req, context=self.chain.ssl_context(), timeout=90) as r:
                for line in r:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event["type"] == "BOOKMARK":
                        continue
                    self.events.append(event)
                    if event["type"] == "ERROR" or len(self.events) >= self.want:
                        return
        except BaseException as err:  # reported by the test
            self.error = err


def _watch_all(chain: ChainHandle, path: str, n: int, want: int) -> list[Watch]:
    watches = [Watch(chain, path, want) for _ in range(n)]
    for w in watches:
        w.start()
    return watches


def _join(watches: list[Watch], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    for w in watches:
        w.join(max(0.1, deadline - time.monotonic()))
        assert not w.is_alive(), f"a watch did not get its events in {timeout} s: {w.events}"
        assert w.error is None, w.error


def _reviews(hook: WebhookProcess) -> int:
    return hook.calls()["reviews"].get("convert", 0)


def _conversions_for(chain: ChainHandle, hook: WebhookProcess, group: str, ns: str, base: str,
                     watchers: int, writes: int) -> int:
    """ConversionReviews the webhook answers while ``watchers`` clients watch ``writes`` creates at v2."""
    rv = _list_rv(chain, group, ns)
    before = _reviews(hook)
    watches = _watch_all(chain, f"{base}?watch=1&resourceVersion={rv}&timeoutSeconds=120", watchers, writes)
    tag = f"w{watchers}"
    names = [f"{tag}-{i}" for i in range(writes)]
    for name in names:
        _create_v1(chain, group, ns, name)
    _join(watches)
    for w in watches:  # every watcher got every change, converted
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in w.events] == [("ADDED", n) for n in names]
        assert all(e["object"]["apiVersion"] == f"{group}/v2" and e["object"]["spec"] == {
            "address": f"{e['object']['metadata']['name']}.local:80"} for e in w.events), w.events
    return _reviews(hook) - before


def test_watchers_of_one_version_share_each_events_conversion(chain: ChainHandle,
                                                              webhook: list[WebhookProcess]) -> None:
    group, ns = "it-conv-watch-once.example.com", "conv-watch-once"
    hook = webhook[0]
    base = _crd(chain, hook, group, ns)
    writes = 6
    one = _conversions_for(chain, hook, group, ns, base, 1, writes)
    eight = _conversions_for(chain, hook, group, ns, base, 8, writes)
    # One ConversionReview per change whatever the number of watchers (before: one per watcher per
    # change, 6 and 48). Other readers of v2 may add a review of their own: the garbage collector's
    # informer lists the served version (one review for the list) when it picks up a new CRD.
    counts = f"1 watcher: {one} ConversionReviews for {writes} changes; 8 watchers: {eight}"
    assert writes <= one <= writes + 1 and writes <= eight <= writes + 1, counts
    chain.kubectl("delete", "crd", f"backends.{group}")


def test_leaving_the_selection_is_deleted_with_the_previous_object(chain: ChainHandle,
                                                                   webhook: list[WebhookProcess]) -> None:
    group, ns = "it-conv-watch-sel.example.com", "conv-watch-sel"
    base = _crd(chain, webhook[0], group, ns)
    rv = _list_rv(chain, group, ns)
    watches = _watch_all(chain, f"{base}?watch=1&resourceVersion={rv}&labelSelector=tier%3Dweb"
                                "&timeoutSeconds=120", 3, 2)
    _create_v1(chain, group, ns, "site", {"tier": "web"})
    status, patched = chain.json("PATCH", f"/apis/{group}/v1/namespaces/{ns}/backends/site",
                                 {"metadata": {"labels": {"tier": "db"}}, "spec": {"port": 81}},
                                 headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200, patched
    _join(watches)
    for w in watches:
        added, deleted = w.events
        assert added["type"] == "ADDED" and added["object"]["metadata"]["labels"] == {"tier": "web"}
        # kube: the previous object's content (its labels and spec), at the change's resourceVersion.
        assert deleted["type"] == "DELETED", w.events
        assert deleted["object"]["apiVersion"] == f"{group}/v2"
        assert deleted["object"]["metadata"]["labels"] == {"tier": "web"}, deleted
        assert deleted["object"]["spec"] == {"address": "site.local:80"}, deleted
        assert deleted["object"]["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    chain.kubectl("delete", "crd", f"backends.{group}")


def test_webhook_down_ends_the_watches_and_back_serves_new_ones(chain: ChainHandle, hook_pki: Pki,
                                                                webhook: list[WebhookProcess]) -> None:
    group, ns = "it-conv-watch-down.example.com", "conv-watch-down"
    hook = webhook[0]
    base = _crd(chain, hook, group, ns)
    rv = _list_rv(chain, group, ns)
    watches = _watch_all(chain, f"{base}?watch=1&resourceVersion={rv}&timeoutSeconds=120", 4, 2)
    _create_v1(chain, group, ns, "before")
    assert wait_for(lambda: all(len(w.events) == 1 for w in watches), timeout=60), [w.events for w in watches]
    hook.stop()
    _create_v1(chain, group, ns, "during")
    _join(watches)
    for w in watches:
        assert w.events[0]["type"] == "ADDED" and w.events[0]["object"]["spec"] == {"address": "before.local:80"}
        assert w.events[1]["type"] == "ERROR", w.events
        status = w.events[1]["object"]
        assert status["kind"] == "Status" and status["code"] == 500 and status["reason"] == "InternalError"
        assert status["message"] == (
            f"Internal error occurred: conversion for {group}/v1, Kind=Backend failed: conversion webhook for "
            f'/, Kind= failed: Post "{hook.url}/convert?timeout=30s": dial tcp 127.0.0.1:{hook.port}: '
            "connect: connection refused"), status
    # Back on its port: a new watch from the start converts both objects, "during" included.
    webhook.append(WebhookProcess.start(hook_pki, hook.port))
    again = _watch_all(chain, f"{base}?watch=1&resourceVersion=0&timeoutSeconds=120", 2, 2)
    _join(again)
    for w in again:
        assert sorted((e["type"], e["object"]["spec"]["address"]) for e in w.events) == [
            ("ADDED", "before.local:80"), ("ADDED", "during.local:80")], w.events
    chain.kubectl("delete", "crd", f"backends.{group}")

