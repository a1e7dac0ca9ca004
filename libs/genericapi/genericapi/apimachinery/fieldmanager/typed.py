"""Walks over an object with its :class:`~.schema.TypeNode`: SMD's ``typed`` package.

``to_field_set`` (the fields a value sets), ``compare`` (added / modified / removed paths),
``merge`` (an applied configuration over the live object) and ``remove_items`` follow
structured-merge-diff's walkers rule for rule, so the sets and merged objects are the ones
kube-apiserver computes. Values are plain JSON values; ``MISSING`` marks an absent field
(different from an explicit ``null``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import pathelement as pe_
from .fieldset import FieldSet, Path
from .schema import DEDUCED, LIST, MAP, TypeNode


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class TypedError(ValueError):
    """An object that does not fit its schema's merge rules (SMD's ValidationErrors)."""

    def __init__(self, errors: list[tuple[Path, str]]) -> None:
        self.errors = errors
        super().__init__(self.message())

    def message(self) -> str:
        lines = [f"{pe_.display_path(path)}: {msg}" for path, msg in self.errors]
        if len(lines) == 1:
            return lines[0]
        return "errors:\n  " + "\n  ".join(lines)


#: A path being walked, linked from its last element back to the root: ``(parent, element)`` or
#: None for the root. Extending it is O(1) (a tuple per level would copy the whole path at every
#: level, quadratic in depth); it becomes a :data:`Path` only where one is recorded.
Trail = tuple[Any, str] | None


def _path(trail: Trail) -> Path:
    out: list[str] = []
    while trail is not None:
        trail, pe = trail
        out.append(pe)
    out.reverse()
    return tuple(out)


def _shape(node: TypeNode, v: Any) -> str:
    """How SMD handles ``v`` at ``node``: "map", "list" (granular), or "leaf"."""
    kind = node.kind
    if kind == DEDUCED:
        return "map" if isinstance(v, dict) else "leaf"
    if kind == MAP:
        if node.atomic or not (v is None or v is MISSING or isinstance(v, dict)):
            return "leaf"
        return "map"
    if kind == LIST:
        if node.list_type == "atomic" or not (v is None or v is MISSING or isinstance(v, list)):
            return "leaf"
        return "list"
    return "leaf"


def _fmt_keys(keys: tuple[str, ...]) -> str:
    return "[" + " ".join(f'"{k}"' for k in keys) + "]"


def item_element(node: TypeNode, item: Any) -> str:
    """The path element of one item of an associative list (raises ValueError when none)."""
    if node.list_type == "map":
        if item is None:
            raise ValueError("associative list with keys may not have a null element")
        if not isinstance(item, dict):
            raise ValueError("associative list with keys may not have non-map elements")
        fields: dict[str, Any] = {}
        for k in node.keys:
            if k in item:
                fields[k] = item[k]
            elif k in node.key_defaults:
                fields[k] = node.key_defaults[k]
        if node.keys and not fields:
            raise ValueError(f"associative list with keys has an element that omits all key fields "
                             f"{_fmt_keys(node.keys)} (and doesn't have default values for any key fields)")
        return pe_.key(fields)
    if isinstance(item, dict):
        raise ValueError("associative list without keys has an element that's a map type")
    if isinstance(item, list):
        raise ValueError("not supported: associative list with lists as elements")
    if item is None:
        raise ValueError("associative list without keys has an element that's an explicit null")
    return pe_.value(item)


def _elements(node: TypeNode, items: list[Any]) -> list[str] | None:
    """Path elements of the items, or None when one has none (the list is then a leaf)."""
    out: list[str] = []
    for item in items:
        try:
            out.append(item_element(node, item))
        except ValueError:
            return None
    return out


# -- field sets -------------------------------------------------------------------------------
def to_field_set(obj: Any, node: TypeNode) -> FieldSet:
    """The paths ``obj`` sets (``TypedValue.ToFieldSet``)."""
    _, children = _fs(obj, node)
    return children or FieldSet()


def _fs(v: Any, node: TypeNode) -> tuple[bool, FieldSet | None]:
    """(whether the value's own path is a member, the set below it)."""
    shape = _shape(node, v)
    if shape == "leaf":
        return True, None
    if v is None:
        return False, None
    out = FieldSet()
    if shape == "list":
        pes = _elements(node, v)
        if pes is None:
            return True, None
        elem = node.elem()
        seen: set[str] = set()
        dups: set[str] = set()
        for pe in pes:
            (dups if pe in seen else seen).add(pe)
        out.members.update(dups)
        for pe, item in zip(pes, v, strict=True):
            if pe in dups:
                continue
            _, sub = _fs(item, elem)
            out.members.add(pe)
            if sub is not None and (sub.members or sub.children):
                out.children[pe] = sub
        return False, out
    for k, val in v.items():
        pe = pe_.field(k)
        if not isinstance(val, (dict, list)) and val is not None:
            out.members.add(pe)  # a scalar is a leaf whatever its schema says
            continue
        child, named = node.child(k)
        member, sub = _fs(val, child)
        if member or val is None or (isinstance(val, dict) and not val) or not named:
            out.members.add(pe)
        if sub is not None and (sub.members or sub.children):
            out.children[pe] = sub
    return False, out


# -- compare ----------------------------------------------------------------------------------
@dataclass
class Comparison:
    added: FieldSet = field(default_factory=FieldSet)
    modified: FieldSet = field(default_factory=FieldSet)
    removed: FieldSet = field(default_factory=FieldSet)

    def is_same(self) -> bool:
        return self.added.empty() and self.modified.empty() and self.removed.empty()


def compare(lhs: Any, rhs: Any, node: TypeNode) -> Comparison:
    """What changed from ``lhs`` to ``rhs`` (``TypedValue.Compare``)."""
    cmp = Comparison()
    _cmp(lhs, rhs, node, None, cmp)
    return cmp


def _empty(v: Any) -> bool:
    return v is MISSING or v is None or (isinstance(v, (dict, list)) and not v)


def _leaf(lhs: Any, rhs: Any, trail: Trail, cmp: Comparison) -> None:
    if lhs is MISSING:
        cmp.added.insert(_path(trail))
    elif rhs is MISSING:
        cmp.removed.insert(_path(trail))
    elif lhs != rhs or type(lhs) is not type(rhs):
        cmp.modified.insert(_path(trail))


def _graft(target: FieldSet, path: Path, sub: FieldSet | None) -> None:
    """Add ``path`` as a member of ``target`` with ``sub`` below it."""
    if not path:
        if sub is not None:
            target.members |= sub.members
            for pe, child in sub.children.items():
                have = target.children.get(pe)
                target.children[pe] = child if have is None else have.union(child)
        return
    node = target
    for pe in path[:-1]:
        nxt = node.children.get(pe)
        if nxt is None:
            nxt = node.children[pe] = FieldSet()
        node = nxt
    last = path[-1]
    node.members.add(last)
    if sub is not None and (sub.members or sub.children):
        have = node.children.get(last)
        node.children[last] = sub if have is None else have.union(sub)


def _everything(v: Any, node: TypeNode) -> FieldSet | None:
    """What ``compare`` reports below a value present on one side only: every path."""
    shape = _shape(node, v)
    if shape == "leaf" or not v:
        return None
    out = FieldSet()
    if shape == "list":
        pes = _elements(node, v)
        if pes is None:
            return None
        elem = node.elem()
        for pe, item in zip(pes, v, strict=True):
            out.members.add(pe)
            sub = _everything(item, elem)
            if sub is not None and pe not in out.children:
                out.children[pe] = sub
        return out
    for k, val in v.items():
        pe = pe_.field(k)
        out.members.add(pe)
        if not val or not isinstance(val, (dict, list)):
            continue  # nothing below a scalar or an empty value
        child, _ = node.child(k)
        sub = _everything(val, child)
        if sub is not None:
            out.children[pe] = sub
    return out


def _cmp(lhs: Any, rhs: Any, node: TypeNode, trail: Trail, cmp: Comparison) -> None:
    if lhs is MISSING and rhs is not MISSING:
        _graft(cmp.added, _path(trail), _everything(rhs, node))
        return
    if rhs is MISSING and lhs is not MISSING:
        _graft(cmp.removed, _path(trail), _everything(lhs, node))
        return
    ls = _shape(node, lhs) if lhs is not MISSING else None
    rs = _shape(node, rhs) if rhs is not MISSING else None
    shape = rs or ls
    if (ls and rs and ls != rs) or shape == "leaf" or (_empty(lhs) and _empty(rhs)):
        _leaf(lhs, rhs, trail, cmp)
        return
    if shape == "list":
        _cmp_list(lhs if isinstance(lhs, list) else [], rhs if isinstance(rhs, list) else [], node, trail, cmp)
    else:
        ld = lhs if isinstance(lhs, dict) else {}
        rd = rhs if isinstance(rhs, dict) else {}
        for k in ld.keys() | rd.keys() if len(ld) + len(rd) else ():
            lv, rv = ld.get(k, MISSING), rd.get(k, MISSING)
            if not isinstance(lv, (dict, list)) and not isinstance(rv, (dict, list)):
                # scalars or nulls (or absent) on both sides: a leaf whatever the schema says
                _leaf(lv, rv, (trail, pe_.field(k)), cmp)
                continue
            child, _ = node.child(k)
            _cmp(lv, rv, child, (trail, pe_.field(k)), cmp)
    if lhs is MISSING:
        cmp.added.insert(_path(trail))
    elif rhs is MISSING:
        cmp.removed.insert(_path(trail))


def _items_by_element(lpes: list[str], lhs: list[Any], rpes: list[str],
                      rhs: list[Any]) -> Iterator[tuple[str, list[Any], list[Any]]]:
    """(element, its items on the left, on the right) in SMD's order: the left's elements, then
    the right's new ones. Both sides of a list comparison (``_cmp_list`` and ``_chg``) walk this."""
    lvals: dict[str, list[Any]] = {}
    rvals: dict[str, list[Any]] = {}
    order: list[str] = []
    for pe, item in zip(lpes, lhs, strict=True):
        if pe not in lvals:
            order.append(pe)
        lvals.setdefault(pe, []).append(item)
    for pe, item in zip(rpes, rhs, strict=True):
        if pe not in rvals and pe not in lvals:
            order.append(pe)
        rvals.setdefault(pe, []).append(item)
    for pe in order:
        yield pe, lvals.get(pe, []), rvals.get(pe, [])


def _cmp_list(lhs: list[Any], rhs: list[Any], node: TypeNode, trail: Trail, cmp: Comparison) -> None:
    lpes, rpes = _elements(node, lhs), _elements(node, rhs)
    if lpes is None or rpes is None:
        _leaf(lhs, rhs, trail, cmp)
        return
    elem = node.elem()
    for pe, ll, rl in _items_by_element(lpes, lhs, rpes, rhs):
        item_trail = (trail, pe)
        if len(ll) <= 1 and len(rl) <= 1:
            _cmp(ll[0] if ll else MISSING, rl[0] if rl else MISSING, elem, item_trail, cmp)
        elif len(ll) >= 2 and len(rl) >= 2:
            if ll != rl:
                cmp.modified.insert(_path(item_trail))
        elif len(ll) >= 2:
            if rl:
                _cmp(MISSING, rl[0], elem, item_trail, cmp)
            cmp.removed.insert(_path(item_trail))
        else:
            if ll:
                _cmp(ll[0], MISSING, elem, item_trail, cmp)
            cmp.added.insert(_path(item_trail))


def changed(lhs: Any, rhs: Any, node: TypeNode) -> FieldSet:
    """The union of ``added`` and ``modified`` of :func:`compare` in one bottom-up pass, without the removed set
    or the three-way bookkeeping: what a writer takes when no other manager is there to lose
    anything (a create, or an object nobody owns yet)."""
    _, sub = _chg(lhs, rhs, node)
    return sub if sub is not None else FieldSet()


def _leaf_changed(lhs: Any, rhs: Any) -> bool:
    if lhs is MISSING:
        return True
    if rhs is MISSING:
        return False
    return bool(lhs != rhs) or type(lhs) is not type(rhs)


def _chg(lhs: Any, rhs: Any, node: TypeNode) -> tuple[bool, FieldSet | None]:
    """(whether the value's own path was added or modified, what was below it), as ``_cmp``."""
    if lhs is MISSING:
        if rhs is not MISSING:
            return True, _everything(rhs, node)
    elif rhs is MISSING:
        return False, None
    ls = _shape(node, lhs) if lhs is not MISSING else None
    rs = _shape(node, rhs) if rhs is not MISSING else None
    shape = rs or ls
    if (ls and rs and ls != rs) or shape == "leaf" or (_empty(lhs) and _empty(rhs)):
        return _leaf_changed(lhs, rhs), None
    out = FieldSet()
    if shape == "list":
        llist = lhs if isinstance(lhs, list) else []
        rlist = rhs if isinstance(rhs, list) else []
        lpes, rpes = _elements(node, llist), _elements(node, rlist)
        if lpes is None or rpes is None:
            return _leaf_changed(llist, rlist), None
        elem = node.elem()
        for pe, ll, rl in _items_by_element(lpes, llist, rpes, rlist):
            if len(ll) <= 1 and len(rl) <= 1:
                member, sub = _chg(ll[0] if ll else MISSING, rl[0] if rl else MISSING, elem)
            elif len(ll) >= 2 and len(rl) >= 2:
                member, sub = ll != rl, None
            elif len(ll) >= 2:
                member, sub = _chg(MISSING, rl[0], elem) if rl else (False, None)
            else:
                member, sub = True, None
            if member:
                out.members.add(pe)
            if sub is not None and (sub.members or sub.children):
                out.children[pe] = sub
    else:
        ld = lhs if isinstance(lhs, dict) else {}
        rd = rhs if isinstance(rhs, dict) else {}
        for k in ld.keys() | rd.keys() if len(ld) + len(rd) else ():
            lv, rv = ld.get(k, MISSING), rd.get(k, MISSING)
            if not isinstance(lv, (dict, list)) and not isinstance(rv, (dict, list)):
                if _leaf_changed(lv, rv):
                    out.members.add(pe_.field(k))
                continue
            child, _ = node.child(k)
            member, sub = _chg(lv, rv, child)
            pe = pe_.field(k)
            if member:
                out.members.add(pe)
            if sub is not None and (sub.members or sub.children):
                out.children[pe] = sub
    return False, (out if out.members or out.children else None)


# -- merge (apply) ----------------------------------------------------------------------------
def merge(lhs: Any, rhs: Any, node: TypeNode) -> Any:
    """``rhs`` (an applied configuration) merged over ``lhs`` (``TypedValue.Merge``)."""
    errors: list[tuple[Path, str]] = []
    out = _merge(lhs, rhs, node, None, errors)
    if errors:
        raise TypedError(errors)
    return out


def validate(obj: Any, node: TypeNode) -> None:
    """Raise :class:`TypedError` when ``obj`` cannot be typed (duplicate or keyless items)."""
    merge(MISSING, obj, node)


def validate_applied(obj: Any, node: TypeNode) -> None:
    """SMD's validating walk of an applied configuration (``ObjectToTyped`` without
    ``AllowDuplicates``): a field a struct does not declare, an item of an associative list
    without its keys, a duplicated key. Raises :class:`TypedError` with every error found.

    As SMD: a map stops at its first undeclared field, a list at its first item without a path
    element; maps and lists are walked whether atomic or not."""
    errors: list[tuple[Path, str]] = []
    _validate(obj, node, None, errors)
    if errors:
        raise TypedError(errors)


def _validate(v: Any, node: TypeNode, trail: Trail, errors: list[tuple[Path, str]]) -> None:
    kind = node.kind
    if kind == DEDUCED or v is None:
        return
    if kind == MAP and isinstance(v, dict):
        closed = node.closed
        for k, val in v.items():
            child, named = node.child(k)
            if closed and not named:
                errors.append((_path((trail, pe_.field(k))), "field not declared in schema"))
                return
            _validate(val, child, (trail, pe_.field(k)), errors)
    elif kind == LIST and isinstance(v, list):
        elem = node.elem()
        associative = node.list_type != "atomic"
        seen: set[str] = set()
        for i, item in enumerate(v):
            if associative:
                try:
                    pe = item_element(node, item)
                except ValueError as err:
                    errors.append((_path(trail), f"element {i}: {err}"))
                    return
                if pe in seen:
                    errors.append((_path(trail), f"duplicate entries for key {pe_.display(pe)}"))
                seen.add(pe)
            else:
                pe = pe_.index(i)
            _validate(item, elem, (trail, pe), errors)


def _merge(lhs: Any, rhs: Any, node: TypeNode, trail: Trail, errors: list[tuple[Path, str]]) -> Any:
    if rhs is MISSING:
        return lhs
    ls = _shape(node, lhs) if lhs is not MISSING else None
    rs = _shape(node, rhs)
    if rs == "list":
        _check_list(rhs, node, trail, errors)
    if lhs is MISSING or rs == "leaf" or ls != rs:
        if rs == "map" and isinstance(rhs, dict):
            for k, val in rhs.items():
                child, _ = node.child(k)
                _merge(MISSING, val, child, (trail, pe_.field(k)), errors)
        elif rs == "list" and isinstance(rhs, list) and node.list_type != "atomic":
            elem = node.elem()
            for item in rhs:
                try:
                    pe = item_element(node, item)
                except ValueError:
                    continue
                _merge(MISSING, item, elem, (trail, pe), errors)
        return rhs
    if rs == "list":
        if _empty(lhs) and _empty(rhs):
            return rhs
        return _merge_list(lhs if isinstance(lhs, list) else [], rhs if isinstance(rhs, list) else [],
                           node, trail, errors)
    if not isinstance(rhs, dict):
        return lhs if isinstance(lhs, dict) and rhs is None else rhs
    if not isinstance(lhs, dict):
        return rhs
    out: dict[str, Any] = {}
    for k, lval in lhs.items():
        child, _ = node.child(k)
        out[k] = _merge(lval, rhs.get(k, MISSING), child, (trail, pe_.field(k)), errors)
    for k, rval in rhs.items():
        if k not in lhs:
            child, _ = node.child(k)
            out[k] = _merge(MISSING, rval, child, (trail, pe_.field(k)), errors)
    return out


def _check_list(items: Any, node: TypeNode, trail: Trail, errors: list[tuple[Path, str]]) -> None:
    if not isinstance(items, list):
        return
    seen: set[str] = set()
    for i, item in enumerate(items):
        try:
            pe = item_element(node, item)
        except ValueError as err:
            errors.append((_path(trail), f"element {i}: {err}"))
            continue
        if pe in seen:
            errors.append((_path(trail), f"duplicate entries for key {pe_.display(pe)}"))
        seen.add(pe)


def _merge_list(lhs: list[Any], rhs: list[Any], node: TypeNode, trail: Trail,
                errors: list[tuple[Path, str]]) -> list[Any]:
    """SMD's ordering: live items keep their places, applied items follow their own order."""
    rpes_raw: list[str] = []
    robs: dict[str, Any] = {}
    for item in rhs:
        try:
            pe = item_element(node, item)
        except ValueError:
            continue
        if pe in robs:
            continue
        robs[pe] = item
        rpes_raw.append(pe)
    lpes: list[str] = []
    lobs: dict[str, Any] = {}
    litems: list[Any] = []
    for item in lhs:
        try:
            pe = item_element(node, item)
        except ValueError:
            continue
        # Duplicated live items are not merged with the applied value.
        lobs[pe] = None if pe in lobs else item
        lpes.append(pe)
        litems.append(item)
    rpes = rpes_raw
    shared = [pe for pe in rpes if pe in lobs]
    shared_i = 0
    next_shared = shared[0] if shared else None
    elem = node.elem()
    out: list[Any] = []
    merged_rhs: set[str] = set()
    li = ri = 0
    while li < len(lpes) or ri < len(rpes):
        if li < len(lpes) and ri < len(rpes):
            pe = lpes[li]
            if pe == rpes[ri]:
                merged_rhs.add(pe)
                lchild = lobs[pe]
                out.append(_merge(lchild if lchild is not None else MISSING, robs[pe], elem, (trail, pe), errors))
                li += 1
                ri += 1
                shared_i += 1
                next_shared = shared[shared_i] if shared_i < len(shared) else None
                continue
            if pe in robs and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(lpes):
            pe = lpes[li]
            if pe not in robs:
                out.append(litems[li])
                li += 1
                continue
            if pe in merged_rhs:
                li += 1
        if ri < len(rpes):
            pe = rpes[ri]
            merged_rhs.add(pe)
            lchild = lobs.get(pe, MISSING)
            out.append(_merge(lchild if lchild is not None else MISSING, robs[pe], elem, (trail, pe), errors))
            ri += 1
            if next_shared is not None and next_shared == pe:
                shared_i += 1
                next_shared = shared[shared_i] if shared_i < len(shared) else None
    return out


# -- removal ----------------------------------------------------------------------------------
def remove_items(obj: Any, items: FieldSet, node: TypeNode) -> Any:
    """``obj`` without the given paths (``TypedValue.RemoveItems``); MISSING if nothing is left."""
    if items.empty():
        return obj
    shape = _shape(node, obj)
    if shape == "leaf" or not obj:
        return obj
    if shape == "list":
        pes = _elements(node, obj)
        if pes is None:
            return obj
        elem = node.elem()
        out_items = []
        for pe, item in zip(pes, obj, strict=True):
            if pe in items.members:
                continue
            sub = items.children.get(pe)
            if sub is not None:
                item = remove_items(item, sub, elem)
                if item is MISSING:
                    item = None
            out_items.append(item)
        return out_items if out_items else MISSING
    out: dict[str, Any] = {}
    for k, val in obj.items():
        pe = pe_.field(k)
        if pe in items.members:
            continue
        sub = items.children.get(pe)
        if sub is not None:
            child, _ = node.child(k)
            val = remove_items(val, sub, child)
            if val is MISSING:
                continue
        out[k] = val
    return out if out else MISSING


#: Struct fields that Go types hold by value: a built-in kind's empty object (the live object
#: kube compares a create against) already has them, so a create does not own them as such.
_BY_VALUE = frozenset({"metadata", "spec", "status", "template", "jobTemplate", "strategy", "updateStrategy"})


def go_zero_baseline(obj: Any, node: TypeNode) -> dict[str, Any]:
    """The parts of ``obj`` that a new Go object of a built-in kind has before decoding: the
    by-value structs above (empty) and the ``containers`` list (null)."""
    out: dict[str, Any] = {}
    if not isinstance(obj, dict):
        return out
    for k, v in obj.items():
        child, named = node.child(k)
        if not named:
            continue
        if k in _BY_VALUE and isinstance(v, dict) and child.is_struct:
            out[k] = go_zero_baseline(v, child)
        elif k == "containers" and child.kind == LIST:
            out[k] = None
        elif k == "creationTimestamp":
            out[k] = None
    return out


def ensure_named_fields_are_members(fs: FieldSet, node: TypeNode) -> FieldSet:
    """Also own the named (struct) fields that have owned fields below them."""
    out = FieldSet()
    out.members = set(fs.members)
    for pe, sub in fs.children.items():
        if pe[0] == "f":
            child, named = node.child(pe[2:])
            if named and node.is_struct:
                out.members.add(pe)
        else:
            child = node.elem()
        out.children[pe] = ensure_named_fields_are_members(sub, child)
    return out
