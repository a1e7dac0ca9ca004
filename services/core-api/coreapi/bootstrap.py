"""Bootstrap data every cluster has (idempotent; safe when several replicas start at once)."""

from __future__ import annotations

import asyncio
import logging

from genericapi.apimachinery.errors import APIError
from genericapi.registry.store import Store

from .admission_priority import PRIORITY_CLASSES, system_priority_class_objects
from .allocation import DEFAULT_SERVICE_CIDR, ServiceIPRange
from .allocation.servicecidr import ensure_default_service_cidr

log = logging.getLogger(__name__)

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


async def _ensure(store: Store, namespace: str, obj: dict[str, object]) -> None:
    try:
        await store.create(namespace, obj)
    except APIError as err:
        if err.code != 409:
            raise


async def _ensure_absent_first(store: Store, namespace: str, obj: dict[str, object], tries: int = 50) -> None:
    """Create unless it exists. A Service's create allocates its address before it can see a
    name conflict (and would fail with "already allocated"), so look first. A replica that lost
    the race to create it (409, or 422 for the address the winner holds) looks again until the
    winner's Service is there: the winner allocates first and stores the Service a moment later."""
    name = str(obj["metadata"]["name"])  # type: ignore[index]
    for attempt in range(tries):
        try:
            await store.get(namespace, name)
            return
        except APIError as err:
            if err.code != 404:
                raise
        try:
            await store.create(namespace, obj)
            return
        except APIError as err:
            if err.code not in (409, 422) or attempt == tries - 1:
                raise
        await asyncio.sleep(0.2)


async def bootstrap(stores: dict[tuple[str, str], Store], secure_port: int = 6443,
                    cluster_ip: str = "", service_cidr: ServiceIPRange | None = None,
                    namespaces_ready: asyncio.Event | None = None) -> None:
    """The system namespaces (``namespaces_ready`` is set once they exist: hooks running at the same
    time wait on it to write into them), the PriorityClasses, the ServiceCIDR and the kubernetes Service."""
    namespaces = stores[("", "namespaces")]
    await asyncio.gather(*(_ensure(namespaces, "", {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": name}}) for name in SYSTEM_NAMESPACES))
    if namespaces_ready is not None:
        namespaces_ready.set()
    if PRIORITY_CLASSES in stores:
        # kube-apiserver's scheduling post-start hook: created when missing, never overwritten.
        await asyncio.gather(*(_ensure(stores[PRIORITY_CLASSES], "", pc) for pc in system_priority_class_objects()))
    cidr = service_cidr or ServiceIPRange.parse(DEFAULT_SERVICE_CIDR)
    if ("networking.k8s.io", "servicecidrs") in stores:
        await ensure_default_service_cidr(stores[("networking.k8s.io", "servicecidrs")], cidr)
    cluster_ip = cluster_ip or cidr.indexed(1)  # the range's first address, as kube-apiserver's
    services = stores[("", "services")]
    await _ensure_absent_first(services, "default", {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "clusterIPs": [cluster_ip],
                 "sessionAffinity": "None", "ipFamilies": [cidr.family], "ipFamilyPolicy": "SingleStack",
                 "internalTrafficPolicy": "Cluster",
                 "ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": secure_port}]},
    })
    log.info("bootstrap complete")
