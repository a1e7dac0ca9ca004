"""Leader election across core-api processes: two replicas on one etcd, exactly one runs the
controllers (it holds the ``kube-system/kube-controller-manager`` Lease); SIGKILL the leader and
the other takes over once the lease runs out, and the controllers keep working; a replica that
stops cleanly hands the lease over at once.

The replicas are processes of this test (own key prefix on the session etcd), so killing them
leaves the shared chain alone.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.coreapi_procs import CoreAPIProcess
from support.procs import EtcdServer
from support.waiting import eventually

pytestmark = pytest.mark.integration

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"
LEASE_DURATION = 15  # core-api's (kube-controller-manager's) default
IDENTITY = re.compile(r"controller manager (\S+) started")


def identity(proc: CoreAPIProcess) -> str:
    found = eventually(lambda: IDENTITY.search(proc.log_tail(200_000)), 20, "manager identity in the log")
    return found.group(1)


def lease(proc: CoreAPIProcess) -> dict[str, Any]:
    status, body = proc.json("GET", LEASE)
    assert status == 200, body
    return body  # type: ignore[no-any-return]


def has_default_sa(proc: CoreAPIProcess, ns: str) -> bool:
    status, _ = proc.json("GET", f"/api/v1/namespaces/{ns}/serviceaccounts/default")
    return status == 200


def create_ns(proc: CoreAPIProcess, name: str) -> None:
    status, body = proc.json("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert status == 201, body


@pytest.fixture(params=["AlwaysAllow"])
def replicas(request: pytest.FixtureRequest, etcd_server: EtcdServer,
             tmp_path: Path) -> Iterator[list[CoreAPIProcess]]:
    prefix = f"/replicas-{uuid.uuid4().hex[:8]}"
    mode = ["--authorization-mode", request.param]
    procs = [CoreAPIProcess(etcd_server.endpoint, prefix, tmp_path / f"core-{i}.log", extra_args=mode)
             for i in range(2)]
    try:
        for p in procs:
            p.start()
        for p in procs:
            p.wait_ready()
        yield procs
    finally:
        for p in procs:
            p.stop()


def test_one_leader_then_takeover_after_sigkill(replicas: list[CoreAPIProcess]) -> None:
    ids = [identity(p) for p in replicas]
    assert ids[0] != ids[1]
    holder = eventually(lambda: lease(replicas[0])["spec"].get("holderIdentity"), 10, "a lease holder")
    assert holder in ids
    leader, follower = (replicas[0], replicas[1]) if holder == ids[0] else (replicas[1], replicas[0])
    # Both replicas see the same Lease (one etcd); only the leader's controllers start.
    first = lease(follower)
    assert first["spec"]["holderIdentity"] == holder and first["spec"]["leaseDurationSeconds"] == LEASE_DURATION
    create_ns(follower, "before-kill")
    eventually(lambda: has_default_sa(follower, "before-kill"), 10, "default ServiceAccount from the leader")
    # The holder keeps renewing and nobody else takes it while it does.
    renewed = eventually(lambda: (o := lease(follower))["spec"]["renewTime"] != first["spec"]["renewTime"] and o, 6,
                       "a renewal")
    assert renewed["spec"]["holderIdentity"] == holder
    assert renewed["spec"]["leaseTransitions"] == first["spec"]["leaseTransitions"]
    assert "is leading" in leader.log_tail(200_000) and "is leading" not in follower.log_tail(200_000)

    killed_at = time.monotonic()
    leader.kill()  # no pre-shutdown hook: the lease stays held by a dead process until it expires
    create_ns(follower, "after-kill")
    assert not has_default_sa(follower, "after-kill")  # nobody leads yet
    eventually(lambda: has_default_sa(follower, "after-kill"), LEASE_DURATION + 10, "takeover")
    took = time.monotonic() - killed_at
    assert took >= LEASE_DURATION - 3, f"took over after {took:.1f}s, before the lease could have expired"
    assert took <= LEASE_DURATION + 8, f"took over after {took:.1f}s"
    after = lease(follower)["spec"]
    assert after["holderIdentity"] == (ids[1] if leader is replicas[0] else ids[0])
    assert after["leaseTransitions"] == first["spec"]["leaseTransitions"] + 1
    assert after["acquireTime"] != first["spec"]["acquireTime"]
    # The new leader's controllers all work: namespace deletion finishes too.
    status, _ = follower.json("DELETE", "/api/v1/namespaces/before-kill")
    assert status == 200
    eventually(lambda: follower.json("GET", "/api/v1/namespaces/before-kill")[0] == 404, 15, "namespace deletion")
    print(f"takeover after SIGKILL: {took:.1f}s")


@pytest.mark.parametrize("replicas", ["AlwaysAllow", "RBAC"], indirect=True)
def test_clean_stop_hands_the_lease_over_at_once(replicas: list[CoreAPIProcess]) -> None:
    """Under RBAC too: the release is an update of the lease as system:kube-controller-manager,
    authorized while the authorizer still runs (it was denied once, the manager stopping after it)."""
    ids = [identity(p) for p in replicas]
    holder = eventually(lambda: lease(replicas[0])["spec"].get("holderIdentity"), 10, "a lease holder")
    leader, follower = (replicas[0], replicas[1]) if holder == ids[0] else (replicas[1], replicas[0])
    transitions = lease(follower)["spec"]["leaseTransitions"]
    stopped_at = time.monotonic()
    leader.stop()  # SIGTERM: the manager stops first and releases the lease
    create_ns(follower, "after-stop")
    eventually(lambda: has_default_sa(follower, "after-stop"), 10, "takeover after a clean stop")
    took = time.monotonic() - stopped_at
    assert took < 6, f"a released lease was taken after {took:.1f}s"
    spec = lease(follower)["spec"]
    assert spec["holderIdentity"] == (ids[1] if leader is replicas[0] else ids[0])
    assert spec["leaseTransitions"] == transitions + 1
    assert spec["leaseDurationSeconds"] == LEASE_DURATION  # the release's 1 s is not kept
    assert "release failed" not in leader.log_tail(200_000)
