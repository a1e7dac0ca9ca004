"""Pod deletion as kube-apiserver does it: at once for Pods that never ran or have finished,
gracefully (deletionTimestamp + grace period, the Pod stays) for scheduled ones; a shorter grace
period shortens it; ``--grace-period=0 --force`` removes the Pod."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration


def pod(name: str, node: str = "", grace: int | None = None, finalizers: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    if node:
        spec["nodeName"] = node
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    meta: dict[str, Any] = {"name": name}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")


def stamp(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def ns(chain: ChainHandle) -> str:
    chain.kubectl("create", "namespace", "poddel")
    return "poddel"


def test_unscheduled_pod_goes_at_once(chain: ChainHandle, ns: str) -> None:
    assert chain.json("POST", path(ns), pod("pending"))[0] == 201
    status, body = chain.json("DELETE", path(ns, "pending"))
    assert status == 200
    assert body["kind"] == "Pod" and body["metadata"]["deletionGracePeriodSeconds"] == 0
    assert "deletionTimestamp" in body["metadata"]
    assert chain.json("GET", path(ns, "pending"))[0] == 404
    chain.kubectl("run", "viakubectl", "--image=nginx:1.25", "-n", ns)
    out = chain.kubectl("delete", "pod", "viakubectl", "-n", ns, timeout=20)
    assert 'pod "viakubectl" deleted' in out.stdout
    assert chain.json("GET", path(ns, "viakubectl"))[0] == 404


def test_scheduled_pod_is_deleted_gracefully(chain: ChainHandle, ns: str) -> None:
    assert chain.json("POST", path(ns), pod("running", node="node-1", grace=45))[0] == 201
    out = chain.kubectl("delete", "pod", "running", "-n", ns, "--wait=false")
    assert 'pod "running" deleted' in out.stdout
    status, live = chain.json("GET", path(ns, "running"))
    assert status == 200
    meta = live["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 45
    first = stamp(meta["deletionTimestamp"])
    assert 40 <= (first - stamp(meta["creationTimestamp"])).total_seconds() <= 50
    # an update while the grace period runs does not delete it
    chain.kubectl("label", "pod", "running", "-n", ns, "x=y")
    assert chain.json("GET", path(ns, "running"))[0] == 200
    # a longer grace period changes nothing; a shorter one moves the deadline earlier
    status, same = chain.json("DELETE", path(ns, "running"), {"gracePeriodSeconds": 100})
    assert status == 200 and same["metadata"]["deletionGracePeriodSeconds"] == 45
    status, shorter = chain.json("DELETE", path(ns, "running"), {"gracePeriodSeconds": 5})
    assert status == 200 and shorter["metadata"]["deletionGracePeriodSeconds"] == 5
    assert (first - stamp(shorter["metadata"]["deletionTimestamp"])).total_seconds() == 40
    assert chain.json("GET", path(ns, "running"))[0] == 200
    out = chain.kubectl("delete", "pod", "running", "-n", ns, "--grace-period=0", "--force")
    assert 'pod "running" force deleted' in out.stdout
    assert chain.json("GET", path(ns, "running"))[0] == 404


def test_default_grace_and_dry_run(chain: ChainHandle, ns: str) -> None:
    assert chain.json("POST", path(ns), pod("defaulted", node="node-1"))[0] == 201
    status, dry = chain.json("DELETE", path(ns, "defaulted") + "?dryRun=All")
    assert status == 200 and dry["metadata"]["deletionGracePeriodSeconds"] == 30
    status, live = chain.json("GET", path(ns, "defaulted"))
    assert "deletionTimestamp" not in live["metadata"]
    status, body = chain.json("DELETE", path(ns, "defaulted"))
    assert status == 200 and body["metadata"]["deletionGracePeriodSeconds"] == 30
    status, body = chain.json("DELETE", path(ns, "defaulted"), {"gracePeriodSeconds": 0})
    assert status == 200
    assert chain.json("GET", path(ns, "defaulted"))[0] == 404


def test_finished_pod_goes_at_once(chain: ChainHandle, ns: str) -> None:
    status, created = chain.json("POST", path(ns), pod("done", node="node-1"))
    assert status == 201
    created["status"] = {"phase": "Succeeded"}
    status, body = chain.json("PUT", path(ns, "done") + "/status", created)
    assert status == 200, body
    assert chain.json("DELETE", path(ns, "done"))[0] == 200
    assert chain.json("GET", path(ns, "done"))[0] == 404


def test_finalizers_hold_a_force_deleted_pod(chain: ChainHandle, ns: str) -> None:
    assert chain.json("POST", path(ns), pod("held", node="node-1", finalizers=["example.com/hold"]))[0] == 201
    status, body = chain.json("DELETE", path(ns, "held"), {"gracePeriodSeconds": 0})
    assert status == 200 and body["metadata"]["deletionGracePeriodSeconds"] == 0
    assert chain.json("GET", path(ns, "held"))[0] == 200
    patch = json.dumps({"metadata": {"finalizers": None}})
    chain.kubectl("patch", "pod", "held", "-n", ns, "--type=merge", "-p", patch)
    assert chain.json("GET", path(ns, "held"))[0] == 404


def test_other_kinds_still_delete_at_once(chain: ChainHandle, ns: str) -> None:
    chain.kubectl("create", "configmap", "cm", "-n", ns, "--from-literal=a=b")
    status, body = chain.json("DELETE", f"/api/v1/namespaces/{ns}/configmaps/cm", {"gracePeriodSeconds": 30})
    assert status == 200 and body["kind"] == "Status"
    assert chain.json("GET", f"/api/v1/namespaces/{ns}/configmaps/cm")[0] == 404
