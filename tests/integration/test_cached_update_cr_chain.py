"""Through the chain: custom resources write in one etcd round trip, and PUT resourceVersions as kube.

extensions-api's ``etcd_requests_total`` (read over its own socket, as the gateway reaches it) is
compared around a merge patch, a PUT and a DELETE of a custom resource whose served version (v2)
goes through a real conversion webhook to the stored one (v1), once its watch cache holds the object
(a GET at resourceVersion=0 answers from it). The CRD is cluster-scoped: no namespace deletion
elsewhere in the shared chain lists it. Then kube's answers to a PUT's resourceVersion: "0" on a
ConfigMap is an unconditional update; one that does not parse is Go's ParseUint error (500, no
reason); on a custom resource "0" is 422 "must be specified for an update", as kubectl replace shows.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from support.conversion_webhook import Pki, WebhookProcess, make_pki
from support.procs import ChainHandle
from test_cached_update_chain import _Unix, cached, delta
from test_crds import establish

pytestmark = pytest.mark.integration

GROUP = "it-cu-chain.example.com"


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    pki: Pki = make_pki(tmp_path_factory.mktemp("cu-chain-pki"), ["localhost"])
    proc = WebhookProcess.start(pki)
    yield proc
    proc.stop()


def extensions_calls(chain: ChainHandle, resource: str) -> dict[str, int]:
    url = chain.chain.replica_urls["extensions-api"][0]
    assert url.startswith("unix://"), url
    conn = _Unix(url.removeprefix("unix://"))
    try:
        conn.request("GET", "/metrics", headers={"X-Remote-User": "admin", "X-Remote-Group": "system:masters"})
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    line = re.compile(r'^etcd_requests_total\{operation="([^"]*)",type="' + re.escape(resource)
                      + r'"\} ([0-9.e+]+)$', re.M)
    return {op: int(float(v)) for op, v in line.findall(text)}


def crd(webhook: WebhookProcess) -> str:
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}
    return json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"backends.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Cluster", "names": {"kind": "Backend", "plural": "backends"},
                 "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
                     "url": f"{webhook.url}/convert", "caBundle": webhook.pki.ca_bundle}}},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema},
                              {"name": "v2", "served": True, "storage": False, "schema": schema}]}})


def test_webhook_cr_patch_put_delete_are_one_etcd_call_each(chain: ChainHandle, webhook: WebhookProcess) -> None:
    establish(chain, crd(webhook), f"backends.{GROUP}")
    try:
        base = f"/apis/{GROUP}/v2/backends"
        name = f"b-{uuid.uuid4().hex[:8]}"
        status, created = chain.json("POST", base, {"apiVersion": f"{GROUP}/v2", "kind": "Backend",
                                                    "metadata": {"name": name}, "spec": {"address": "a.local:1"}})
        assert status == 201, created
        path = f"{base}/{name}"
        cached(chain, path, created["metadata"]["resourceVersion"])
        resource = f"backends.{GROUP}"

        before = extensions_calls(chain, resource)
        status, _h, raw = chain.request("PATCH", path, {"spec": {"address": "b.local:2"}},
                                        headers={"Content-Type": "application/merge-patch+json"})
        patched: dict[str, Any] = json.loads(raw)
        assert status == 200 and patched["spec"] == {"address": "b.local:2"}, patched
        assert delta(before, extensions_calls(chain, resource)) == {"update": 1}
        status, v1 = chain.json("GET", f"/apis/{GROUP}/v1/backends/{name}")
        assert status == 200 and v1["spec"] == {"host": "b.local", "port": 2}
        cached(chain, path, patched["metadata"]["resourceVersion"])

        before = extensions_calls(chain, resource)
        status, put = chain.json("PUT", path, {**patched, "spec": {"address": "c.local:3"}})
        assert status == 200 and put["spec"] == {"address": "c.local:3"}, put
        assert delta(before, extensions_calls(chain, resource)) == {"update": 1}
        cached(chain, path, put["metadata"]["resourceVersion"])

        # kubectl replace with resourceVersion "0": kube's 422 for a custom resource.
        zero = {**put, "metadata": {**put["metadata"], "resourceVersion": "0"}}
        out = chain.kubectl("replace", "-f", "-", input=json.dumps(zero), check=False)
        assert out.returncode != 0
        # kubectl words an Invalid Status from its details (kind: the resource, as kube's Store.Update puts it).
        assert out.stderr == (f'The backends "{name}" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
                              "must be specified for an update\n")

        before = extensions_calls(chain, resource)
        status, deleted = chain.json("DELETE", path)
        assert status == 200, deleted
        assert delta(before, extensions_calls(chain, resource)) == {"delete": 1}
        assert chain.json("GET", path)[0] == 404
    finally:
        chain.kubectl("delete", "crd", f"backends.{GROUP}", "--wait=false", check=False)


def test_put_resource_version_zero_and_unparseable_through_the_gateway(chain: ChainHandle) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    name = f"rv-{uuid.uuid4().hex[:8]}"
    status, created = chain.json("POST", base, {"metadata": {"name": name}, "data": {"k": "1"}})
    assert status == 201, created
    path = f"{base}/{name}"
    try:
        status, body = chain.json("PUT", path, {"metadata": {"name": name, "resourceVersion": "abc"},
                                                "data": {"k": "2"}})
        assert (status, body) == (500, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                        "message": 'strconv.ParseUint: parsing "abc": invalid syntax', "code": 500})
        status, body = chain.json("PUT", path, {"metadata": {"name": name, "resourceVersion": "0"},
                                                "data": {"k": "zero"}})
        assert status == 200 and body["data"] == {"k": "zero"}, body
        assert int(body["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    finally:
        chain.json("DELETE", path)

