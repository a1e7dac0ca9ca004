"""The pod garbage collector's rule for unscheduled pods stranded by a crash: a pod marked for
deletion (grace 0) whose removal never came is set Failed and removed, as kube's podgc does; a
marked pod held by a finalizer, and a scheduled pod in its grace period, are left alone.

The stranded state is staged in etcd with etcdctl (the API server never leaves it on purpose).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from support.coreapi_procs import etcd_put, etcd_value
from support.procs import ChainHandle
from support.waiting import eventually

pytestmark = pytest.mark.integration

NS = "podgc"


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}], **spec}}


def strand(chain: ChainHandle, name: str, **meta: Any) -> None:
    """Mark the stored pod for deletion with grace 0, as the first of the two delete writes does."""
    key = f"{chain.chain.etcd_prefix}/pods/{NS}/{name}"
    stored = json.loads(etcd_value(chain.chain.etcd_endpoints, key))
    stored["metadata"].update(deletionTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              deletionGracePeriodSeconds=0, **meta)
    etcd_put(chain.chain.etcd_endpoints, key, json.dumps(stored).encode())


def test_a_stranded_unscheduled_pod_is_collected(chain: ChainHandle) -> None:
    chain.kubectl("create", "namespace", NS)
    base = f"/api/v1/namespaces/{NS}/pods"
    for body in (pod("stranded"), pod("held"), pod("bound", nodeName="node-1")):
        status, out = chain.json("POST", base, body)
        assert status == 201, out
    strand(chain, "stranded")
    strand(chain, "held", finalizers=["example.com/hold"])
    status, out = chain.json("DELETE", f"{base}/bound")
    assert status == 200 and out["metadata"]["deletionGracePeriodSeconds"] == 30

    eventually(lambda: chain.json("GET", f"{base}/stranded")[0] == 404, 20, "the stranded pod collected")
    time.sleep(3)  # the collector's delay has passed: the others must still be there
    status, held = chain.json("GET", f"{base}/held")
    assert status == 200 and held["metadata"]["finalizers"] == ["example.com/hold"]
    assert held["status"]["phase"] == "Pending"
    assert chain.json("GET", f"{base}/bound")[0] == 200
    # Released, the held one goes as any marked object does.
    status, out = chain.json("PATCH", f"{base}/held", {"metadata": {"finalizers": None}},
                             headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200, out
    eventually(lambda: chain.json("GET", f"{base}/held")[0] == 404, 10, "the released pod gone")
    chain.kubectl("delete", "pod", "bound", "-n", NS, "--grace-period=0", "--force")
