"""Service allocation pieces without a chain: range math, the port bitmap and its
compare-and-swap under racing replicas, the IPAddress allocator, the Service field rules and the
Pod grace period."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from coreapi import pods
from coreapi.allocation import ClusterIPAllocator, NodePortAllocator, PortRange, ServiceIPRange
from coreapi.allocation.errors import AllocationError, MismatchedNetwork, RangeFull
from coreapi.allocation.families import init_ip_families
from coreapi.allocation.portallocator import PortBitmap, PortOperation
from coreapi.allocation.servicefields import (
    drop_type_dependent_fields,
    normalize_cluster_ips,
    patch_allocated_values,
)
from genericapi.apimachinery.errors import APIError
from genericapi.registry.options import DeleteOptions
from support.allocation_fakes import FakeEtcd, FakeIPAddresses


# -- ranges ---------------------------------------------------------------------------------
def test_ip_range_reserves_network_and_broadcast() -> None:
    r = ServiceIPRange.parse("10.0.0.0/24")
    assert r.address(r.first) == "10.0.0.1" and r.address(r.last) == "10.0.0.254"
    assert r.size == 254 and r.offset == 16 and r.indexed(1) == "10.0.0.1"
    import ipaddress
    assert not r.contains(ipaddress.ip_address("10.0.0.0"))
    assert not r.contains(ipaddress.ip_address("10.0.0.255"))
    assert not r.contains(ipaddress.ip_address("10.0.1.1"))
    assert r.contains(ipaddress.ip_address("10.0.0.254"))


def test_ip_candidates_cover_the_range_upper_part_first() -> None:
    r = ServiceIPRange.parse("10.0.0.0/24")
    order = list(r.candidates(random.Random(7)))
    assert len(order) == 254 == len(set(order))
    upper = {f"10.0.0.{i}" for i in range(17, 255)}
    assert set(order[:238]) == upper and set(order[238:]) == {f"10.0.0.{i}" for i in range(1, 17)}


def test_small_and_ipv6_ranges() -> None:
    small = ServiceIPRange.parse("192.168.1.0/28")
    assert small.offset == 0 and len(list(small.candidates(random.Random(1)))) == 14
    v6 = ServiceIPRange.parse("fd00::/120")
    assert v6.family == "IPv6" and v6.address(v6.last) == "fd00::ff" and v6.size == 255


@pytest.mark.parametrize(("text", "message"), [
    ("10.0.0.0/8", "specified --service-cluster-ip-range is too large; for 32-bit addresses, the mask must be >= 12"),
    ("10.0.0.0/31", "has no usable addresses"),
    ("not-a-cidr", "invalid CIDR"),
])
def test_bad_ip_ranges(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace(".", r"\.").replace("-", r"\-")):
        ServiceIPRange.parse(text)


def test_port_range_parse_and_offset() -> None:
    r = PortRange.parse("30000-32767")
    assert (r.base, r.size, r.offset, str(r)) == (30000, 2768, 86, "30000-32767")
    assert PortRange.parse("30000+10") == PortRange(30000, 11)
    assert PortRange.parse("30000-30009").offset == 0
    for bad in ("abc", "40000-30000", "65000-70000", ""):
        with pytest.raises(ValueError, match="unable to parse port range"):
            PortRange.parse(bad)
    order = list(r.candidates(random.Random(3)))
    assert len(order) == 2768 == len(set(order)) and min(order[:2682]) == 30086


# -- port bitmap and operations ---------------------------------------------------------------
def test_bitmap_encoding_round_trips_and_rebases() -> None:
    r = PortRange.parse("30000-30099")
    bitmap = PortBitmap(r)
    for port in (30000, 30007, 30099):
        bitmap.set(port)
    decoded = PortBitmap.decode(r, bitmap.encode())
    assert decoded.taken() == [30000, 30007, 30099]
    moved = PortBitmap.decode(PortRange.parse("30050-30149"), bitmap.encode())
    assert moved.taken() == [30099]


def test_port_operation_messages() -> None:
    op = PortOperation(PortBitmap(PortRange.parse("30000-30002")), random.Random(0), dry_run=False)
    op.allocate(30001)
    with pytest.raises(AllocationError, match=r"^provided port is already allocated$"):
        op.allocate(30001)
    with pytest.raises(AllocationError, match=r"^provided port is not in the valid range\. "
                                              r"The range of valid ports is 30000-30002$"):
        op.allocate(29999)
    assert sorted([op.allocate_next(), op.allocate_next()]) == [30000, 30002]
    with pytest.raises(RangeFull, match=r"^range is full$"):
        op.allocate_next()


def test_dry_run_operation_checks_only_holders() -> None:
    bitmap = PortBitmap(PortRange.parse("30000-30002"))
    bitmap.set(30001)
    op = PortOperation(bitmap, random.Random(0), dry_run=True)
    with pytest.raises(AllocationError, match="already allocated"):
        op.allocate(30001)
    op.allocate(40000)  # kube's dry run does not check the range
    assert op.allocate_next() == 40001
    assert bitmap.taken() == [30001]


async def test_two_replicas_never_share_a_port() -> None:
    etcd = FakeEtcd()
    ports = PortRange.parse("30000-30063")
    replicas = [NodePortAllocator(etcd, "/registry/ranges/servicenodeports", ports,  # type: ignore[arg-type]
                                  random.Random(i)) for i in range(2)]

    async def one(i: int) -> int:
        (port, _op) = await replicas[i % 2].run(lambda op: op.allocate_next())
        return port

    got = await asyncio.gather(*(one(i) for i in range(64)))
    assert sorted(got) == list(range(30000, 30064))
    assert etcd.conflicts > 0  # the replicas really raced
    with pytest.raises(RangeFull):
        await replicas[0].run(lambda op: op.allocate_next())
    await replicas[1].release([30005, 30006, 99999])
    assert 30005 not in await replicas[0].taken()
    (port, _op) = await replicas[0].run(lambda op: op.allocate_next())
    assert port in (30005, 30006)


# -- ClusterIPs as IPAddress objects --------------------------------------------------------
PARENT = {"metadata": {"namespace": "ns", "name": "svc"}}


async def test_ip_allocator_static_dynamic_and_exhaustion() -> None:
    store = FakeIPAddresses()
    allocator = ClusterIPAllocator(ServiceIPRange.parse("10.9.0.0/29"), store)  # type: ignore[arg-type]
    assert await allocator.allocate("10.9.0.3", PARENT) == "10.9.0.3"
    obj = store.objects["10.9.0.3"]
    assert obj["spec"]["parentRef"] == {"resource": "services", "namespace": "ns", "name": "svc"}
    assert obj["metadata"]["labels"] == {"ipaddress.kubernetes.io/ip-family": "IPv4",
                                         "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}
    with pytest.raises(AllocationError, match=r"^provided IP is already allocated$"):
        await allocator.allocate("10.9.0.3", PARENT)
    for bad in ("10.9.0.0", "10.9.0.7", "10.9.1.1", "fd00::1"):
        with pytest.raises(MismatchedNetwork, match=r"^the provided network does not match the current range$"):
            await allocator.allocate(bad, PARENT)
    got = await asyncio.gather(*(allocator.allocate_next(PARENT) for _ in range(5)))
    assert sorted(got) == ["10.9.0.1", "10.9.0.2", "10.9.0.4", "10.9.0.5", "10.9.0.6"]
    with pytest.raises(RangeFull, match=r"^range is full$"):
        await allocator.allocate_next(PARENT)
    await allocator.release("10.9.0.4")
    await allocator.release("10.9.0.4")  # releasing a free address is a no-op
    assert await allocator.allocate_next(PARENT) == "10.9.0.4"
    allocator.check("10.9.0.4")  # dry run: in range, taken or not
    with pytest.raises(MismatchedNetwork):
        allocator.check("10.9.0.255")
    assert allocator.dry_run_next() == "10.9.0.0"


# -- Service field rules ---------------------------------------------------------------------
def svc(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "s"}, "spec": spec}


def test_normalize_and_patch_allocated_values() -> None:
    new = svc(clusterIP="10.0.0.5")
    normalize_cluster_ips(new, None)
    assert new["spec"]["clusterIPs"] == ["10.0.0.5"]
    old = svc(type="NodePort", clusterIP="10.0.0.5", clusterIPs=["10.0.0.5"],
              ports=[{"name": "a", "port": 80, "nodePort": 30001}, {"name": "b", "port": 81, "nodePort": 30002}])
    upd = svc(type="NodePort", ports=[{"name": "a", "port": 80}, {"name": "b", "port": 81, "nodePort": 30001}])
    patch_allocated_values(upd, old)
    assert upd["spec"]["clusterIP"] == "10.0.0.5" and upd["spec"]["clusterIPs"] == ["10.0.0.5"]
    # port "a" would get 30001 back, but "b" uses it now: left for allocation
    assert "nodePort" not in upd["spec"]["ports"][0]


def test_type_change_drops_unchanged_allocated_fields() -> None:
    old = svc(type="NodePort", clusterIP="10.0.0.5", clusterIPs=["10.0.0.5"], ipFamilies=["IPv4"],
              ipFamilyPolicy="SingleStack", externalTrafficPolicy="Cluster", ports=[{"port": 80, "nodePort": 30001}])
    new = svc(type="ExternalName", externalName="x.example", clusterIP="10.0.0.5", clusterIPs=["10.0.0.5"],
              ipFamilies=["IPv4"], ipFamilyPolicy="SingleStack", externalTrafficPolicy="Cluster",
              ports=[{"port": 80, "nodePort": 30001}])
    new["status"] = {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}
    drop_type_dependent_fields(new, old)
    assert new["spec"] == {"type": "ExternalName", "externalName": "x.example", "ports": [{"port": 80}]}
    assert new["status"] == {"loadBalancer": {}}
    changed = svc(type="ClusterIP", ports=[{"port": 80, "nodePort": 30009}])
    drop_type_dependent_fields(changed, old)
    assert changed["spec"]["ports"] == [{"port": 80, "nodePort": 30009}]  # a new port stays: validation decides


def test_ip_families() -> None:
    s = svc(type="ClusterIP", selector={"a": "b"})
    init_ip_families(s, None, "IPv4")
    assert (s["spec"]["ipFamilyPolicy"], s["spec"]["ipFamilies"]) == ("SingleStack", ["IPv4"])
    headless = svc(type="ClusterIP", clusterIP="None", clusterIPs=["None"])
    init_ip_families(headless, None, "IPv4")
    assert (headless["spec"]["ipFamilyPolicy"], headless["spec"]["ipFamilies"]) == ("RequireDualStack",
                                                                                    ["IPv4", "IPv6"])
    with pytest.raises(APIError) as err:
        init_ip_families(svc(type="ClusterIP", selector={"a": "b"}, ipFamilyPolicy="RequireDualStack"), None, "IPv4")
    assert err.value.message == ('Service "s" is invalid: spec.ipFamilyPolicy: Invalid value: "RequireDualStack": '
                                 "this cluster is not configured for dual-stack services")
    with pytest.raises(APIError) as err:
        init_ip_families(svc(clusterIP="fd00::1", clusterIPs=["fd00::1"]), None, "IPv4")
    assert err.value.message == ('Service "s" is invalid: spec.clusterIPs[0]: Invalid value: []string{"fd00::1"}: '
                                 "IPv6 is not configured on this cluster")
    with pytest.raises(APIError) as err:
        init_ip_families(svc(ipFamilies=["IPv6"]), None, "IPv4")
    assert err.value.details is not None
    assert err.value.details["causes"][0]["field"] == "spec.ipFamilies[0]"


# -- Pod grace period ------------------------------------------------------------------------
@pytest.mark.parametrize(("obj", "grace", "expected"), [
    ({"spec": {}}, None, 0),
    ({"spec": {"nodeName": "n"}}, None, 30),
    ({"spec": {"nodeName": "n", "terminationGracePeriodSeconds": 45}}, None, 45),
    ({"spec": {"nodeName": "n", "terminationGracePeriodSeconds": 45}}, 5, 5),
    ({"spec": {"nodeName": "n"}, "status": {"phase": "Failed"}}, 10, 0),
    ({"spec": {"nodeName": "n"}, "status": {"phase": "Running"}}, 0, 0),
    ({"spec": {"nodeName": "n", "terminationGracePeriodSeconds": -3}}, None, 1),
])
def test_pod_grace_period(obj: dict[str, Any], grace: int | None, expected: int) -> None:
    assert pods.grace_period(obj, DeleteOptions(grace_period_seconds=grace)) == expected
