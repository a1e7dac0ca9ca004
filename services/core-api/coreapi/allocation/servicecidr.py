"""The ``kubernetes`` ServiceCIDR: ``--service-cluster-ip-range`` as an API object.

kube-apiserver's default-servicecidr controller creates it at start-up and marks it Ready; the
ClusterIP allocator hands out addresses from every ready ServiceCIDR, so users can add ranges by
creating more of them. Idempotent, safe when several replicas start at once.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.errors import APIError
from genericapi.registry.meta import now_rfc3339
from genericapi.registry.store import Store

from .ranges import ServiceIPRange

DEFAULT_NAME = "kubernetes"
READY_MESSAGE = "Kubernetes default Service CIDR is ready"


async def ensure_default_service_cidr(store: Store, primary: ServiceIPRange) -> None:
    try:
        current = await store.get("", DEFAULT_NAME)
    except APIError as err:
        if err.code != 404:
            raise
        obj: dict[str, Any] = {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
                               "metadata": {"name": DEFAULT_NAME}, "spec": {"cidrs": [str(primary)]}}
        try:
            current = await store.create("", obj)
        except APIError as create_err:
            if create_err.code != 409:
                raise
            current = await store.get("", DEFAULT_NAME)
    conditions = (current.get("status") or {}).get("conditions") or []
    if any(isinstance(c, dict) and c.get("type") == "Ready" for c in conditions):
        return

    def mark_ready(obj: dict[str, Any]) -> dict[str, Any]:
        status = obj.setdefault("status", {})
        if not any(isinstance(c, dict) and c.get("type") == "Ready" for c in status.get("conditions") or []):
            status["conditions"] = [*(status.get("conditions") or []), {
                "type": "Ready", "status": "True", "lastTransitionTime": now_rfc3339(),
                "reason": "", "message": READY_MESSAGE}]
        return obj

    await store.guaranteed_update("", DEFAULT_NAME, mark_ready, subresource="status")
