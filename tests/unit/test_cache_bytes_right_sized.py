"""The watch cache keeps each object's served JSON in an allocation of its own size.

orjson (3.12 and later) returns ``dumps`` output in its whole writer buffer, at least 4 KiB; kept
for every cached object that was ~8 KiB of RSS per small ConfigMap. These tests measure what the
cache's bytes hold with tracemalloc (allocations, not time) for objects loaded by a list and
arriving by watch events.
"""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import orjson
from genericapi.registry.codec import JsonCodec
from genericapi.storage.cacher import CacheView, right_sized
from genericapi.storage.etcd import KeyValue, WatchBatch, WatchEvent

N = 400


def _stored(i: int) -> bytes:
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": f"cm-{i}", "namespace": "bench", "uid": f"uid-{i}",
                     "creationTimestamp": "2026-11-28T01:30:00Z"},
        "data": {"v": "x" * 418}}
    return right_sized(orjson.dumps(obj))


def _view() -> CacheView:
    return CacheView(source=None, codec=JsonCodec(), window=10)  # type: ignore[arg-type]


def _held_per_raw(fill: Any) -> float:
    """Traced bytes still allocated after ``fill()``, per object: the cache keeps each object's JSON
    and its entry, no decoded dict (tests/unit/test_cache_lazy_objects.py)."""
    values = [_stored(i) for i in range(N)]
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        kept = fill(values)
        gc.collect()
        with_cache = tracemalloc.get_traced_memory()[0] - base
        del kept
    finally:
        tracemalloc.stop()
    return with_cache / N


def test_right_sized_copies_into_an_exact_allocation() -> None:
    raw = orjson.dumps({"v": "x" * 800})
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        trimmed = right_sized(raw)
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert trimmed == raw and trimmed is not raw
    assert held < len(raw) + 100


def test_listed_objects_keep_bytes_of_their_own_size() -> None:
    def fill(values: list[bytes]) -> CacheView:
        view = _view()
        view.begin_load()
        view.load_page([KeyValue(b"/k/%d" % i, v, 5, 5 + i) for i, v in enumerate(values)])
        view.end_load(5 + N)
        return view

    per_object = _held_per_raw(fill)
    # The served JSON is ~560 bytes; untrimmed orjson output would hold 4 KiB or more each.
    assert per_object < 1500, per_object


def test_objects_from_watch_events_keep_bytes_of_their_own_size() -> None:
    def fill(values: list[bytes]) -> CacheView:
        view = _view()
        view.begin_load()
        view.end_load(1)
        view.apply(WatchBatch(tuple(WatchEvent("PUT", b"/k/%d" % i, v, None, 2 + i, 2 + i)
                                    for i, v in enumerate(values)), 2 + N))
        return view

    per_object = _held_per_raw(fill)
    assert per_object < 1500, per_object
    view = fill([_stored(i) for i in range(3)])
    cached = view.get(b"/k/1")
    assert cached is not None
    assert orjson.loads(cached.raw)["metadata"] == {**orjson.loads(_stored(1))["metadata"], "resourceVersion": "3"}
