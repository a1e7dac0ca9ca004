"""Shuffle sharding (k8s.io/apiserver/pkg/util/shufflesharding): a flow's hash deals it a hand of
``handSize`` distinct queues out of ``queues``, so two flows rarely share their whole hand and one
heavy flow cannot fill every queue another flow may use. The hash of a flow is kube's: the first 8
bytes (little-endian) of SHA-256 over the FlowSchema name, a zero byte and the distinguisher.
"""

from __future__ import annotations

import hashlib
import math

#: The hash bits a hand may use (kube's MaxHashBits).
MAX_HASH_BITS = 60


def required_entropy_bits(deck_size: int, hand_size: int) -> int:
    return math.ceil(math.log2(deck_size) * hand_size)


class Dealer:
    """Deals hands of ``hand_size`` distinct cards from a deck of ``deck_size`` (kube's Dealer)."""

    def __init__(self, deck_size: int, hand_size: int) -> None:
        if deck_size <= 0 or hand_size <= 0:
            raise ValueError(f"deckSize {deck_size} or handSize {hand_size} is not positive")
        if hand_size > deck_size:
            raise ValueError(f"handSize {hand_size} is greater than deckSize {deck_size}")
        if deck_size > 1 << 26:
            raise ValueError(f"deckSize {deck_size} is impractically large")
        if required_entropy_bits(deck_size, hand_size) > MAX_HASH_BITS:
            raise ValueError(f"required entropy bits of deckSize {deck_size} and handSize {hand_size} "
                             f"is greater than {MAX_HASH_BITS}")
        self.deck_size = deck_size
        self.hand_size = hand_size

    def deal(self, hash_value: int) -> list[int]:
        """The hand for ``hash_value``: each step takes a remainder by a shrinking deck, then the
        remainders are turned into distinct cards by skipping the ones already dealt."""
        remainders: list[int] = []
        for i in range(self.hand_size):
            hash_value, remainder = divmod(hash_value, self.deck_size - i)
            remainders.append(remainder)
        hand: list[int] = []
        for i, card in enumerate(remainders):
            for j in range(i, 0, -1):
                if card >= remainders[j - 1]:
                    card += 1
            hand.append(card)
        return hand


def hash_flow_id(flow_schema: str, distinguisher: str) -> int:
    digest = hashlib.sha256(flow_schema.encode() + b"\x00" + distinguisher.encode()).digest()
    return int.from_bytes(digest[:8], "little")
