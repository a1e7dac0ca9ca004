"""FieldSet's algebra tests emptiness in O(1) and the typed walkers carry paths as linked trails.

Both keep managedFields linear in a custom resource's depth (10,000 levels, kube's limit). The
set operations used to call ``empty()`` (a walk of the subtree) on every child they built, and
``compare`` / ``merge`` / ``validate`` rebuilt the path tuple at every level: quadratic in depth.
The results must be exactly the old ones: Hypothesis compares every operation with the previous
implementation (kept here as the reference) on random sets built through the public constructors,
checks the invariant that makes the O(1) test sound (no set keeps an empty child), and the
deep cases count function calls and peak memory at two depths to catch growth faster than linear
(deterministic, where time on a loaded machine is not).
"""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

from genericapi.apimachinery import deepjson
from genericapi.apimachinery.fieldmanager import typed
from genericapi.apimachinery.fieldmanager.fieldset import FieldSet, Path
from genericapi.apimachinery.fieldmanager.schema import DEDUCED, TypeNode
from hypothesis import given, settings
from hypothesis import strategies as st

# -- the previous implementation, as the reference ------------------------------------------


def old_empty(s: FieldSet) -> bool:
    return not s.members and all(old_empty(c) for c in s.children.values())


def old_union(x: FieldSet, y: FieldSet) -> FieldSet:
    out = FieldSet()
    out.members = x.members | y.members
    for pe in x.children.keys() | y.children.keys():
        a, b = x.children.get(pe), y.children.get(pe)
        merged = old_union(a, b) if a is not None and b is not None else (a or b).copy()  # type: ignore[union-attr]
        if not old_empty(merged):
            out.children[pe] = merged
    return out


def old_intersection(x: FieldSet, y: FieldSet) -> FieldSet:
    out = FieldSet()
    out.members = x.members & y.members
    for pe, a in x.children.items():
        b = y.children.get(pe)
        if b is not None:
            both = old_intersection(a, b)
            if not old_empty(both):
                out.children[pe] = both
    return out


def old_difference(x: FieldSet, y: FieldSet) -> FieldSet:
    out = FieldSet()
    out.members = x.members - y.members
    for pe, a in x.children.items():
        b = y.children.get(pe)
        rest = old_difference(a, b) if b is not None else a.copy()
        if not old_empty(rest):
            out.children[pe] = rest
    return out


def old_recursive_difference(x: FieldSet, y: FieldSet) -> FieldSet:
    out = FieldSet()
    out.members = x.members - y.members
    for pe, a in x.children.items():
        if pe in y.members:
            continue
        b = y.children.get(pe)
        rest = old_recursive_difference(a, b) if b is not None else a.copy()
        if not old_empty(rest):
            out.children[pe] = rest
    return out


def shape(s: FieldSet) -> Any:
    """The exact structure (members and children), not only the paths ``==`` compares."""
    return (sorted(s.members), {pe: shape(c) for pe, c in sorted(s.children.items())})


def no_empty_child(s: FieldSet) -> bool:
    return all((c.members or c.children) and no_empty_child(c) for c in s.children.values())


# -- random sets -----------------------------------------------------------------------------

ELEMENTS = st.sampled_from(["f:a", "f:b", "f:spec", 'k:{"name":"x"}', 'v:"y"', "i:0"])
PATHS = st.lists(st.lists(ELEMENTS, min_size=1, max_size=6).map(tuple), max_size=12)


@st.composite
def field_sets(draw: st.DrawFn) -> FieldSet:
    """Sets as the field manager makes them: from paths, from fieldsV1, or results of the algebra."""
    base = FieldSet.of(*draw(PATHS))
    how = draw(st.sampled_from(["of", "json", "union", "difference", "intersection"]))
    if how == "json":
        return FieldSet.from_json(base.to_json())
    if how == "of":
        return base
    other = FieldSet.of(*draw(PATHS))
    return {"union": old_union, "difference": old_difference, "intersection": old_intersection}[how](base, other)


OPERATIONS: dict[str, tuple[Callable[[FieldSet, FieldSet], FieldSet], Callable[[FieldSet, FieldSet], FieldSet]]] = {
    "union": (FieldSet.union, old_union),
    "intersection": (FieldSet.intersection, old_intersection),
    "difference": (FieldSet.difference, old_difference),
    "recursive_difference": (FieldSet.recursive_difference, old_recursive_difference),
}


@settings(max_examples=200, deadline=None)
@given(field_sets(), field_sets(), st.sampled_from(sorted(OPERATIONS)))
def test_each_operation_equals_the_previous_implementation(x: FieldSet, y: FieldSet, name: str) -> None:
    new, old = OPERATIONS[name]
    assert no_empty_child(x) and no_empty_child(y)
    got, want = new(x, y), old(x, y)
    assert shape(got) == shape(want)
    assert no_empty_child(got)
    assert got.empty() == old_empty(got) == (not got.members and not got.children)
    assert shape(x) == shape(FieldSet.from_json(x.to_json()))  # the operands are untouched


# -- linear in depth -------------------------------------------------------------------------


# Every service imports deepjson, which allows walking values of its MAX_DEPTH; so does this test.
deepjson.allow_deep_recursion()


def chain(levels: int, leaf: str = "f:v") -> Path:
    return ("f:a",) * levels + (leaf,)


def nested(levels: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def calls(work: Callable[[], object]) -> int:
    """Python and C function calls ``work`` makes: deterministic, unlike time on a loaded machine."""
    count = 0

    def profile(_frame: Any, event: str, _arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return count


def peak_bytes(work: Callable[[], object]) -> int:
    """Peak memory ``work`` allocates (a path tuple per level held down the recursion is quadratic)."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def assert_linear(measure: Callable[[Callable[[], object]], int], work: Callable[[int], Callable[[], object]]) -> None:
    """Four times deeper costs about four times more (quadratic would be sixteen). 1,250 vs 5,000
    levels: the counts are deterministic, so the depths only need to dwarf the constant part (the
    suite's slowest test took 73 s at 2,500 vs 10,000; 10,000 levels stay covered by the tests that
    check the results)."""
    small, large = measure(work(1_250)), measure(work(5_000))
    assert large < 5 * small, (small, large)


def test_set_operations_are_linear_in_depth() -> None:
    def work(levels: int) -> Callable[[], object]:
        a = FieldSet.of(chain(levels), ("f:a",))
        b = FieldSet.of(chain(levels, "f:w"))  # no members on the way down: a walk per level would be quadratic
        return lambda: (a.union(b), b.union(a), a.intersection(b), a.difference(b), b.recursive_difference(a))

    assert_linear(calls, work)


def test_compare_merge_and_validate_are_linear_in_depth() -> None:
    node = TypeNode(DEDUCED)

    def work(levels: int) -> Callable[[], object]:
        old, new = nested(levels, {"v": 1}), nested(levels, {"v": 2, "w": 3})
        return lambda: (typed.compare(old, new, node), typed.merge(old, new, node), typed.validate(new, node),
                        typed.changed(old, new, node))

    assert_linear(calls, work)
    assert_linear(peak_bytes, work)


def test_compare_reports_the_deep_paths() -> None:
    node = TypeNode(DEDUCED)
    levels = 10_000
    cmp = typed.compare(nested(levels, {"v": 1}), nested(levels, {"v": 2, "w": 3}), node)
    assert cmp.modified == FieldSet.of(chain(levels))
    assert cmp.added == FieldSet.of(chain(levels, "f:w"))
    assert cmp.removed.empty()
