"""EventConversions: a custom resource's watch event converted once for every watcher of a version.

The conversion here is a counting function in place of the webhook (the real webhook is in
tests/integration/test_crd_conversion_watch.py); what is checked is the sharing: calls, encodes,
failures forgotten, a leaving watcher not cancelling the others, the bound.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from extensionsapi.cr_store import ConvertingWatcher
from extensionsapi.cr_watch_conversions import EventConversions
from genericapi.apimachinery.errors import APIError
from genericapi.storage.cacher import CacheEvent, WatchClosed


class Hook:
    """Converts to v2 as a webhook would (one call per batch), counting calls; can fail or stall."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.fail = False
        self.gate: asyncio.Event | None = None

    async def __call__(self, objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.calls.append([o["metadata"]["name"] for o in objs])
        if self.gate is not None:
            await self.gate.wait()
        await asyncio.sleep(0)
        if self.fail:
            raise APIError(500, "", "conversion for g.example.com/v1, Kind=K failed: down")
        out = []
        for o in objs:
            c = copy.deepcopy(o)
            c["apiVersion"] = "g.example.com/v2"
            out.append(c)
        return out


def _obj(name: str, rv: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "g.example.com/v1", "kind": "K",
            "metadata": {"name": name, "resourceVersion": str(rv), "labels": labels or {}}}


def _event(kind: str, name: str, rev: int, labels: dict[str, str] | None = None,
           prev_labels: dict[str, str] | None = None) -> CacheEvent:
    prev = _obj(name, rev - 1, prev_labels) if prev_labels is not None else None
    return CacheEvent(kind, name.encode(), _obj(name, rev, labels), b"", prev, rev, {})


async def test_concurrent_watchers_share_one_call_one_object_one_encoding() -> None:
    hook = Hook()
    conversions = EventConversions(hook, "v2")
    item = _event("MODIFIED", "a", 5, {"x": "1"}, {"x": "0"})
    plain = await asyncio.gather(*(conversions.event(item, with_prev=False) for _ in range(20)))
    assert hook.calls == [["a"]]
    assert all(c is plain[0] for c in plain) and plain[0].obj["apiVersion"] == "g.example.com/v2"
    # Watchers with a selector need the previous object too: one more call, for it alone.
    selected = await asyncio.gather(*(conversions.event(item, with_prev=True) for _ in range(20)))
    assert hook.calls == [["a"], ["a"]]
    assert all(c is selected[0] for c in selected) and selected[0].prev is not None
    assert selected[0].obj is plain[0].obj and selected[0].encoded is plain[0].encoded
    # Selected first: the object and the previous one in one ConversionReview.
    hook2 = Hook()
    both = EventConversions(hook2, "v2")
    await asyncio.gather(*(both.event(item, with_prev=True) for _ in range(5)),
                         *(both.event(item, with_prev=False) for _ in range(5)))
    assert hook2.calls == [["a", "a"]]


async def test_a_failure_reaches_every_waiter_and_is_forgotten() -> None:
    hook = Hook()
    hook.fail = True
    conversions = EventConversions(hook, "v2")
    item = _event("ADDED", "a", 3)
    results = await asyncio.gather(*(conversions.event(item, False) for _ in range(4)), return_exceptions=True)
    assert all(isinstance(r, APIError) and r.message.endswith("failed: down") for r in results)
    assert hook.calls == [["a"]] and len(conversions) == 0
    hook.fail = False  # the webhook is back: the same event converts
    assert (await conversions.event(item, False)).obj["apiVersion"] == "g.example.com/v2"
    assert hook.calls == [["a"], ["a"]]


async def test_a_watcher_leaving_does_not_cancel_the_others() -> None:
    hook = Hook()
    hook.gate = asyncio.Event()
    conversions = EventConversions(hook, "v2")
    item = _event("ADDED", "a", 3)
    leaving = asyncio.ensure_future(conversions.event(item, False))
    staying = asyncio.ensure_future(conversions.event(item, False))
    await asyncio.sleep(0.01)
    leaving.cancel()
    await asyncio.sleep(0.01)
    hook.gate.set()
    assert (await staying).obj["metadata"]["name"] == "a" and leaving.cancelled()
    assert hook.calls == [["a"]]


async def test_bounded_oldest_first() -> None:
    hook = Hook()
    conversions = EventConversions(hook, "v2", size=3)
    for rev in range(10):
        await conversions.event(_event("ADDED", f"o{rev}", rev + 1), False)
    assert len(conversions) == 3
    await conversions.event(_event("ADDED", "o9", 10), False)  # still remembered
    assert len(hook.calls) == 10
    await conversions.event(_event("ADDED", "o0", 1), False)  # dropped: converted again
    assert len(hook.calls) == 11


class _Inner:
    """The cache's watcher for a converting watch: hands out the same prepared items to each."""

    def __init__(self, items: list[Any]) -> None:
        self.cache = None
        self.predicate = None
        self.items = list(items)
        self.closed = False

    async def next_item(self, wait: float | None) -> Any:
        return self.items.pop(0) if self.items else None

    def close(self) -> None:
        self.closed = True


async def test_watchers_share_events_and_leaving_is_the_previous_object() -> None:
    hook = Hook()
    conversions = EventConversions(hook, "v2")
    events = [_event("ADDED", "s", 10, {"tier": "web"}),
              _event("MODIFIED", "s", 11, {"tier": "db"}, {"tier": "web"})]
    web = lambda o: o["metadata"]["labels"].get("tier") == "web"  # noqa: E731
    watchers = [ConvertingWatcher(_Inner(events), hook, web, conversions) for _ in range(8)]  # type: ignore[arg-type]
    firsts = await asyncio.gather(*(w.next_item(0.1) for w in watchers))
    seconds = await asyncio.gather(*(w.next_item(0.1) for w in watchers))
    assert hook.calls == [["s"], ["s", "s"]]  # one per event for the 8 watchers
    added, deleted = firsts[0], seconds[0]
    assert isinstance(added, CacheEvent) and isinstance(deleted, CacheEvent)
    assert added.type == "ADDED" and deleted.type == "DELETED"
    # The previous object's content at the change's resourceVersion, converted.
    assert deleted.obj["metadata"]["labels"] == {"tier": "web"} and deleted.obj["metadata"]["resourceVersion"] == "11"
    assert deleted.obj["apiVersion"] == "g.example.com/v2" and b'"tier":"web"' in deleted.raw
    assert all(isinstance(e, CacheEvent) and e.encoded is deleted.encoded and e.raw is deleted.raw for e in seconds)
    assert events[1].prev is not None and events[1].prev["metadata"]["resourceVersion"] == "10"  # not mutated


@pytest.mark.parametrize("n", [1, 5])
async def test_a_failed_event_ends_every_watch(n: int) -> None:
    hook = Hook()
    hook.fail = True
    conversions = EventConversions(hook, "v2")
    inners = [_Inner([_event("ADDED", "a", 3)]) for _ in range(n)]
    items = await asyncio.gather(*(ConvertingWatcher(i, hook, None, conversions).next_item(0.1)  # type: ignore[arg-type]
                                   for i in inners))
    assert all(isinstance(it, WatchClosed) and it.error is not None for it in items) and all(i.closed for i in inners)
    assert len(hook.calls) == 1
