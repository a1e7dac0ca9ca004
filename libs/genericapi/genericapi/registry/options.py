"""Options the handlers parse from a request and the registry acts on (no HTTP types here)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Predicate = Callable[[dict[str, Any]], bool]


@dataclass
class ListOptions:
    predicate: Predicate | None = None
    #: True when a label or field selector is present (remainingItemCount is then omitted).
    filtered: bool = False
    resource_version: str = ""
    resource_version_match: str = ""
    limit: int = 0
    continue_token: str = ""
    allow_bookmarks: bool = False
    send_initial_events: bool | None = None
    timeout_seconds: int | None = None


@dataclass
class DeleteOptions:
    precondition_uid: str | None = None
    precondition_rv: str | None = None
    propagation_policy: str | None = None
    grace_period_seconds: int | None = None
    dry_run: bool = False
    orphan_dependents: bool | None = None


class ListEntry(Protocol):
    """An item the watch cache listed: its JSON, and the object decoded only when asked."""

    @property
    def raw(self) -> bytes: ...

    def decode(self) -> dict[str, Any]: ...


class ListResult:
    """Items as (object, JSON bytes) pairs so a list can be written without re-encoding.

    A list served from the watch cache holds the cache's entries: ``raws`` is their JSON as kept,
    and ``items`` decodes the objects (each a new copy) the first time someone asks for them, so a
    plain JSON LIST never decodes what it sends."""

    __slots__ = ("_entries", "_items", "continue_token", "extra", "remaining", "revision")

    def __init__(self, items: list[tuple[dict[str, Any], bytes]] | None, revision: int, continue_token: str = "",
                 remaining: int | None = None, extra: dict[str, Any] | None = None, *,
                 entries: Sequence[ListEntry] | None = None) -> None:
        self._items = items
        self._entries = entries
        self.revision = revision
        self.continue_token = continue_token
        self.remaining = remaining
        self.extra: dict[str, Any] = extra if extra is not None else {}

    @property
    def items(self) -> list[tuple[dict[str, Any], bytes]]:
        items = self._items
        if items is None:
            items = self._items = [(e.decode(), e.raw) for e in self._entries or ()]
            self._entries = None
        return items

    @items.setter
    def items(self, value: list[tuple[dict[str, Any], bytes]]) -> None:
        self._items, self._entries = value, None

    @property
    def count(self) -> int:
        """How many items, without decoding any."""
        return len(self._items) if self._items is not None else len(self._entries or ())

    def object_batches(self, size: int) -> Iterator[list[dict[str, Any]]]:
        """The objects ``size`` at a time, each batch decoded only when reached and kept by no one
        here: a Table or metadata LIST of 20,000 cached objects decoded whole held 5x its answer's
        size (test_list_memory)."""
        items, entries = self._items, self._entries or ()
        total = self.count
        for start in range(0, total, size):
            if items is not None:
                yield [obj for obj, _raw in items[start:start + size]]
            else:
                yield [entry.decode() for entry in entries[start:start + size]]

    @property
    def raws(self) -> list[bytes]:
        """Each item's JSON, without decoding what is not decoded yet."""
        if self._items is None:
            return [e.raw for e in self._entries or ()]
        return [raw for _obj, raw in self._items]
