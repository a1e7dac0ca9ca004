"""Seats per priority level, as kube 1.33's APF config controller computes them.

The server's concurrency limit (``--max-requests-inflight`` + ``--max-mutating-requests-inflight``)
is split by nominalConcurrencyShares: ``NominalCL = ceil(ServerCL * NCS / sum NCS)``. A limited
level may lend ``round(NominalCL * lendablePercent / 100)`` seats and borrow up to
``round(NominalCL * borrowingLimitPercent / 100)`` (unbounded, i.e. ServerCL, when unset), so its
current limit moves between ``MinCL = NominalCL - lendable`` and ``MaxCL = NominalCL + borrowing``.
Every adjustment period the current limits are re-divided by seat demand (``allocate``): each level
gets ``clamp(p * target, lower, upper)`` with one fair proportion ``p`` chosen so the limits sum to
the nominal total (kube's computeConcurrencyAllocation; found here by bisection).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: A level's seats a single request may take at most: max(1, min(ceil(0.15 NominalCL), NominalCL/handSize)).
MAX_SEATS_PERCENT = 0.15
#: Targets below this are raised to it (kube's MinTarget).
MIN_TARGET = 0.001


@dataclass(frozen=True)
class Limits:
    nominal: int
    lower: int  # MinCL: nominal minus what it lends
    upper: int  # MaxCL: nominal plus what it may borrow

    @property
    def initial(self) -> int:
        """The current limit a new level starts with (kube: NominalCL - LendableCL/2)."""
        lendable = self.nominal - self.lower
        return self.nominal - lendable // 2


def shares_of(spec: dict[str, Any]) -> tuple[int, int | None, int | None]:
    """(nominalConcurrencyShares, lendablePercent, borrowingLimitPercent) of a level's spec."""
    section = spec.get("limited") if spec.get("type") == "Limited" else spec.get("exempt")
    section = section or {}
    shares = section.get("nominalConcurrencyShares")
    borrowing = section.get("borrowingLimitPercent") if spec.get("type") == "Limited" else None
    return int(shares or 0), section.get("lendablePercent"), borrowing


def nominal_limits(server_limit: int, specs: dict[str, dict[str, Any]]) -> dict[str, Limits]:
    """Each level's nominal, lower and upper seats (kube's finishQueueSetReconfigsLocked)."""
    share_sum = float(sum(shares_of(s)[0] for s in specs.values()))
    out: dict[str, Limits] = {}
    for name, spec in specs.items():
        shares, lendable_pct, borrowing_pct = shares_of(spec)
        nominal = math.ceil(server_limit * shares / share_sum) if share_sum > 0 else 0
        lendable = go_round(nominal * lendable_pct / 100) if lendable_pct is not None else 0
        borrowing = go_round(nominal * borrowing_pct / 100) if borrowing_pct is not None else server_limit
        out[name] = Limits(nominal, nominal - lendable, nominal + borrowing)
    return out


def max_seats(nominal: int, hand_size: int) -> int:
    """The most seats one request may occupy at a queuing level (kube's MaxSeatsTracker value)."""
    return int(max(1, min(math.ceil(nominal * MAX_SEATS_PERCENT), nominal // max(hand_size, 1))))


@dataclass(frozen=True)
class Item:
    target: float
    lower: float
    upper: float


def allocate(required: int, items: list[Item]) -> tuple[list[float], float]:
    """Limits summing to ``required``, each ``clamp(p * target, lower, upper)``; returns them and p.

    ``required`` must lie between the sums of the lower and the upper bounds (else the bounds win)."""
    if not items:
        return [], 0.0
    targets = [max(i.target, MIN_TARGET) for i in items]
    low = sum(i.lower for i in items)
    high = sum(i.upper for i in items)
    if required <= low:
        return [i.lower for i in items], min(i.lower / t for i, t in zip(items, targets, strict=True))
    if required >= high:
        return [i.upper for i in items], max(i.upper / t for i, t in zip(items, targets, strict=True))

    def total(p: float) -> float:
        return sum(min(i.upper, max(i.lower, p * t)) for i, t in zip(items, targets, strict=True))

    lo, hi = 0.0, max(i.upper / t for i, t in zip(items, targets, strict=True))
    for _ in range(100):
        mid = (lo + hi) / 2
        if total(mid) < required:
            lo = mid
        else:
            hi = mid
    p = (lo + hi) / 2
    return [min(i.upper, max(i.lower, p * t)) for i, t in zip(items, targets, strict=True)], p


def go_round(x: float) -> int:
    """Go's math.Round: half away from zero (Python's round is half to even)."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)
