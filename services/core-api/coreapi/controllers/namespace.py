"""The namespace controller: empties a namespace being deleted, then finalizes it.

As kube-controller-manager's (pkg/controller/namespace, ``NamespacedResourcesDeleter``): for a
namespace with ``deletionTimestamp`` it makes sure the phase is ``Terminating``, deletes every
object of every namespaced resource that can be deleted (built-ins and the delegate link's
custom resources, from ``ClientSet.resources()``) with background propagation, pods first
(OrderedNamespaceDeletion), counts what is left and which finalizers hold it, records the five
deletion conditions kube records, and once nothing is left removes its token (``kubernetes``)
from ``spec.finalizers`` through ``PUT .../finalize``; the API server then deletes the namespace.
Until then the namespace is looked at again shortly (objects waiting on finalizers).

Pods and nodes: there is no kubelet here, so nothing would ever confirm that a pod bound to a
node (``spec.nodeName`` set) has stopped; it would sit out its grace period and then stay
forever. This controller therefore does what kube's pod garbage collector does for pods bound to
nodes that do not exist (it force-deletes them): such pods are deleted with a grace period of 0.
Pods bound to a Node object that does exist get their grace period, and are force-deleted once it
has run out (standing in for the kubelet that would have reported them gone). Pods that were
never scheduled are deleted at once by the API server anyway.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Hashable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from genericapi.apimachinery.errors import APIError
from genericapi.controllers import APIResource, ClientSet, Controller, Informer, ResourceClient
from genericapi.controllers.retry import get_or_none, update_on_conflict

log = logging.getLogger(__name__)

FINALIZER_TOKEN = "kubernetes"
#: How soon a namespace whose content is not gone yet is looked at again (kube waits for the
#: estimate: 15 s per finalizer; objects here go as soon as their finalizers do).
RECHECK_DELAY = 0.5
#: Deletes in flight at once while emptying a namespace.
CONCURRENCY = 16

#: Condition types the deleter maintains, in kube's order, with their "all is well" reason/message.
CONDITIONS: tuple[tuple[str, str, str], ...] = (
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered", "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
    ("NamespaceDeletionContentFailure", "ContentDeleted",
     "All content successfully deleted, may be waiting on finalization"),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "ContentRemoved", "All content successfully removed"),
)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass
class ContentTotals:
    """What is left after one pass: per resource, and per finalizer holding objects."""

    remaining: dict[tuple[str, str], int] = field(default_factory=dict)  # (group, plural) -> count
    finalizers: dict[str, int] = field(default_factory=dict)


@dataclass
class ConditionUpdater:
    """``namespaceConditionUpdater``: the failures of one pass, as namespace conditions."""

    failed: dict[str, tuple[str, str]] = field(default_factory=dict)  # type -> (reason, message)
    content_errors: list[str] = field(default_factory=list)

    def discovery_failed(self, message: str) -> None:
        self.failed["NamespaceDeletionDiscoveryFailure"] = ("DiscoveryFailed", message)

    def group_version_failed(self, message: str) -> None:
        self.failed["NamespaceDeletionGroupVersionParsingFailure"] = ("GroupVersionParsingFailed", message)

    def delete_content_failed(self, message: str) -> None:
        self.content_errors.append(message)

    def content_totals(self, totals: ContentTotals) -> None:
        left = sorted(f"{plural}.{group} has {n} resource instances"
                      for (group, plural), n in totals.remaining.items() if n)
        if left:
            self.failed["NamespaceContentRemaining"] = ("SomeResourcesRemain",
                                                        f"Some resources are remaining: {', '.join(left)}")
        held = sorted(f"{name} in {n} resource instances" for name, n in totals.finalizers.items() if n)
        if held:
            self.failed["NamespaceFinalizersRemaining"] = ("SomeFinalizerRemain",
                                                           f"Some finalizers are remaining: {', '.join(held)}")

    def apply(self, ns: dict[str, Any], now: str = "") -> bool:
        """Write the conditions into ``ns['status']``; True when anything changed."""
        if self.content_errors and "NamespaceDeletionContentFailure" not in self.failed:
            msgs = sorted(self.content_errors)
            self.failed["NamespaceDeletionContentFailure"] = (
                "ContentDeletionFailed",
                f"Failed to delete all resource types, {len(msgs)} remaining: {', '.join(msgs)}")
        now = now or now_rfc3339()
        status = ns.setdefault("status", {})
        conditions = status.get("conditions")
        if not isinstance(conditions, list):
            conditions = status["conditions"] = []
        changed = False
        for ctype, ok_reason, ok_message in CONDITIONS:
            if ctype in self.failed:
                want_status, (reason, message) = "True", self.failed[ctype]
            else:
                want_status, reason, message = "False", ok_reason, ok_message
            old = next((c for c in conditions if isinstance(c, dict) and c.get("type") == ctype), None)
            if old is None:
                conditions.append({"type": ctype, "status": want_status, "lastTransitionTime": now,
                                   "reason": reason, "message": message})
                changed = True
            elif (old.get("status"), old.get("reason"), old.get("message")) != (want_status, reason, message):
                if old.get("status") != want_status:
                    old["lastTransitionTime"] = now
                old.update(status=want_status, reason=reason, message=message)
                changed = True
        return changed


def stranded(meta: dict[str, Any]) -> bool:
    """Marked for deletion, yet nothing is left to wait for: no finalizers and no grace period.

    A delete with a zero grace period (an unscheduled pod) and the removal of a last finalizer
    are two writes, as in kube: mark, then remove. A crash between them leaves the mark alone;
    deleting such an object again removes it at once, so the deleter must not skip it.
    """
    return not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds")


def deletable_namespaced(resources: list[APIResource]) -> list[APIResource]:
    """Namespaced resources that can be deleted, pods first (OrderedNamespaceDeletion)."""
    found = [r for r in resources if r.namespaced and "delete" in r.verbs and "list" in r.verbs]
    return sorted(found, key=lambda r: (not (r.group == "" and r.plural == "pods"), r.group, r.plural))


class NamespaceDeleter:
    """One pass over one namespace: delete its content, report what is left."""

    def __init__(self, clients: ClientSet) -> None:
        self.clients = clients

    async def delete_content(self, namespace: str, conditions: ConditionUpdater) -> ContentTotals:
        totals = ContentTotals()
        try:
            # Discovery afresh on every pass, as kube's deleter does: a CRD established since the
            # last background poll must not let its objects outlive the namespace. When it fails,
            # what is known still goes (kube's partial discovery); the condition keeps the
            # namespace from being finalized this pass.
            await self.clients.refresh()
        except APIError as err:
            conditions.discovery_failed(err.message)
        try:
            resources = deletable_namespaced(self.clients.resources())
        except APIError as err:
            conditions.discovery_failed(err.message)
            return totals
        for res in resources:
            is_pods = res.group == "" and res.plural == "pods"
            try:
                left, held = await self._delete_resource(res, namespace)
            except APIError as err:
                conditions.delete_content_failed(f"{res.plural}.{res.group}: {err.message}")
                continue
            if left:
                totals.remaining[(res.group, res.plural)] = left
                for name, n in held.items():
                    totals.finalizers[name] = totals.finalizers.get(name, 0) + n
            if is_pods and left:
                break  # everything else waits until the pods are gone
        conditions.content_totals(totals)
        return totals

    async def _delete_resource(self, res: APIResource, namespace: str) -> tuple[int, dict[str, int]]:
        client = self.clients.client(res.group, res.plural, res.version)
        items = await _list_all(client, namespace)
        if not items:
            return 0, {}
        pods = res.group == "" and res.plural == "pods"
        missing_nodes = await self._missing_nodes(items) if pods else set()
        now = datetime.now(UTC)
        gate = asyncio.Semaphore(CONCURRENCY)

        async def remove(obj: dict[str, Any]) -> None:
            meta = obj.get("metadata") or {}
            grace: int | None = None
            if pods:
                node = (obj.get("spec") or {}).get("nodeName")
                expires = parse_time(meta.get("deletionTimestamp"))
                if node and (node in missing_nodes or (expires is not None and expires <= now)):
                    grace = 0  # nothing will ever confirm it stopped: force it, as podgc does
                elif meta.get("deletionTimestamp") and not stranded(meta):
                    return
            elif meta.get("deletionTimestamp") and not stranded(meta):
                return  # already going; waiting on its finalizers
            async with gate:
                try:
                    await client.delete(namespace, str(meta.get("name") or ""), propagation_policy="Background",
                                        uid=meta.get("uid"), grace_period_seconds=grace)
                except APIError as err:
                    if err.code not in (404, 405, 409):
                        raise

        results = await asyncio.gather(*(remove(o) for o in items), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        left = await _list_all(client, namespace)
        held: dict[str, int] = {}
        for obj in left:
            for name in (obj.get("metadata") or {}).get("finalizers") or []:
                held[name] = held.get(name, 0) + 1
        return len(left), held

    async def _missing_nodes(self, pods: list[dict[str, Any]]) -> set[str]:
        names = {str((p.get("spec") or {}).get("nodeName")) for p in pods if (p.get("spec") or {}).get("nodeName")}
        if not names:
            return set()
        try:
            nodes = self.clients.client("", "nodes")
            existing, _rv, _c = await nodes.list()
        except APIError:
            return set()
        return names - {str((n.get("metadata") or {}).get("name")) for n in existing}


async def _list_all(client: ResourceClient, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        page, _rv, token = await client.list(namespace, continue_token=token)
        items.extend(page)
        if not token:
            return items


class NamespaceController(Controller):
    name = "namespace"

    def __init__(self, clients: ClientSet) -> None:
        super().__init__()
        self.clients = clients
        self.ns_client = clients.client("", "namespaces")
        self.namespaces = Informer(self.ns_client)
        self.informers.append(self.namespaces)
        self.namespaces.add_handler(self._event)
        self.deleter = NamespaceDeleter(clients)

    def _event(self, etype: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        meta = obj.get("metadata") or {}
        if etype != "DELETED" and meta.get("deletionTimestamp"):
            self.queue.add(str(meta.get("name") or ""))

    async def on_synced(self) -> None:
        for ns in self.namespaces.items():
            self._event("ADDED", ns, None)

    async def reconcile(self, key: Hashable) -> None:
        name = str(key)
        found = await get_or_none(self.ns_client, "", name)
        if found is None:
            return
        ns = found
        meta = ns.get("metadata") or {}
        if not meta.get("deletionTimestamp"):
            return
        ns = await self._ensure_terminating(ns)
        if FINALIZER_TOKEN not in _spec_finalizers(ns):
            return  # finalized by us already (or never ours); other finalizers are not our business
        conditions = ConditionUpdater()
        totals = await self.deleter.delete_content(name, conditions)
        status_ns = copy.deepcopy(ns)
        if conditions.apply(status_ns):
            try:
                ns = await self.ns_client.update("", name, status_ns, subresource="status")
            except APIError as err:
                if err.code == 404:
                    return
                if err.code != 409:
                    raise
        if totals.remaining or conditions.content_errors or conditions.failed:
            self.queue.add_after(name, RECHECK_DELAY)  # incl. failed discovery: what is left is unknown
            return
        await self._finalize(name)

    async def _ensure_terminating(self, ns: dict[str, Any]) -> dict[str, Any]:
        if (ns.get("status") or {}).get("phase") == "Terminating":
            return ns
        new = copy.deepcopy(ns)
        new.setdefault("status", {})["phase"] = "Terminating"
        return await self.ns_client.update("", ns["metadata"]["name"], new, subresource="status")

    async def _finalize(self, name: str) -> None:
        """Remove our token from spec.finalizers (retried on conflict, as retryOnConflictError)."""
        def without_token(ns: dict[str, Any]) -> dict[str, Any] | None:
            current = _spec_finalizers(ns)
            if FINALIZER_TOKEN not in current:
                return None
            new = copy.deepcopy(ns)
            new.setdefault("spec", {})["finalizers"] = sorted({f for f in current if f != FINALIZER_TOKEN})
            return new

        await update_on_conflict(lambda: get_or_none(self.ns_client, "", name), without_token,
                                 lambda new: self.ns_client.update("", name, new, subresource="finalize"),
                                 tries=10, conflict=f"namespace {name} kept changing while being finalized")


def _spec_finalizers(ns: dict[str, Any]) -> list[str]:
    found = (ns.get("spec") or {}).get("finalizers")
    return [f for f in found if isinstance(f, str)] if isinstance(found, list) else []
