"""Sets of field paths (``fieldpath.Set``) and their ``fieldsV1`` JSON form.

A set is a trie: ``members`` are the paths ending at this node, ``children`` the sets below
each element. Empty children are never kept, so the JSON form is unambiguous: ``{}`` is a
member, ``{".": {}, ...}`` a member that also has members below it, as kube writes them. That
invariant also makes emptiness an O(1) test (``members or children``): the operations below and
the walkers in ``typed`` build only from non-empty parts, so a deep set (a 10,000-level custom
resource) costs time linear in its size, not quadratic as a walk per level would.

A set is never changed once the code that builds it hands it on, so the operations share the
parts of their operands that come out unchanged (a union keeps a child only one side has, a
difference keeps a child the other side does not touch) instead of copying them: a set as deep
as a 10,000-level custom resource is walked only where both operands have it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import pathelement

Path = tuple[str, ...]


class FieldSetError(ValueError):
    """A ``fieldsV1`` document that is not a field set."""


class FieldSet:
    """A set of paths. Operations return sets that may share parts with their operands: change
    only a set you built (``FieldSet()``, ``of``, ``insert``) before handing it on."""

    __slots__ = ("children", "members")

    def __init__(self) -> None:
        self.members: set[str] = set()
        self.children: dict[str, FieldSet] = {}

    # -- building -------------------------------------------------------------------------
    @classmethod
    def of(cls, *paths: Path) -> FieldSet:
        out = cls()
        for p in paths:
            out.insert(p)
        return out

    def insert(self, path: Path) -> None:
        """Add a path; the empty path (the whole object) is not tracked, as in SMD."""
        if not path:
            return
        node = self
        for pe in path[:-1]:
            child = node.children.get(pe)
            if child is None:
                child = node.children[pe] = FieldSet()
            node = child
        node.members.add(path[-1])

    def child(self, pe: str) -> FieldSet:
        """The set below ``pe`` (``WithPrefix``); an empty set when there is none."""
        return self.children.get(pe) or _EMPTY

    # -- queries --------------------------------------------------------------------------
    def empty(self) -> bool:
        """No member anywhere: O(1), since no set keeps an empty child (every way of building one
        below keeps that invariant). A walk was a generator per level, and CPython 3.11 makes each
        generator resumed that deep cost time in proportion to the depth: quadratic at 10,000 levels."""
        return not self.members and not self.children

    def has(self, path: Path) -> bool:
        node = self
        for pe in path[:-1]:
            nxt = node.children.get(pe)
            if nxt is None:
                return False
            node = nxt
        return bool(path) and path[-1] in node.members

    def paths(self, prefix: Path = ()) -> Iterator[Path]:
        """Every member path, in kube's order (``Set.Iterate``: this level's members, then
        each child's paths)."""
        for pe in sorted(self.members, key=pathelement.sort_key):
            yield (*prefix, pe)
        for pe in sorted(self.children, key=pathelement.sort_key):
            yield from self.children[pe].paths((*prefix, pe))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSet):
            return NotImplemented
        return self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"FieldSet({self.to_json()!r})"

    # -- algebra --------------------------------------------------------------------------
    def copy(self) -> FieldSet:
        """A copy sharing nothing with this set (to change it)."""
        out = FieldSet()
        out.members = set(self.members)
        children = out.children
        for pe, child in self.children.items():
            children[pe] = child.copy()
        return out

    def union(self, other: FieldSet) -> FieldSet:
        if not other.members and not other.children:
            return self
        if not self.members and not self.children:
            return other
        out = FieldSet()
        out.members = self.members | other.members
        children = out.children = dict(self.children)
        for pe, b in other.children.items():
            a = children.get(pe)
            # Both non-empty, so is their union: O(1) to keep, not a walk.
            children[pe] = b if a is None else a.union(b)
        return out

    def intersection(self, other: FieldSet) -> FieldSet:
        out = FieldSet()
        out.members = self.members & other.members
        for pe, a in self.children.items():
            b = other.children.get(pe)
            if b is not None:
                both = a.intersection(b)
                if both.members or both.children:
                    out.children[pe] = both
        return out

    def difference(self, other: FieldSet) -> FieldSet:
        """Paths of self not in other (children compared path by path, as ``Set.Difference``)."""
        if not other.members and not other.children:
            return self
        out = FieldSet()
        out.members = self.members - other.members
        for pe, a in self.children.items():
            b = other.children.get(pe)
            rest = a.difference(b) if b is not None else a
            if rest.members or rest.children:
                out.children[pe] = rest
        return out

    def recursive_difference(self, other: FieldSet) -> FieldSet:
        """Paths of self that neither are in other nor lie below a member of other."""
        out = FieldSet()
        out.members = self.members - other.members
        for pe, a in self.children.items():
            if pe in other.members:
                continue
            b = other.children.get(pe)
            rest = a.recursive_difference(b) if b is not None else a
            if rest.members or rest.children:
                out.children[pe] = rest
        return out

    # -- fieldsV1 -------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The ``fieldsV1`` object, keys in kube's order."""
        out: dict[str, Any] = {}
        names = self.members | self.children.keys()
        for pe in sorted(names, key=pathelement.sort_key) if len(names) > 1 else names:
            sub = self.children.get(pe)
            if sub is None:
                out[pe] = {}
                continue
            body = sub.to_json()
            if pe in self.members:
                body = {".": {}, **body}
            out[pe] = body
        return out

    @classmethod
    def from_json(cls, doc: Any, *, normalize: bool = True) -> FieldSet:
        """Parse ``fieldsV1``; raises :class:`FieldSetError` on anything else."""
        if not isinstance(doc, dict):
            raise FieldSetError("fieldsV1 must be a JSON object")
        out = cls()
        for raw_pe, body in doc.items():
            if raw_pe == ".":
                continue
            try:
                pe = pathelement.normalize(raw_pe) if normalize and raw_pe[:1] != "f" else raw_pe
            except pathelement.PathElementError as err:
                raise FieldSetError(str(err)) from None
            if not isinstance(body, dict):
                raise FieldSetError(f"{raw_pe}: expected an object")
            if not body or "." in body:
                out.members.add(pe)
            if body and (len(body) > 1 or "." not in body):
                sub = cls.from_json(body, normalize=normalize)
                if sub.members or sub.children:
                    out.children[pe] = sub
        return out


_EMPTY = FieldSet()
