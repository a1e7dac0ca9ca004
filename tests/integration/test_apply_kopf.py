"""A kopf operator against the chain ``kubechain up`` starts, with the custom resource managed by
``kubectl apply --server-side``: the operator's merge patches (finalizer, progress annotations, the
handlers' status) are recorded as ``kopf`` Update entries beside kubectl's Apply entry, a later
server-side apply changes the spec without conflicting with or removing what kopf added, and a
delete finishes through kopf's finalizer, as on a real cluster.

kopf runs in a thread with its own event loop, logging in from the chain's kubeconfig as its own
``login_with_kubeconfig`` does; nothing of kopf is replaced."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from support.procs import ChainHandle

kopf = pytest.importorskip("kopf")

pytestmark = pytest.mark.integration

NS = "kopf-apply"
GROUP = "kopf.example.com"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
LAST_HANDLED = "kopf.zalando.org/last-handled-configuration"

CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": f"widgets.{GROUP}"},
       "spec": {"group": GROUP, "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                              "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                  "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                                  "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


def wait_for(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


@pytest.fixture(scope="module")
def operator(chain: ChainHandle) -> Iterator[None]:
    chain.kubectl("create", "namespace", NS, check=False)
    chain.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(CRD))
    chain.kubectl("wait", "--for", "condition=Established", f"crd/widgets.{GROUP}", "--timeout=30s")
    registry = kopf.OperatorRegistry()

    @kopf.on.login(id="login", registry=registry)
    def login(**kwargs: Any) -> Any:
        return kopf.login_with_kubeconfig(**kwargs)

    @kopf.on.create(GROUP, "v1", "widgets", id="created", registry=registry)
    def created(spec: Any, **_: Any) -> dict[str, Any]:
        return {"seen": spec.get("size")}

    @kopf.on.update(GROUP, "v1", "widgets", id="resized", field="spec.size", registry=registry)
    def resized(new: Any, patch: Any, **_: Any) -> None:
        patch.status["size"] = new

    @kopf.on.delete(GROUP, "v1", "widgets", id="deleted", registry=registry)
    def deleted(**_: Any) -> None:
        pass

    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    stop, ready = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    mp = pytest.MonkeyPatch()
    mp.setenv("KUBECONFIG", chain.kubeconfig)

    def run() -> None:
        try:
            asyncio.run(kopf.operator(registry=registry, settings=settings, standalone=True, namespaces=[NS],
                                      stop_flag=stop, ready_flag=ready))
        except BaseException as err:  # reported by the fixture, not lost in the thread
            errors.append(err)

    thread = threading.Thread(target=run, name="kopf-operator", daemon=True)
    thread.start()
    try:
        assert ready.wait(60) and not errors, f"kopf did not start: {errors}"
        yield
    finally:
        stop.set()
        thread.join(30)
        mp.undo()
        chain.kubectl("delete", "namespace", NS, "--wait=false", check=False)


def widget(chain: ChainHandle, name: str) -> dict[str, Any]:
    return json.loads(chain.kubectl("get", "-n", NS, f"widgets.{GROUP}/{name}", "-o", "json",
                                    "--show-managed-fields").stdout)


def owners(obj: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"], e.get("subresource", "")): e["fieldsV1"]
            for e in obj["metadata"].get("managedFields") or []}


def test_kopf_and_server_side_apply_share_a_custom_resource(chain: ChainHandle, operator: None,
                                                            tmp_path: Any) -> None:
    manifest = tmp_path / "widget.yaml"

    def write(size: int) -> None:
        manifest.write_text(yaml.safe_dump({"apiVersion": f"{GROUP}/v1", "kind": "Widget",
                                            "metadata": {"name": "w1", "namespace": NS}, "spec": {"size": size}}))

    write(1)
    chain.kubectl("apply", "--server-side", "-f", str(manifest))
    obj = wait_for(lambda: (o := widget(chain, "w1")).get("status", {}).get("created") and o,
                   "kopf's create handler")
    assert obj["status"]["created"] == {"seen": 1}
    assert FINALIZER in obj["metadata"]["finalizers"] and LAST_HANDLED in obj["metadata"]["annotations"]
    got = owners(obj)
    assert got[("kubectl", "Apply", "")] == {"f:spec": {"f:size": {}}}
    # kopf's patches are Update entries of the manager its User-Agent names (kopf/<version>):
    # the finalizer and progress annotation on the object, the handler's result on /status.
    kopf_main = got[("kopf", "Update", "")]
    assert kopf_main["f:metadata"]["f:finalizers"][f'v:"{FINALIZER}"'] == {}
    assert f"f:{LAST_HANDLED}" in kopf_main["f:metadata"]["f:annotations"]
    assert "f:created" in got[("kopf", "Update", "status")]["f:status"]
    assert all(e["apiVersion"] == f"{GROUP}/v1" and e["fieldsType"] == "FieldsV1"
               for e in obj["metadata"]["managedFields"])

    # A new spec through server-side apply: no conflict with kopf (it owns none of the applied
    # fields), and kopf's finalizer and annotation stay: the applier never owned them.
    write(2)
    chain.kubectl("apply", "--server-side", "-f", str(manifest))
    obj = wait_for(lambda: (o := widget(chain, "w1")).get("status", {}).get("size") == 2 and o,
                   "kopf's update handler")
    assert obj["spec"] == {"size": 2}
    assert FINALIZER in obj["metadata"]["finalizers"]
    assert json.loads(obj["metadata"]["annotations"][LAST_HANDLED])["spec"] == {"size": 2}
    assert owners(obj)[("kubectl", "Apply", "")] == {"f:spec": {"f:size": {}}}

    # A delete waits for kopf's delete handler, which removes its finalizer.
    chain.kubectl("delete", "-n", NS, f"widgets.{GROUP}/w1", "--wait=false")
    wait_for(lambda: chain.kubectl("get", "-n", NS, f"widgets.{GROUP}/w1", check=False).returncode != 0,
             "the delete to finish through kopf's finalizer")
