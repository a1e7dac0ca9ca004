"""The allocation repair loops (kube's RepairIPAddress and node-port Repair rules) on in-test
fakes: what a Service holds is recorded, what a crash leaked is freed only after the grace
period (IPs) or the third pass (ports), and what is in use or in flight is never freed."""

from __future__ import annotations

from typing import Any

from coreapi.allocation import ClusterIPAllocator, NodePortAllocator, PortRange, ServiceAllocator, ServiceIPRange
from coreapi.allocation.ipallocator import LABEL_MANAGED_BY, MANAGER
from coreapi.allocation.repair import AllocationRepair
from support.allocation_fakes import FakeEtcd, FakeIPAddresses, FakeServices

T0 = 1_800_000_000.0


def svc(name: str, ips: list[str], node_ports: list[int] = (), **spec: Any) -> dict[str, Any]:  # type: ignore[assignment]
    ports = [{"port": 80 + i, "nodePort": p} for i, p in enumerate(node_ports)]
    return {"metadata": {"namespace": "a", "name": name},
            "spec": {"type": "NodePort" if node_ports else "ClusterIP", "clusterIPs": ips, "ports": ports, **spec}}


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def build(stored: list[dict[str, Any]], grace: float = 60.0) -> tuple[AllocationRepair, FakeIPAddresses, Clock]:
    ips = FakeIPAddresses(now=T0)
    allocator = ServiceAllocator(
        ClusterIPAllocator(ServiceIPRange.parse("10.0.0.0/24"), ips),  # type: ignore[arg-type]
        NodePortAllocator(FakeEtcd(), "/k", PortRange.parse("30000-30099")))  # type: ignore[arg-type]
    clock = Clock()
    repair = AllocationRepair(FakeServices(stored), allocator, interval=180, ip_grace=grace,  # type: ignore[arg-type]
                              clock=clock)
    return repair, ips, clock


async def test_existing_services_get_their_records_and_a_second_pass_changes_nothing() -> None:
    stored = [svc("old", ["10.0.0.5"], [30042]), svc("seen", ["10.0.0.7"]), svc("headless", ["None"]),
              svc("far", ["192.168.9.9"]),
              svc("lb", ["10.0.0.9"], [30001], externalTrafficPolicy="Local", healthCheckNodePort=30002)]
    stored[-1]["spec"]["type"] = "LoadBalancer"
    repair, ips, _clock = build(stored)
    await ips.create("", {"metadata": {"name": "10.0.0.7", "labels": {LABEL_MANAGED_BY: MANAGER}},
                          "spec": {"parentRef": {"resource": "services", "namespace": "a", "name": "seen"}}})
    await repair.run_once()
    assert sorted(ips.objects) == ["10.0.0.5", "10.0.0.7", "10.0.0.9"]
    assert ips.objects["10.0.0.5"]["spec"]["parentRef"] == {"resource": "services", "namespace": "a", "name": "old"}
    assert await repair.allocator.ports.taken() == [30001, 30002, 30042]
    before = dict(ips.objects)
    await repair.run_once()
    assert ips.objects == before and await repair.allocator.ports.taken() == [30001, 30002, 30042]


async def test_a_leaked_ip_is_freed_after_the_grace_period_only() -> None:
    stored = [svc("live", ["10.0.0.5"])]
    repair, ips, clock = build(stored, grace=60)
    await repair.run_once()
    await repair.allocator.ips.allocate("10.0.0.6", svc("gone", []))  # its Service was deleted; the release crashed
    await repair.allocator.ips.allocate("10.0.0.8", svc("live", []))  # a live Service, not holding this one
    ips.objects["10.0.0.7"] = {  # not the allocator's
        "metadata": {"name": "10.0.0.7", "uid": "x", "creationTimestamp": "2020-01-01T00:00:00Z"},
        "spec": {"parentRef": {"resource": "gateways", "name": "g"}}}
    clock.now = T0 + 30
    due = await repair.run_once()
    assert sorted(ips.objects) == ["10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8"]
    assert 30 <= due <= 31  # the next pass comes when the orphans come of age, not in 3 minutes
    clock.now = T0 + 61
    await repair.run_once()
    assert sorted(ips.objects) == ["10.0.0.5", "10.0.0.7"]


async def test_a_record_pointing_at_a_missing_service_is_repointed() -> None:
    stored = [svc("new", ["10.0.0.5"])]
    repair, ips, _clock = build(stored)
    await repair.allocator.ips.allocate("10.0.0.5", svc("deleted-long-ago", []))
    await repair.run_once()
    assert ips.objects["10.0.0.5"]["spec"]["parentRef"]["name"] == "new"


async def test_an_ip_recorded_for_another_live_service_is_left_alone() -> None:
    stored = [svc("first", ["10.0.0.5"]), svc("second", ["10.0.0.5"])]
    repair, ips, clock = build(stored)
    await repair.allocator.ips.allocate("10.0.0.5", stored[0])
    clock.now = T0 + 3600
    await repair.run_once()
    assert ips.objects["10.0.0.5"]["spec"]["parentRef"]["name"] == "first"


async def test_a_leaked_port_is_freed_on_the_third_pass_and_a_used_one_never() -> None:
    stored = [svc("live", ["10.0.0.5"], [30010])]
    repair, _ips, _clock = build(stored)
    ports = repair.allocator.ports

    def take(op: Any) -> None:
        op.allocate(30010)
        op.allocate(30020)  # its Service is gone; the release crashed

    await ports.run(take)
    await repair.run_once()
    assert await ports.taken() == [30010, 30020]  # flagged
    await repair.run_once()
    assert await ports.taken() == [30010, 30020]
    await repair.run_once()
    assert await ports.taken() == [30010]
    assert repair.port_leaks == {}


async def test_a_flagged_port_taken_by_a_service_meanwhile_is_kept() -> None:
    stored = [svc("live", ["10.0.0.5"], [30010])]
    repair, _ips, _clock = build(stored)
    ports = repair.allocator.ports
    await ports.run(lambda op: op.allocate(30020))  # a create in flight: the port before the Service
    await repair.run_once()
    await repair.run_once()
    stored.append(svc("late", ["10.0.0.6"], [30020]))  # the Service landed
    for _ in range(4):
        await repair.run_once()
    assert await ports.taken() == [30010, 30020] and repair.port_leaks == {}


async def test_ports_out_of_range_or_duplicated_are_reported_not_recorded_twice() -> None:
    stored = [svc("a1", ["10.0.0.5"], [30010]), svc("a2", ["10.0.0.6"], [30010]), svc("far", ["10.0.0.7"], [40000])]
    repair, _ips, _clock = build(stored)
    await repair.run_once()
    assert await repair.allocator.ports.taken() == [30010]


async def test_a_concurrent_bitmap_write_makes_the_pass_start_over() -> None:
    stored = [svc("live", ["10.0.0.5"], [30010])]
    repair, _ips, _clock = build(stored)
    ports = repair.allocator.ports
    real_list = repair.services.list
    raced = []

    async def racing_list(ns: str, opts: Any) -> Any:
        if not raced:  # another replica allocates between the snapshot and the write
            raced.append(1)
            await ports.run(lambda op: op.allocate(30030))
        return await real_list(ns, opts)

    repair.services.list = racing_list  # type: ignore[method-assign]
    await repair.repair_ports()
    assert await ports.taken() == [30010, 30030]  # the racer's port survived; flagged, not freed
    assert repair.port_leaks == {30030: 2}
