"""Custom resources in core-api's controllers: a namespace holding custom resources (served by
extensions-api, found through discovery) is deleted completely, right after its CRD is
established too, and ownerReferences between custom resources and built-ins are garbage-collected
both ways, with background, foreground and orphan propagation on custom resources."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from support.objects import create, gone, owner_ref
from support.procs import ChainHandle
from support.waiting import eventually
from test_crds import etcd_keys

pytestmark = pytest.mark.integration

WIDGET_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: widgets.{group}}}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {{type: object, properties: {{size: {{type: integer}}}}}}
"""
MERGE = {"Content-Type": "application/merge-patch+json"}


def apply_crd(chain: ChainHandle, group: str) -> None:
    out = chain.kubectl("apply", "-f", "-", input=WIDGET_CRD.format(group=group))
    assert f"customresourcedefinition.apiextensions.k8s.io/widgets.{group} created" in out.stdout
    chain.kubectl("wait", "--for", "condition=Established", f"crd/widgets.{group}", "--timeout=15s")


@pytest.fixture(scope="module")
def group(chain: ChainHandle) -> Iterator[str]:
    name = f"gc{uuid.uuid4().hex[:6]}.example.com"
    apply_crd(chain, name)
    yield name
    chain.kubectl("delete", "crd", f"widgets.{name}", "--wait=false", check=False)


@pytest.fixture(scope="module")
def ns(chain: ChainHandle, group: str) -> str:
    name = f"crgc-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", name)
    return name


def widgets(group: str, ns: str) -> str:
    return f"/apis/{group}/v1/namespaces/{ns}/widgets"


def test_namespace_with_custom_resources_right_after_the_crd(chain: ChainHandle) -> None:
    """The CRD is new when the namespace goes: the namespace controller must still find its objects."""
    group, ns = f"nsdel{uuid.uuid4().hex[:6]}.example.com", f"crns-{uuid.uuid4().hex[:6]}"
    apply_crd(chain, group)
    try:
        chain.kubectl("create", "namespace", ns)
        for i in range(15):
            create(chain, widgets(group, ns), {"apiVersion": f"{group}/v1", "kind": "Widget",
                                               "metadata": {"name": f"w{i}"}, "spec": {"size": i}})
        chain.kubectl("-n", ns, "create", "configmap", "plain", "--from-literal=a=b")
        # A custom resource a finalizer holds: the namespace waits for it, and says so.
        create(chain, widgets(group, ns), {"apiVersion": f"{group}/v1", "kind": "Widget",
                                           "metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
        prefix = f"{chain.chain.etcd_prefix}/{group}/widgets/{ns}/"
        assert len(etcd_keys(chain, prefix)) == 16
        status, _ = chain.json("DELETE", f"/api/v1/namespaces/{ns}")
        assert status == 200

        def waiting_on_finalizer() -> bool:
            status, body = chain.json("GET", f"/api/v1/namespaces/{ns}")
            assert status == 200, "the namespace went while a custom resource held it"
            conds = {c["type"]: c for c in (body.get("status") or {}).get("conditions") or []}
            return conds.get("NamespaceFinalizersRemaining", {}).get("status") == "True"

        eventually(waiting_on_finalizer, what="namespace waiting on the held widget")
        _s, body = chain.json("GET", f"/api/v1/namespaces/{ns}")
        conds = {c["type"]: c for c in body["status"]["conditions"]}
        assert conds["NamespaceContentRemaining"]["message"] == \
            f"Some resources are remaining: widgets.{group} has 1 resource instances"
        assert conds["NamespaceFinalizersRemaining"]["message"] == \
            "Some finalizers are remaining: example.com/hold in 1 resource instances"
        assert [k.rsplit("/", 1)[1] for k in etcd_keys(chain, prefix)] == ["held"]
        status, _ = chain.json("PATCH", f"{widgets(group, ns)}/held", {"metadata": {"finalizers": None}},
                               headers=MERGE)
        assert status == 200
        eventually(lambda: gone(chain, f"/api/v1/namespaces/{ns}"), what="namespace gone")
        assert etcd_keys(chain, prefix) == []
        assert etcd_keys(chain, f"{chain.chain.etcd_prefix}/configmaps/{ns}/") == []
    finally:
        chain.kubectl("delete", "crd", f"widgets.{group}", "--wait=false", check=False)


def test_namespace_deleted_at_once_after_its_crd(chain: ChainHandle) -> None:
    """No finalizer: the namespace controller's first pass may come before anything polls discovery."""
    group, ns = f"fast{uuid.uuid4().hex[:6]}.example.com", f"crfast-{uuid.uuid4().hex[:6]}"
    apply_crd(chain, group)
    try:
        chain.kubectl("create", "namespace", ns)
        for i in range(5):
            create(chain, widgets(group, ns), {"apiVersion": f"{group}/v1", "kind": "Widget",
                                               "metadata": {"name": f"w{i}"}})
        chain.kubectl("delete", "namespace", ns, timeout=60)
        assert etcd_keys(chain, f"{chain.chain.etcd_prefix}/{group}/widgets/{ns}/") == []
    finally:
        chain.kubectl("delete", "crd", f"widgets.{group}", "--wait=false", check=False)


def test_custom_resource_owned_by_a_configmap(chain: ChainHandle, group: str, ns: str) -> None:
    owner = create(chain, f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "cm-owner"}})
    create(chain, widgets(group, ns), {"apiVersion": f"{group}/v1", "kind": "Widget",
                                       "metadata": {"name": "owned",
                                                    "ownerReferences": [owner_ref(owner, controller=None)]}})
    chain.kubectl("-n", ns, "delete", "configmap", "cm-owner")
    eventually(lambda: gone(chain, f"{widgets(group, ns)}/owned"), what="widget collected")


def test_configmap_owned_by_a_custom_resource(chain: ChainHandle, group: str, ns: str) -> None:
    owner = create(chain, widgets(group, ns), {"apiVersion": f"{group}/v1", "kind": "Widget",
                                               "metadata": {"name": "w-owner"}})
    create(chain, f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "owned-cm",
                                                                      "ownerReferences": [
                                                                          owner_ref(owner, controller=None)]}})
    create(chain, widgets(group, ns), {"apiVersion": f"{group}/v1", "kind": "Widget",
                                       "metadata": {"name": "owned-w",
                                                    "ownerReferences": [owner_ref(owner, controller=None)]}})
    chain.kubectl("-n", ns, "delete", f"widgets.{group}", "w-owner")
    eventually(lambda: gone(chain, f"/api/v1/namespaces/{ns}/configmaps/owned-cm")
               and gone(chain, f"{widgets(group, ns)}/owned-w"), what="dependents collected")


def test_dangling_owner_of_a_custom_resource(chain: ChainHandle, group: str, ns: str) -> None:
    never = {"apiVersion": "v1", "kind": "ConfigMap", "name": "never-was", "uid": str(uuid.uuid4())}
    create(chain, widgets(group, ns), {"apiVersion": f"{group}/v1", "kind": "Widget",
                                       "metadata": {"name": "orphaned", "ownerReferences": [never]}})
    eventually(lambda: gone(chain, f"{widgets(group, ns)}/orphaned"), what="dangling widget collected")


def test_foreground_deletion_of_a_custom_resource(chain: ChainHandle, group: str, ns: str) -> None:
    owner = create(chain, widgets(group, ns), {"apiVersion": f"{group}/v1", "kind": "Widget",
                                               "metadata": {"name": "fg-owner"}})
    create(chain, f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {
        "name": "fg-cm", "ownerReferences": [owner_ref(owner, controller=None)], "finalizers": ["example.com/hold"]}})
    status, out = chain.json("DELETE", f"{widgets(group, ns)}/fg-owner",
                             {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"})
    assert status == 200, out
    assert out["metadata"]["finalizers"] == ["foregroundDeletion"] and out["metadata"]["deletionTimestamp"]
    eventually(lambda: chain.json("GET", f"/api/v1/namespaces/{ns}/configmaps/fg-cm")[1]["metadata"]
               .get("deletionTimestamp"), what="dependent deleted first")
    time.sleep(0.5)
    _s, waiting = chain.json("GET", f"{widgets(group, ns)}/fg-owner")
    assert waiting["metadata"]["finalizers"] == ["foregroundDeletion"]
    chain.json("PATCH", f"/api/v1/namespaces/{ns}/configmaps/fg-cm", {"metadata": {"finalizers": None}},
               headers=MERGE)
    eventually(lambda: gone(chain, f"{widgets(group, ns)}/fg-owner"), what="owner released")
    # kubectl's --cascade=foreground waits for the same.
    owner = create(chain, widgets(group, ns), {"apiVersion": f"{group}/v1", "kind": "Widget",
                                               "metadata": {"name": "kfg-owner"}})
    create(chain, widgets(group, ns), {"apiVersion": f"{group}/v1", "kind": "Widget",
                                       "metadata": {"name": "kfg-dep",
                                                    "ownerReferences": [owner_ref(owner, controller=None)]}})
    chain.kubectl("-n", ns, "delete", f"widgets.{group}", "kfg-owner", "--cascade=foreground", timeout=60)
    assert gone(chain, f"{widgets(group, ns)}/kfg-dep")


def test_orphan_deletion_of_a_custom_resource(chain: ChainHandle, group: str, ns: str) -> None:
    owner = create(chain, widgets(group, ns), {"apiVersion": f"{group}/v1", "kind": "Widget",
                                               "metadata": {"name": "or-owner"}})
    create(chain, f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "or-cm",
                                                                      "ownerReferences": [
                                                                          owner_ref(owner, controller=None)]}})
    out = chain.kubectl("-n", ns, "delete", f"widgets.{group}", "or-owner", "--cascade=orphan", timeout=60)
    assert f'widget.{group} "or-owner" deleted' in out.stdout
    eventually(lambda: gone(chain, f"{widgets(group, ns)}/or-owner"), what="owner gone")
    time.sleep(0.5)
    status, cm = chain.json("GET", f"/api/v1/namespaces/{ns}/configmaps/or-cm")
    assert status == 200 and "ownerReferences" not in cm["metadata"], cm
