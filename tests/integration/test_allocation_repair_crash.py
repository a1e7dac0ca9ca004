"""The allocation repair loops on real etcd: what a crash between a Service's write and its
allocation record leaves behind is put right while core-api runs.

A crash is stood in for by etcdctl: deleting a Service's key without its release leaves its
ClusterIP and node port held by nobody (a leak); deleting an IPAddress key leaves a Service
without its record. Until the repair acts, the leaked address stays taken (kube's 422); then it
is free again, and the missing record is back. The process runs with short repair timings.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from coreapi.allocation import PortRange
from coreapi.allocation.portallocator import PortBitmap
from support.coreapi_procs import CoreAPIProcess, etcd_delete, etcd_keys, etcd_value
from support.procs import EtcdServer
from support.waiting import eventually

pytestmark = pytest.mark.integration

GRACE = 5  # seconds an orphaned IPAddress is kept


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"type": "NodePort", "ports": [{"port": 80}], **spec}}


def test_leaked_addresses_are_freed_and_lost_records_restored(etcd_server: EtcdServer, tmp_path: Path) -> None:
    prefix = f"/repair-{uuid.uuid4().hex[:8]}"
    core = CoreAPIProcess(etcd_server.endpoint, prefix, tmp_path / "core.log", controllers=False,
                          extra_args=["--allocation-repair-interval", "1",
                                      "--ipaddress-leak-grace-period", str(GRACE)]).start()
    try:
        core.wait_ready()
        services = "/api/v1/namespaces/default/services"
        status, leaky = core.json("POST", services, service("leaky"))
        assert status == 201, leaky
        status, kept = core.json("POST", services, service("kept"))
        assert status == 201, kept
        ip, port = leaky["spec"]["clusterIP"], leaky["spec"]["ports"][0]["nodePort"]
        kept_ip = kept["spec"]["clusterIP"]
        [svc_key] = [k for k in etcd_keys(etcd_server.endpoint, f"{prefix}/") if k.endswith("/default/leaky")]
        etcd_delete(etcd_server.endpoint, svc_key)  # gone without its release
        etcd_delete(etcd_server.endpoint, f"{prefix}/ipaddresses/{kept_ip}")  # a record lost

        # The leaked ones stay taken for now: asking for them is kube's 422.
        status, out = core.json("POST", services, service("again", clusterIP=ip))
        assert status == 422, out
        assert out["details"]["causes"][0]["field"] == "spec.clusterIPs"
        assert "provided IP is already allocated" in out["message"]
        status, out = core.json("POST", services, service("again", ports=[{"port": 80, "nodePort": port}]))
        assert status == 422, out
        assert out["message"].endswith(f"spec.ports[0].nodePort: Invalid value: {port}: "
                                       "provided port is already allocated")

        def record(name: str) -> tuple[int, Any]:
            return core.json("GET", f"/apis/networking.k8s.io/v1/ipaddresses/{name}")

        eventually(lambda: record(kept_ip)[0] == 200, 10, "the lost IPAddress recorded again")
        assert record(kept_ip)[1]["spec"]["parentRef"] == {"resource": "services", "namespace": "default",
                                                            "name": "kept"}
        eventually(lambda: record(ip)[0] == 404, GRACE + 10, "the leaked IPAddress deleted")

        def ports() -> list[int]:
            raw = etcd_value(etcd_server.endpoint, f"{prefix}/ranges/servicenodeports")
            return PortBitmap.decode(PortRange.parse("30000-32767"), raw).taken()

        eventually(lambda: port not in ports(), 10, "the leaked node port freed")
        assert kept["spec"]["ports"][0]["nodePort"] in ports()
        # Free again: a new Service may have exactly those.
        status, out = core.json("POST", services,
                                service("again", clusterIP=ip, ports=[{"port": 80, "nodePort": port}]))
        assert status == 201, out
        assert (out["spec"]["clusterIP"], out["spec"]["ports"][0]["nodePort"]) == (ip, port)
        log = core.log_tail(100_000)
        assert f"IPAddress {ip} for Service default/leaky appears to have leaked: cleaning up" in log
        assert f"node port {port} appears to have leaked: cleaning up" in log
    finally:
        core.stop()
