"""core-api's controllers on the running chain: default ServiceAccount, kube-root-ca.crt, the lease."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.procs import ChainHandle
from support.waiting import eventually

pytestmark = pytest.mark.integration

MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def get(chain: ChainHandle, path: str) -> dict[str, Any] | None:
    status, body = chain.json("GET", path)
    return body if status == 200 else None


def new_namespace(chain: ChainHandle, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "namespace", name)
    return name


def ca_pem(chain: ChainHandle) -> str:
    return Path(chain.chain.pki.ca).read_text()


def test_new_namespace_gets_default_serviceaccount_and_root_ca(chain: ChainHandle) -> None:
    ns = new_namespace(chain, "ctl-new")
    start = time.monotonic()
    sa = eventually(lambda: get(chain, f"/api/v1/namespaces/{ns}/serviceaccounts/default"))
    cm = eventually(lambda: get(chain, f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"))
    assert time.monotonic() - start < 5
    assert sa["metadata"]["namespace"] == ns
    assert cm["data"] == {"ca.crt": ca_pem(chain)}
    assert cm["metadata"]["annotations"]["kubernetes.io/description"].startswith("Contains a CA bundle")
    # kubectl sees them as a user would
    out = chain.kubectl("get", "serviceaccounts", "-n", ns, "-o", "name").stdout.split()
    assert out == ["serviceaccount/default"]


@pytest.mark.parametrize("ns", ["default", "kube-system", "kube-public"])
def test_system_namespaces_have_them(chain: ChainHandle, ns: str) -> None:
    eventually(lambda: get(chain, f"/api/v1/namespaces/{ns}/serviceaccounts/default"))
    cm = eventually(lambda: get(chain, f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"))
    assert cm["data"]["ca.crt"] == ca_pem(chain)


def test_deleted_ones_come_back(chain: ChainHandle) -> None:
    ns = new_namespace(chain, "ctl-del")
    sa = eventually(lambda: get(chain, f"/api/v1/namespaces/{ns}/serviceaccounts/default"))
    cm = eventually(lambda: get(chain, f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"))
    chain.kubectl("delete", "serviceaccount", "default", "-n", ns)
    chain.kubectl("delete", "configmap", "kube-root-ca.crt", "-n", ns)
    new_sa = eventually(lambda: (o := get(chain, f"/api/v1/namespaces/{ns}/serviceaccounts/default"))
                      and o["metadata"]["uid"] != sa["metadata"]["uid"] and o)
    new_cm = eventually(lambda: (o := get(chain, f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"))
                      and o["metadata"]["uid"] != cm["metadata"]["uid"] and o)
    assert new_sa["metadata"]["name"] == "default"
    assert new_cm["data"] == {"ca.crt": ca_pem(chain)}


def test_a_user_edited_root_ca_configmap_is_restored(chain: ChainHandle) -> None:
    ns = new_namespace(chain, "ctl-edit")
    path = f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"
    eventually(lambda: get(chain, path))
    chain.kubectl("patch", "configmap", "kube-root-ca.crt", "-n", ns, "--type=merge",
                  "-p", '{"data":{"ca.crt":"not a CA","extra":"x"}}')
    restored = eventually(lambda: (o := get(chain, path)) and o["data"] == {"ca.crt": ca_pem(chain)} and o)
    assert "extra" not in restored["data"]
    # The description annotation removed by a user comes back too.
    chain.kubectl("annotate", "configmap", "kube-root-ca.crt", "-n", ns, "kubernetes.io/description-")
    eventually(lambda: ((get(chain, path) or {}).get("metadata", {}).get("annotations") or {})
             .get("kubernetes.io/description"))


def test_a_namespace_created_with_a_wrong_root_ca_gets_it_fixed(chain: ChainHandle) -> None:
    ns = new_namespace(chain, "ctl-race")
    path = f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"
    eventually(lambda: get(chain, path))
    # Replace it outright (a PUT with a bogus bundle and no annotation): the publisher puts it back.
    cur = get(chain, path)
    assert cur is not None
    cur["data"] = {"ca.crt": "-----BEGIN CERTIFICATE-----\nbogus\n-----END CERTIFICATE-----\n"}
    cur["metadata"].pop("annotations", None)
    status, _ = chain.json("PUT", path, cur)
    assert status == 200
    eventually(lambda: (get(chain, path) or {}).get("data") == {"ca.crt": ca_pem(chain)})


def test_terminating_namespace_is_left_alone(chain: ChainHandle) -> None:
    ns = f"ctl-term-{uuid.uuid4().hex[:6]}"
    # A finalizer nobody owns keeps the namespace terminating after the delete.
    status, _ = chain.json("POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "finalizers": ["example.com/hold"]}})
    assert status == 201
    eventually(lambda: get(chain, f"/api/v1/namespaces/{ns}/serviceaccounts/default"))
    eventually(lambda: get(chain, f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"))
    chain.kubectl("delete", "namespace", ns, "--wait=false")
    eventually(lambda: (get(chain, f"/api/v1/namespaces/{ns}") or {}).get("metadata", {}).get("deletionTimestamp"))
    chain.kubectl("delete", "serviceaccount", "default", "-n", ns, "--ignore-not-found")
    chain.kubectl("delete", "configmap", "kube-root-ca.crt", "-n", ns, "--ignore-not-found")
    time.sleep(1.5)
    assert get(chain, f"/api/v1/namespaces/{ns}/serviceaccounts/default") is None
    assert get(chain, f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt") is None
    chain.json("PATCH", f"/api/v1/namespaces/{ns}", {"metadata": {"finalizers": None}},
               headers={"Content-Type": "application/merge-patch+json"})


def test_the_controller_lease_has_a_holder(chain: ChainHandle) -> None:
    lease = eventually(lambda: get(chain, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/"
                                        "kube-controller-manager"))
    spec = lease["spec"]
    holder = spec["holderIdentity"]
    assert re.match(r"^.+_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", holder), holder
    assert spec["leaseDurationSeconds"] == 15
    assert MICRO_TIME.match(spec["renewTime"]) and MICRO_TIME.match(spec["acquireTime"])
    # It is renewed (every retry period, 2 s).
    renewed = eventually(lambda: (o := get(chain, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/"
                                                "kube-controller-manager")) and
                       o["spec"]["renewTime"] != spec["renewTime"] and o, timeout=6)
    assert renewed["spec"]["holderIdentity"] == holder


# -- in process, on real etcd: a manager stopped midway and a new one started -----------------------
async def test_controllers_reconcile_everything_after_a_restart(etcd_server: Any) -> None:
    import asyncio

    from coreapi.admission import NamespaceLifecycle
    from coreapi.controllers.manager import ControllerOptions, build_controllers
    from genericapi.apimachinery.resources import ResourceInfo
    from genericapi.controllers import ClientSet, ControllerManager
    from genericapi.registry.store import Store
    from genericapi.registry.strategy import Strategy
    from genericapi.storage.etcd import EtcdClient

    infos = [ResourceInfo("", "v1", "Namespace", "namespaces", "namespace", False),
             ResourceInfo("", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", True),
             ResourceInfo("", "v1", "ConfigMap", "configmaps", "configmap", True),
             ResourceInfo("coordination.k8s.io", "v1", "Lease", "leases", "lease", True)]
    etcd = EtcdClient([etcd_server.endpoint])
    prefix = f"/ctl-restart-{uuid.uuid4().hex[:6]}"
    stores = {i.plural: Store(i, Strategy(i), etcd, f"{prefix}/{i.plural}") for i in infos}
    admission = NamespaceLifecycle(stores["namespaces"])
    for s in stores.values():
        s.admission.mutating.append(admission)
        await s.start()
    ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    options = ControllerOptions(root_ca=ca, lease_duration=3, renew_deadline=2, retry_period=0.3)

    def manager() -> ControllerManager:
        clients = ClientSet(stores.values())
        m = ControllerManager(clients.client("coordination.k8s.io", "leases"), lease_duration=3, renew_deadline=2,
                              retry_period=0.3)
        for controller, workers in build_controllers(clients, options):
            m.add(controller, workers)
        return m

    async def until(check: Callable[[], Any], limit: float = 5.0) -> None:
        deadline = time.monotonic() + limit
        while not await check():
            assert time.monotonic() < deadline, "condition not met in time"
            await asyncio.sleep(0.05)

    async def has(plural: str, ns: str, name: str) -> bool:
        try:
            await stores[plural].get(ns, name)
            return True
        except Exception:
            return False

    ns_store = stores["namespaces"]
    try:
        for name in ("kube-system", "a", "b"):
            await ns_store.create("", {"metadata": {"name": name}, "status": {"phase": "Active"}})
        await ns_store.create("", {"metadata": {"name": "ending", "finalizers": ["example.com/hold"]}})
        from genericapi.registry.options import DeleteOptions
        await ns_store.delete("", "ending", DeleteOptions())

        first = manager()
        await first.start()
        await until(lambda: has("serviceaccounts", "b", "default"))
        await until(lambda: has("configmaps", "a", "kube-root-ca.crt"))
        assert first.leading
        assert not await has("serviceaccounts", "ending", "default")
        await first.stop()  # midway: changes while nobody leads are picked up by the next leader
        await stores["serviceaccounts"].delete("a", "default", DeleteOptions())
        await stores["configmaps"].guaranteed_update(
            "b", "kube-root-ca.crt", lambda o: {**o, "data": {"ca.crt": "tampered"}})
        await ns_store.create("", {"metadata": {"name": "c"}})
        await asyncio.sleep(0.5)
        assert not await has("serviceaccounts", "a", "default")

        second = manager()
        start = time.monotonic()
        await second.start()
        await until(lambda: has("serviceaccounts", "a", "default"))
        await until(lambda: has("serviceaccounts", "c", "default"))
        await until(lambda: has("configmaps", "c", "kube-root-ca.crt"))

        async def fixed() -> bool:
            return (await stores["configmaps"].get("b", "kube-root-ca.crt"))["data"] == {"ca.crt": ca}

        await until(fixed)
        assert time.monotonic() - start < 3  # the first released the lease: no wait for it to expire
        lease = await stores["leases"].get("kube-system", "kube-controller-manager")
        assert lease["spec"]["holderIdentity"] == second.identity
        assert lease["spec"]["leaseTransitions"] == 1
        assert not await has("serviceaccounts", "ending", "default")
        await second.stop()
    finally:
        for s in stores.values():
            await s.stop()
        await etcd.close()
