"""The garbage collector's dependency graph (kube's ``GraphBuilder`` + ``node``), without I/O.

Every object seen by the collector's informers is a node keyed by uid; its ``ownerReferences``
are edges to owner nodes. An owner named by a reference but not (yet) observed is a *virtual*
node: the collector must verify it against the API before trusting its absence. ``observe`` and
``forget`` apply one informer event (or a virtual delete) and say which nodes must now be looked
at: ``delete`` (attemptToDelete: maybe collect it, or finish a foreground deletion) and
``orphan`` (attemptToOrphan: strip it from its dependents' references, then drop its finalizer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

FINALIZER_ORPHAN = "orphan"
FINALIZER_FOREGROUND = "foregroundDeletion"


@dataclass(frozen=True, slots=True)
class Identity:
    """Where an object lives: apiVersion/kind, namespace (the dependent's for a virtual owner)
    and name, plus its uid."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str


#: The dependents of a node that has none: shared, so the graph's many leaf nodes (every
#: ConfigMap, Secret, ... the collector watches) carry no empty set of their own (216 bytes each).
NO_DEPENDENTS: frozenset[str] = frozenset()
#: The owners of a node that has none (most objects): shared, not an empty list each (56 bytes).
NO_OWNERS: tuple[dict[str, Any], ...] = ()


@dataclass(slots=True)
class Node:
    identity: Identity
    owners: Sequence[dict[str, Any]] = NO_OWNERS
    dependents: set[str] | frozenset[str] = NO_DEPENDENTS
    virtual: bool = False
    being_deleted: bool = False
    deleting_dependents: bool = False

    @property
    def uid(self) -> str:
        return self.identity.uid

    def add_dependent(self, uid: str) -> None:
        if isinstance(self.dependents, set):
            self.dependents.add(uid)
        else:
            self.dependents = {uid}

    def drop_dependent(self, uid: str) -> None:
        if isinstance(self.dependents, set):
            self.dependents.discard(uid)


@dataclass
class Work:
    """Nodes (uids) to look at after a graph change."""

    delete: set[str] = field(default_factory=set)
    orphan: set[str] = field(default_factory=set)

    def merge(self, other: Work) -> None:
        self.delete |= other.delete
        self.orphan |= other.orphan


def identity_of(obj: dict[str, Any]) -> Identity:
    meta = obj.get("metadata") or {}
    return Identity(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""), str(meta.get("namespace") or ""),
                    str(meta.get("name") or ""), str(meta.get("uid") or ""))


def owner_refs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    refs = (obj.get("metadata") or {}).get("ownerReferences")
    return [r for r in refs if isinstance(r, dict)] if isinstance(refs, list) else []


def finalizers(obj: dict[str, Any]) -> list[str]:
    found = (obj.get("metadata") or {}).get("finalizers")
    return [f for f in found if isinstance(f, str)] if isinstance(found, list) else []


def deleting_with(obj: dict[str, Any], finalizer: str) -> bool:
    """Being deleted and waiting on ``finalizer``."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp")) and finalizer in finalizers(obj)


class Graph:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}

    def __len__(self) -> int:
        return len(self.nodes)

    def get(self, uid: str) -> Node | None:
        return self.nodes.get(uid)

    def blocking_dependents(self, owner: Node) -> list[Node]:
        """Dependents whose reference to ``owner`` sets ``blockOwnerDeletion``."""
        out = []
        for uid in owner.dependents:
            dep = self.nodes.get(uid)
            if dep is None:
                continue
            if any(r.get("uid") == owner.uid and r.get("blockOwnerDeletion") is True for r in dep.owners):
                out.append(dep)
        return out

    # -- events ------------------------------------------------------------------------------
    def observe(self, obj: dict[str, Any]) -> Work:
        """An object was added or changed."""
        work = Work()
        ident = identity_of(obj)
        if not ident.uid:
            return work
        refs = owner_refs(obj)
        node = self.nodes.get(ident.uid)
        if node is None:
            node = Node(ident, owners=refs or NO_OWNERS)
            self.nodes[ident.uid] = node
            self._link(node, refs, work)
        else:
            if node.virtual:
                node.virtual = False
                work.delete.add(node.uid)  # a verified owner may unblock its dependents' decisions
            node.identity = ident
            old = {str(r.get("uid")): r for r in node.owners}
            new = {str(r.get("uid")): r for r in refs}
            added = [r for u, r in new.items() if u not in old]
            removed = [r for u, r in old.items() if u not in new]
            unblocked = [r for u, r in new.items() if u in old and old[u].get("blockOwnerDeletion") is True
                         and r.get("blockOwnerDeletion") is not True]
            node.owners = refs or NO_OWNERS
            self._link(node, added, work)
            for ref in removed:
                owner = self.nodes.get(str(ref.get("uid")))
                if owner is not None:
                    owner.drop_dependent(node.uid)
                    if owner.deleting_dependents:
                        work.delete.add(owner.uid)
            for ref in unblocked:
                owner = self.nodes.get(str(ref.get("uid")))
                if owner is not None and owner.deleting_dependents:
                    work.delete.add(owner.uid)
        self._transitions(node, obj, work)
        return work

    def _link(self, node: Node, refs: Sequence[dict[str, Any]], work: Work) -> None:
        for ref in refs:
            uid = str(ref.get("uid") or "")
            owner = self.nodes.get(uid)
            if owner is None:
                owner = Node(Identity(str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""),
                                      node.identity.namespace, str(ref.get("name") or ""), uid), virtual=True)
                self.nodes[uid] = owner
                work.delete.add(uid)  # verify the virtual owner against the API
            owner.add_dependent(node.uid)
            if not uid:
                work.delete.add(node.uid)  # a reference without uid can never match an owner

    def _transitions(self, node: Node, obj: dict[str, Any], work: Work) -> None:
        node.being_deleted = bool((obj.get("metadata") or {}).get("deletionTimestamp"))
        if deleting_with(obj, FINALIZER_ORPHAN):
            work.orphan.add(node.uid)
        if deleting_with(obj, FINALIZER_FOREGROUND):
            node.deleting_dependents = True
            work.delete |= node.dependents
            work.delete.add(node.uid)
        else:
            node.deleting_dependents = False

    def forget(self, uid: str) -> Work:
        """An object is gone (a DELETED event, or a virtual owner verified absent)."""
        work = Work()
        node = self.nodes.pop(uid, None)
        if node is None:
            return work
        for ref in node.owners:
            owner = self.nodes.get(str(ref.get("uid")))
            if owner is None:
                continue
            owner.drop_dependent(uid)
            if owner.deleting_dependents:
                work.delete.add(owner.uid)
            if owner.virtual and not owner.dependents:
                del self.nodes[owner.uid]  # a virtual node only exists for its dependents' sake
        # Its dependents still name the uid: each is looked at (its owner is now absent); one
        # that changes later links to a fresh virtual node.
        work.delete |= node.dependents
        return work

    def forget_object(self, obj: dict[str, Any]) -> Work:
        uid = identity_of(obj).uid
        node = self.nodes.get(uid)
        if node is None or node.virtual:
            return Work()
        return self.forget(uid)
