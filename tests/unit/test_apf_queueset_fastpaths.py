"""QueueSet's per-request shortcuts agree with what they replace (issue 12/13's APF cost per request).

``_shuffle_shard`` keeps each flow's dealt hand and, when nothing waits anywhere, takes the first
queue of the hand it looks at; ``_virtual_time_ratio`` counts the active queues' seats from the set's
totals instead of summing the queues. Through a random mix of starts, waits, time-outs, finishes and
reconfigurations, each answer is checked against the full computation (kube's: a fresh deal and a
scan of the hand for the least waiting work; the sum over the active queues).
"""

from __future__ import annotations

import asyncio
import random

from aggregator.flowcontrol.queueset import QueueSet, QueuingConfig, Rejected, Request


def _reference_ratio(qs: QueueSet) -> float:
    active = len(qs._active)
    if active == 0:
        return 0.0
    requested = sum(q.seats_in_use + q.seats_waiting for q in qs._active)
    return min(float(requested), float(qs.concurrency_limit)) / active


def _reference_queue(qs: QueueSet, hash_value: int, enqueues: int) -> int:
    assert qs.dealer is not None
    hand = qs.dealer.deal(hash_value)
    offset = enqueues % len(hand)
    best, best_work = -1, float("inf")
    for i in range(len(hand)):
        queue = qs.queues[hand[(offset + i) % len(hand)]]
        if queue.waiting_work < best_work:
            best, best_work = queue.index, queue.waiting_work
    return best


def test_shortcuts_agree_with_full_computation() -> None:
    async def run() -> None:
        rng = random.Random(7)
        qs = QueueSet(QueuingConfig("pl", 16, 4, 50), 5)
        held: list[Request] = []
        waiting: list[asyncio.Task[None]] = []
        checked_busy = checked_idle = 0
        for step in range(3000):
            assert qs._virtual_time_ratio() == _reference_ratio(qs)
            op = rng.random()
            if op < 0.5:
                hash_value = rng.choice((1, 2, 3, 12345678901, rng.getrandbits(60)))
                want = _reference_queue(qs, hash_value, qs._enqueues)
                if qs.seats_waiting:
                    checked_busy += 1
                else:
                    checked_idle += 1
                try:
                    req = qs.start(hash_value, rng.choice((1, 1, 2)), "fs", "d", None)
                except Rejected:
                    continue
                assert req.queue is not None and req.queue.index == want
                if req.future is None:
                    held.append(req)
                else:
                    async def wait(r: Request = req) -> None:
                        try:
                            await qs.wait(r, rng.choice((0.0005, 5.0)))
                        except Rejected:
                            return
                        held.append(r)
                    waiting.append(asyncio.create_task(wait()))
            elif op < 0.9 and held:
                qs.finish(held.pop(rng.randrange(len(held))))
            elif op < 0.92:
                qs.reconfigure(QueuingConfig("pl", rng.choice((16, 20)), rng.choice((3, 4)), 50), rng.choice((3, 5)))
            await asyncio.sleep(0.0002 if step % 50 == 0 else 0)
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        assert checked_busy > 100 and checked_idle > 100, (checked_busy, checked_idle)

    asyncio.run(run())


def test_queueless_seats_are_not_counted_as_queued() -> None:
    """A Reject level's requests (no queues) then queues added: only the queues' seats count."""
    async def run() -> None:
        qs = QueueSet(QueuingConfig("pl", 0), 4)
        queueless = [qs.start(0, 1, "fs", "", None) for _ in range(2)]
        qs.reconfigure(QueuingConfig("pl", 8, 2, 10), 4)
        queued = qs.start(99, 1, "fs", "d", None)
        assert qs._virtual_time_ratio() == _reference_ratio(qs) == 1.0
        for r in queueless:
            qs.finish(r)
        assert qs._virtual_time_ratio() == _reference_ratio(qs) == 1.0
        qs.finish(queued)
        assert qs._virtual_time_ratio() == _reference_ratio(qs) == 0.0

    asyncio.run(run())
