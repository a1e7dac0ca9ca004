"""Bootstrap data every cluster has (idempotent; safe when several replicas start at once)."""

from __future__ import annotations

import logging

from genericapi.apimachinery.errors import APIError
from genericapi.registry.store import Store

log = logging.getLogger(__name__)

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


async def _ensure(store: Store, namespace: str, obj: dict[str, object]) -> None:
    try:
        await store.create(namespace, obj)
    except APIError as err:
        if err.code != 409:
            raise


async def bootstrap(stores: dict[tuple[str, str], Store], secure_port: int = 6443,
                    cluster_ip: str = "10.0.0.1") -> None:
    namespaces = stores[("", "namespaces")]
    for name in SYSTEM_NAMESPACES:
        await _ensure(namespaces, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    services = stores[("", "services")]
    await _ensure(services, "default", {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "clusterIPs": [cluster_ip],
                 "sessionAffinity": "None", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                 "internalTrafficPolicy": "Cluster",
                 "ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": secure_port}]},
    })
    log.info("bootstrap complete")
