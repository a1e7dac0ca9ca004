"""The audit annotations of the request being served, for the gateway's one audit event.

kube-apiserver's admission plugins add audit annotations to the request's audit event
(``AddAnnotation`` on admission.Attributes, copied into the event). Here the event is written by
the gateway, hops away from where admission runs, so a backend collects the request's annotations
in this context variable (the shared server layer, ``genericapi.server.auditannotations``, opens
one per request and returns it to the gateway in a response header). Pure: a context variable.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar

#: The annotations of the request being served (None: no request, e.g. a controller's own write).
current: ContextVar[dict[str, str] | None] = ContextVar("audit_annotations", default=None)
#: Its annotations for events at a higher audit level only: key -> (level, value).
leveled: ContextVar[dict[str, tuple[str, str]] | None] = ContextVar("audit_annotations_leveled", default=None)


def add(key: str, value: str) -> None:
    """Record one annotation (the first value for a key wins, as kube's AddAnnotation)."""
    found = current.get()
    if found is not None:
        found.setdefault(key, value)


def add_all(annotations: Mapping[str, str]) -> None:
    found = current.get()
    if found is not None:
        for key, value in annotations.items():
            found.setdefault(key, value)


def add_all_leveled(annotations: Mapping[str, tuple[str, str]]) -> None:
    """Record annotations that only events at their level or above show (first value wins)."""
    found = leveled.get()
    if found is not None:
        for key, entry in annotations.items():
            found.setdefault(key, entry)
