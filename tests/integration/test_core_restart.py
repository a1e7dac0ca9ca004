"""core-api's controllers survive a crash midway: a namespace deletion and a foreground cascading
delete that are under way when core-api is SIGKILLed finish after it restarts, and leave nothing
in etcd (the Services' ClusterIPs and node ports included).

core-api here is a process of this test on its own key prefix of the session etcd. The restarted
process waits out the lease the killed one still holds (a crash releases nothing), then its
controllers, level-triggered, pick up where the dead ones stopped. Two things a crash can
strand are covered on purpose: an object marked for deletion whose removal never came (the
deleter deletes it again) and addresses released by nobody (the repair loops free them).
"""

from __future__ import annotations

import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from support.coreapi_procs import CoreAPIProcess, etcd_keys
from support.objects import create, owner_ref
from support.procs import EtcdServer
from support.waiting import eventually

pytestmark = pytest.mark.integration

POD_SPEC = {"containers": [{"name": "c", "image": "busybox:1.36"}]}
LABELS = {"app": "restart"}
#: Kinds filling the namespace: path, body (the Services allocate, the bound pod needs forcing).
KINDS: list[tuple[str, dict[str, Any]]] = [
    ("/api/v1/namespaces/{ns}/configmaps", {"data": {"k": "v"}}),
    ("/api/v1/namespaces/{ns}/secrets", {"stringData": {"k": "v"}}),
    ("/api/v1/namespaces/{ns}/serviceaccounts", {}),
    ("/api/v1/namespaces/{ns}/pods", {"spec": POD_SPEC}),
    ("/api/v1/namespaces/{ns}/pods", {"spec": {**POD_SPEC, "nodeName": "gone-node"}}),
    ("/api/v1/namespaces/{ns}/services", {"spec": {"type": "NodePort", "ports": [{"port": 80}]}}),
    ("/apis/apps/v1/namespaces/{ns}/deployments",
     {"spec": {"selector": {"matchLabels": LABELS}, "template": {"metadata": {"labels": LABELS}, "spec": POD_SPEC}}}),
    ("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles", {"rules": []}),
]
HOLD = "example.com/hold"
MERGE = {"Content-Type": "application/merge-patch+json"}
REPAIR_FAST = ["--allocation-repair-interval", "1", "--ipaddress-leak-grace-period", "2"]


def unhold(proc: CoreAPIProcess, path: str) -> None:
    from support.coreapi_procs import backend_request

    status, out = backend_request(proc.url, "PATCH", path, {"metadata": {"finalizers": None}}, headers=MERGE)
    assert status == 200, out


def explain_stuck_namespace(proc: CoreAPIProcess, etcd: EtcdServer, prefix: str, namespace: str) -> None:
    """What a failure needs: the namespace's conditions, what is left of it, and where every task
    of the process waits (SIGUSR1 makes it log its asyncio tasks)."""
    print(proc.json("GET", f"/api/v1/namespaces/{namespace}"))
    print([k for k in etcd_keys(etcd.endpoint, f"{prefix}/") if f"/{namespace}" in k])
    if proc.process is not None:
        proc.process.send_signal(signal.SIGUSR1)
        time.sleep(1)
    print(proc.log_tail(30000))


def test_namespace_and_foreground_deletes_finish_after_a_crash(etcd_server: EtcdServer, tmp_path: Path) -> None:
    prefix = f"/restart-{uuid.uuid4().hex[:8]}"
    core = CoreAPIProcess(etcd_server.endpoint, prefix, tmp_path / "core-1.log").start()
    restarted: CoreAPIProcess | None = None
    try:
        core.wait_ready()
        big, fg = "big", "fg"
        for ns in (big, fg):
            create(core, "/api/v1/namespaces", {"metadata": {"name": ns}})

        def make(i: int) -> None:
            path, extra = KINDS[i % len(KINDS)]
            create(core, path.format(ns=big), {**extra, "metadata": {"name": f"o{i}"}})

        with ThreadPoolExecutor(6) as pool:
            list(pool.map(make, range(240)))
        # One object a finalizer holds: the namespace cannot finish before the restart.
        create(core, f"/api/v1/namespaces/{big}/configmaps", {"metadata": {"name": "held", "finalizers": [HOLD]}})
        # Deployment -> ReplicaSet -> Pod (held), and a ConfigMap dependent that does not block.
        spec = {"selector": {"matchLabels": LABELS}, "template": {"metadata": {"labels": LABELS}, "spec": POD_SPEC}}
        dep = create(core, f"/apis/apps/v1/namespaces/{fg}/deployments", {"metadata": {"name": "web"}, "spec": spec})
        rs = create(core, f"/apis/apps/v1/namespaces/{fg}/replicasets",
                    {"metadata": {"name": "web-rs", "ownerReferences": [owner_ref(dep)]}, "spec": spec})
        create(core, f"/api/v1/namespaces/{fg}/pods",
               {"metadata": {"name": "web-pod",
                             "ownerReferences": [owner_ref(rs)], "finalizers": [HOLD]}, "spec": POD_SPEC})
        create(core, f"/api/v1/namespaces/{fg}/configmaps",
               {"metadata": {"name": "web-cm", "ownerReferences": [{**owner_ref(dep), "blockOwnerDeletion": False}]}})
        services = [o for o in core.json("GET", f"/api/v1/namespaces/{big}/services")[1]["items"]]
        ips = {s["spec"]["clusterIP"] for s in services}
        assert len(services) == 30 and len(ips) == 30
        before = len(etcd_keys(etcd_server.endpoint, f"{prefix}/"))

        status, out = core.json("DELETE", f"/apis/apps/v1/namespaces/{fg}/deployments/web",
                                {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"})
        assert status == 200 and out["metadata"]["finalizers"] == ["foregroundDeletion"], out
        status, _ = core.json("DELETE", f"/api/v1/namespaces/{big}")
        assert status == 200
        # Kill as soon as the controllers have started on it: some content gone, some not.
        in_big = eventually(lambda: (n := len(etcd_keys(etcd_server.endpoint, f"{prefix}/")))
                          < before - 5 and n, 20, "namespace deletion under way")
        core.kill()
        left = len([k for k in etcd_keys(etcd_server.endpoint, f"{prefix}/") if f"/{big}/" in k])
        print(f"killed with {left} of ~{240 + 2} keys of the namespace left ({before - in_big} gone)")
        assert left > 0
        keys = etcd_keys(etcd_server.endpoint, f"{prefix}/")
        leaked_ips = len([k for k in keys if "/ipaddresses/" in k]) - len([k for k in keys if "/services/" in k])
        print(f"{leaked_ips} ClusterIPs leaked by the crash (released by nobody)")

        # Short repair timings, so that what the crash leaked comes back within the test.
        restarted = CoreAPIProcess(etcd_server.endpoint, prefix, tmp_path / "core-2.log",
                                   extra_args=REPAIR_FAST).start()
        restarted.wait_ready()
        started = time.monotonic()
        # The finalizers' owners are done: release them. The rest is the restarted controllers' work.
        unhold(restarted, f"/api/v1/namespaces/{big}/configmaps/held")
        eventually(lambda: (restarted.json("GET", f"/api/v1/namespaces/{fg}/pods/web-pod")[1] or {})
                 .get("metadata", {}).get("deletionTimestamp"), 25, "the held pod deleted in the foreground")
        unhold(restarted, f"/api/v1/namespaces/{fg}/pods/web-pod")
        try:
            eventually(lambda: restarted.json("GET", f"/api/v1/namespaces/{big}")[0] == 404, 60, "namespace gone")
        except AssertionError:
            explain_stuck_namespace(restarted, etcd_server, prefix, big)
            raise
        eventually(lambda: restarted.json("GET", f"/apis/apps/v1/namespaces/{fg}/deployments/web")[0] == 404, 30,
                 "foreground owner gone")
        print(f"finished {time.monotonic() - started:.1f}s after the restart")
        keys = etcd_keys(etcd_server.endpoint, f"{prefix}/")
        assert [k for k in keys if f"/{big}" in k] == []
        assert [k for k in keys if f"/{fg}/" in k and "/web" in k] == []
        # Every ClusterIP and node port of the deleted Services is given back: at once by the
        # deletes, or by the repair loops for those a crash between delete and release leaked.
        from coreapi.allocation import PortRange
        from coreapi.allocation.portallocator import PortBitmap
        from support.coreapi_procs import etcd_value

        def addresses() -> list[str]:
            _s, found = restarted.json("GET", "/apis/networking.k8s.io/v1/ipaddresses")
            return [a["metadata"]["name"] for a in found["items"]]

        def ports() -> list[int]:
            raw = etcd_value(etcd_server.endpoint, f"{prefix}/ranges/servicenodeports")
            return PortBitmap.decode(PortRange.parse("30000-32767"), raw).taken()

        eventually(lambda: addresses() == ["10.0.0.1"], 20, "every ClusterIP released")
        eventually(lambda: ports() == [], 20, "every node port released")
        if leaked_ips:
            assert "appears to have leaked: cleaning up" in restarted.log_tail(200_000)
        _s, svcs = restarted.json("GET", "/api/v1/services")
        assert [s["metadata"]["name"] for s in svcs["items"]] == ["kubernetes"]
    finally:
        core.stop()
        if restarted is not None:
            restarted.stop()
