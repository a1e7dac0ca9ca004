"""The garbage collector: ownerReferences across every kind, as kube's pkg/controller/garbagecollector.

One informer per deletable resource the ``ClientSet`` serves (built-ins here, custom resources of
the delegate link), re-synced whenever the served set changes, feeds the dependency graph
(``garbagecollector_graph``). Work items are ``("delete", uid)`` (attemptToDelete) and
``("orphan", uid)`` (attemptToOrphan):

* background: an object whose owners are all verified absent (live GET, by name *and* uid: a
  graph that has not seen an owner proves nothing) is deleted, honouring its own orphan or
  foreground finalizer;
* foreground: an owner being deleted with ``foregroundDeletion`` gets its dependents deleted; it
  keeps the finalizer while dependents with ``blockOwnerDeletion`` remain, then it is removed;
* orphan: an owner being deleted with ``orphan`` has its reference removed from every dependent,
  then the finalizer;
* an object with a live owner loses only its references to absent owners.

Owner scope follows kube: a namespaced owner is looked up in the dependent's namespace (a
namespaced owner elsewhere is absent); a cluster-scoped dependent naming a namespaced kind is
invalid and never collected; a reference whose apiVersion/kind the chain does not serve cannot
be resolved and is retried slowly (the dependent stays). Events are not monitored (as kube).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from genericapi.apimachinery.errors import APIError
from genericapi.controllers import APIResource, ClientSet, Controller, Informer, ResourceClient, WorkQueue
from genericapi.controllers.retry import get_or_none, update_on_conflict

from .garbagecollector_graph import (
    FINALIZER_FOREGROUND,
    FINALIZER_ORPHAN,
    Graph,
    Identity,
    Node,
    Work,
    deleting_with,
    finalizers,
    identity_of,
    owner_refs,
)

log = logging.getLogger(__name__)

#: Resources the collector never watches (kube's DefaultIgnoredResources).
IGNORED = frozenset({("", "events"), ("events.k8s.io", "events")})
#: Retry delay of an item whose owner's apiVersion/kind is not served (may appear later: a CRD).
UNRESOLVED_RETRY = 5.0
#: How long the first sync of every informer may take before workers start anyway.
SYNC_TIMEOUT = 30.0
_ABSENT_CACHE_SIZE = 10_000
_PATCH_RETRIES = 10


#: What the graph reads of an object's metadata (identity, owners, deletion state).
_GRAPH_METADATA = ("name", "namespace", "uid", "resourceVersion", "ownerReferences", "finalizers",
                   "deletionTimestamp", "deletionGracePeriodSeconds")


def graph_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """What the collector's informers keep of each object: kube's metadata informer narrowed to the
    fields the graph and its handlers read (labels, annotations, timestamps and managedFields are not
    read: an action reads the live object). apiVersion, kind and namespace are interned: thousands of
    objects share a few such strings. Inside core-api every byte kept here is kept per stored object."""
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in _GRAPH_METADATA if k in meta}
    namespace = kept.get("namespace")
    if isinstance(namespace, str):
        kept["namespace"] = sys.intern(namespace)
    return {"apiVersion": sys.intern(str(obj.get("apiVersion") or "")), "kind": sys.intern(str(obj.get("kind") or "")),
            "metadata": kept}


class Unresolvable(Exception):
    """An ownerReference (or a virtual node) whose apiVersion/kind is not served."""


class InvalidScope(Exception):
    """A cluster-scoped object naming a namespaced owner: never resolvable, never retried."""


def deletable(resource: APIResource) -> bool:
    return {"delete", "list", "watch"} <= resource.verbs and (resource.group, resource.plural) not in IGNORED


class GarbageCollector(Controller):
    name = "garbagecollector"

    def __init__(self, clients: ClientSet) -> None:
        super().__init__()
        self.clients = clients
        self.graph = Graph()
        self.monitors: dict[tuple[str, str], Informer] = {}
        self.absent: OrderedDict[tuple[str, str], None] = OrderedDict()  # (namespace or "", uid)
        self._running = False
        clients.on_change(self._on_resources_changed)

    # -- monitors ---------------------------------------------------------------------------
    async def _on_resources_changed(self) -> None:
        if self._running:
            await self.sync_monitors()

    async def sync_monitors(self) -> None:
        """Watch every deletable resource served now; stop watching those gone."""
        wanted = {(r.group, r.plural): r for r in self.clients.resources() if deletable(r)}
        for key in [k for k in self.monitors if k not in wanted]:
            await self.monitors.pop(key).stop()
        for key, res in wanted.items():
            current = self.monitors.get(key)
            if current is not None and current.client.resource == res:
                continue
            if current is not None:
                await current.stop()
            # kube's collector watches through metadata informers: the graph needs identity, owners,
            # finalizers and deletionTimestamp; it reads an object whole only when it acts on it.
            informer = Informer(self.clients.client(res.group, res.plural, res.version), transform=graph_metadata)
            informer.add_handler(self._event)
            self.monitors[key] = informer
            await informer.start()

    def _event(self, etype: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if etype == "DELETED":
            node = self.graph.get(identity_of(obj).uid)
            if node is not None and node.dependents and not node.virtual:
                self._mark_absent(node.identity.namespace, node.uid)
            self._enqueue(self.graph.forget_object(obj))
        else:
            self._enqueue(self.graph.observe(obj))

    def _enqueue(self, work: Work) -> None:
        for uid in work.delete:
            self.queue.add(("delete", uid))
        for uid in work.orphan:
            self.queue.add(("orphan", uid))

    def _mark_absent(self, namespace: str, uid: str) -> None:
        self.absent[(namespace, uid)] = None
        self.absent.move_to_end((namespace, uid))
        while len(self.absent) > _ABSENT_CACHE_SIZE:
            self.absent.popitem(last=False)

    # -- run --------------------------------------------------------------------------------
    async def run(self, workers: int = 1) -> None:
        self.queue = WorkQueue()
        self.graph = Graph()
        self.absent.clear()
        self._running = True
        try:
            await self.sync_monitors()
            try:
                await asyncio.wait_for(asyncio.gather(*(m.wait_synced() for m in list(self.monitors.values()))),
                                       SYNC_TIMEOUT)
            except TimeoutError:
                log.warning("garbage collector: not every informer synced in %ss; starting anyway", SYNC_TIMEOUT)
            log.info("garbage collector: graph of %d objects over %d resources", len(self.graph), len(self.monitors))
            async with asyncio.TaskGroup() as group:
                for i in range(max(workers, 1)):
                    group.create_task(self._worker(), name=f"{self.name}-worker-{i}")
        finally:
            self._running = False
            self.queue.shut_down()
            for informer in list(self.monitors.values()):
                with contextlib.suppress(Exception):
                    await informer.stop()
            self.monitors.clear()

    async def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        kind, uid = key
        try:
            if kind == "delete":
                await self.attempt_delete(uid)
            else:
                await self.attempt_orphan(uid)
        except Unresolvable as err:
            log.debug("garbage collector: %s: %s; retrying later", key, err)
            self.queue.add_after(key, UNRESOLVED_RETRY)
        except InvalidScope as err:
            log.info("garbage collector: %s", err)

    # -- resolving references -------------------------------------------------------------------
    def resolve(self, api_version: str, kind: str) -> ResourceClient:
        """The client of the resource an apiVersion/kind names (that exact version must be served)."""
        group, _, version = api_version.rpartition("/")
        if not version or not kind:
            raise Unresolvable(f"unable to get REST mapping for {api_version}/{kind}")
        for res in self.clients.resources():
            if res.group == group and res.kind == kind:
                try:
                    return self.clients.client(group, res.plural, version)
                except APIError:
                    break
        raise Unresolvable(f"unable to get REST mapping for {api_version}/{kind}")

    def _locate(self, ident: Identity) -> tuple[ResourceClient, str]:
        client = self.resolve(ident.api_version, ident.kind)
        return client, ident.namespace if client.resource.namespaced else ""

    # -- attemptToDelete --------------------------------------------------------------------------
    async def attempt_delete(self, uid: str) -> None:
        node = self.graph.get(uid)
        if node is None:
            return
        client, ns = self._locate(node.identity)
        try:
            latest: dict[str, Any] | None = await client.get(ns, node.identity.name)
        except APIError as err:
            if err.code != 404:
                raise
            latest = None
        if latest is None or identity_of(latest).uid != uid:
            # Verified absent (the "virtual node" check): its dependents are looked at next.
            if node.dependents:
                self._mark_absent(ns, uid)
            self._enqueue(self.graph.forget(uid))
            return
        if node.virtual:
            self.queue.add_after(("delete", uid), UNRESOLVED_RETRY)  # until the informer sees it
        meta = latest.get("metadata") or {}
        if deleting_with(latest, FINALIZER_FOREGROUND):
            await self._finish_foreground(node, client, ns, latest)
            return
        if meta.get("deletionTimestamp"):
            return
        refs = owner_refs(latest)
        if not refs:
            return
        solid, dangling, waiting = await self._classify(node, refs)
        name = node.identity.name
        if solid:
            drop = {str(r.get("uid") or "") for r in dangling + waiting}
            if drop:
                await self._patch_owner_refs(client, ns, name, uid, lambda r: None if r.get("uid") in drop else r)
            return
        if waiting and node.dependents:
            if any((d := self.graph.get(u)) is not None and d.deleting_dependents for u in node.dependents):
                # A dependent waits on us while our owner waits on us: unblock to break the cycle.
                waiting_uids = {str(r.get("uid") or "") for r in waiting}
                await self._patch_owner_refs(client, ns, name, uid, lambda r: {**r, "blockOwnerDeletion": False}
                                             if r.get("uid") in waiting_uids else r)
            await self._delete(client, ns, name, uid, "Foreground")
            return
        current = finalizers(latest)
        policy = "Orphan" if FINALIZER_ORPHAN in current else "Foreground" if FINALIZER_FOREGROUND in current \
            else "Background"
        await self._delete(client, ns, name, uid, policy)

    async def _classify(self, node: Node, refs: list[dict[str, Any]]
                        ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """(solid, dangling, waitingForDependentsDeletion) references of ``node``."""
        solid, dangling, waiting = [], [], []
        for ref in refs:
            owner = await self._live_owner(node, ref)
            if owner is None:
                dangling.append(ref)
            elif deleting_with(owner, FINALIZER_FOREGROUND):
                waiting.append(ref)
            else:
                solid.append(ref)
        return solid, dangling, waiting

    async def _live_owner(self, node: Node, ref: dict[str, Any]) -> dict[str, Any] | None:
        """The owner a reference names, or None when it is verified absent (``isDangling``)."""
        ruid = str(ref.get("uid") or "")
        if ("", ruid) in self.absent or (node.identity.namespace, ruid) in self.absent:
            return None
        client = self.resolve(str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""))
        if client.resource.namespaced and not node.identity.namespace:
            raise InvalidScope(f"cluster-scoped {node.identity.kind} {node.identity.name} names a namespaced "
                               f"owner {ref.get('kind')} {ref.get('name')}: it is never collected")
        ns = node.identity.namespace if client.resource.namespaced else ""
        try:
            owner = await client.get(ns, str(ref.get("name") or ""))
        except APIError as err:
            if err.code != 404:
                raise
            self._mark_absent(ns, ruid)
            return None
        if identity_of(owner).uid != ruid:
            self._mark_absent(ns, ruid)
            return None
        return owner

    async def _finish_foreground(self, node: Node, client: ResourceClient, ns: str, latest: dict[str, Any]) -> None:
        """``processDeletingDependentsItem``: drop the finalizer once no blocking dependent is left."""
        blocking = self.graph.blocking_dependents(node)
        if not blocking:
            await self._remove_finalizer(client, ns, node.identity.name, node.uid, FINALIZER_FOREGROUND)
            return
        for dep in blocking:
            if not dep.being_deleted:
                self.queue.add(("delete", dep.uid))

    # -- attemptToOrphan ------------------------------------------------------------------------
    async def attempt_orphan(self, uid: str) -> None:
        node = self.graph.get(uid)
        if node is None or node.virtual:
            return
        client, ns = self._locate(node.identity)
        latest = await get_or_none(client, ns, node.identity.name)
        if latest is None:
            return
        if identity_of(latest).uid != uid or not deleting_with(latest, FINALIZER_ORPHAN):
            return
        failures: list[Exception] = []
        for dep_uid in list(node.dependents):
            dep = self.graph.get(dep_uid)
            if dep is None or dep.virtual:
                continue
            try:
                dclient, dns = self._locate(dep.identity)
                await self._patch_owner_refs(dclient, dns, dep.identity.name, dep.uid,
                                             lambda r: None if r.get("uid") == uid else r)
            except (APIError, Unresolvable) as err:
                failures.append(err)
        if failures:
            raise failures[0]
        await self._remove_finalizer(client, ns, node.identity.name, uid, FINALIZER_ORPHAN)

    # -- writes ---------------------------------------------------------------------------------
    async def _delete(self, client: ResourceClient, ns: str, name: str, uid: str, policy: str) -> None:
        try:
            await client.delete(ns, name, propagation_policy=policy, uid=uid)
        except APIError as err:
            if err.code not in (404, 409):  # gone already, or replaced by a namesake (uid precondition)
                raise

    async def _patch_owner_refs(self, client: ResourceClient, ns: str, name: str, uid: str,
                                change: Any) -> None:
        """Rewrite the object's ownerReferences (``change(ref)`` -> new ref or None to drop), pinned
        to the version read so a concurrent writer is never overwritten."""
        def rewritten(obj: dict[str, Any]) -> dict[str, Any] | None:
            if identity_of(obj).uid != uid:
                return None
            refs = owner_refs(obj)
            new = [n for n in (change(r) for r in refs) if n is not None]
            if new == refs:
                return None
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            return {"metadata": {"ownerReferences": new or None, "resourceVersion": rv}}

        await update_on_conflict(lambda: get_or_none(client, ns, name), rewritten,
                                 lambda patch: client.patch(ns, name, patch),
                                 tries=_PATCH_RETRIES, conflict=f"ownerReferences of {name} kept changing")

    async def _remove_finalizer(self, client: ResourceClient, ns: str, name: str, uid: str, finalizer: str) -> None:
        def without(obj: dict[str, Any]) -> dict[str, Any] | None:
            current = finalizers(obj)
            if identity_of(obj).uid != uid or finalizer not in current:
                return None
            rest = [f for f in current if f != finalizer]
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            return {"metadata": {"finalizers": rest or None, "resourceVersion": rv}}

        await update_on_conflict(lambda: get_or_none(client, ns, name), without,
                                 lambda patch: client.patch(ns, name, patch),
                                 tries=_PATCH_RETRIES, conflict=f"finalizers of {name} kept changing")
