"""Options the handlers parse from a request and the registry acts on (no HTTP types here)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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


@dataclass
class ListResult:
    """Items as (object, JSON bytes) pairs so a list can be written without re-encoding."""

    items: list[tuple[dict[str, Any], bytes]]
    revision: int
    continue_token: str = ""
    remaining: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
