"""The pod garbage collector's rule for unscheduled pods being deleted (kube's ``podgc``).

A pod that was never scheduled (``spec.nodeName`` empty) has nothing to stop, so its delete marks
it and removes it in two writes. If the API server dies between them, the pod stays marked for
deletion with nothing left to wait for, and no kubelet will ever confirm it gone. kube's pod
garbage collector (``gcUnscheduledTerminating``, every 20 s) force-deletes such pods after setting
their phase to Failed; this controller does the same, a short while after it sees one.

kube's other podgc rules are left out on purpose: pods bound to Nodes that do not exist would be
deleted (``gcOrphaned``), which on a control plane without nodes would remove every pod a test
binds to a made-up node; the terminated-pod threshold (12,500) and out-of-service taints concern
real nodes.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from genericapi.apimachinery.errors import APIError
from genericapi.controllers import ClientSet, Controller, Informer

from .namespace import stranded

#: How long a marked unscheduled pod may wait for its own removal before the collector steps in
#: (the API server's second write comes milliseconds after the first).
GRACE = 2.0


def stranded_unscheduled(pod: dict[str, Any]) -> bool:
    """Marked for deletion, never scheduled, and waiting for nothing (see ``namespace.stranded``)."""
    meta = pod.get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and not (pod.get("spec") or {}).get("nodeName") \
        and stranded(meta)


class PodGarbageCollector(Controller):
    name = "pod-garbage-collector"

    def __init__(self, clients: ClientSet) -> None:
        super().__init__()
        self.pod_client = clients.client("", "pods")
        self.pods = Informer(self.pod_client)
        self.informers.append(self.pods)
        self.pods.add_handler(self._event)

    def _event(self, etype: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if etype != "DELETED" and stranded_unscheduled(obj):
            meta = obj["metadata"]
            self.queue.add_after((str(meta.get("namespace", "")), str(meta.get("name", ""))), GRACE)

    async def on_synced(self) -> None:
        for pod in self.pods.items():
            self._event("ADDED", pod, None)

    async def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        namespace, name = str(key[0]), str(key[1])
        pod = self.pods.get(namespace, name)
        if pod is None or not stranded_unscheduled(pod):
            return
        uid = str(pod["metadata"].get("uid", ""))
        try:
            if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                # A patch of the status, as kube's (its role grants patch, not update, on pods/status).
                await self.pod_client.patch(namespace, name, {"status": {"phase": "Failed"}}, subresource="status")
            await self.pod_client.delete(namespace, name, uid=uid or None, grace_period_seconds=0)
        except APIError as err:
            if err.code not in (404, 409):
                raise  # 404: gone already; 409: replaced or changed meanwhile, its own event follows
