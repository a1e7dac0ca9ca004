"""Connect subresources (kube's ``rest.Connecter``): ``pods/exec``, ``pods/log``, ``*/proxy``.

They hold no objects: a request is handed to a connector that resolves where it should go (a
kubelet, a pod, a service endpoint) and answers, usually with an error when nothing is there
to reach. The types here are plain data so stores and connectors stay free of any web
framework; ``genericapi.handlers.connect`` turns them into HTTP. Connectors are kept beside a
store (not on it) so the generic ``Store`` needs no knowledge of them.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from .store import Store

#: HTTP methods a proxy subresource passes on (kube registers these for ``*/proxy``).
PROXY_METHODS: frozenset[str] = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: ``exec``, ``attach`` and ``portforward``: GET and POST (both start a stream).
STREAM_METHODS: frozenset[str] = frozenset({"GET", "POST"})
#: ``pods/log``: a getter with options, GET only.
GET_ONLY: frozenset[str] = frozenset({"GET"})


@dataclass(frozen=True, slots=True)
class ConnectRequest:
    """One request to a connect subresource; ``path`` is what follows ``/proxy`` (may be empty)."""

    namespace: str
    name: str
    method: str
    path: str
    query: list[tuple[str, str]]
    headers: list[tuple[str, str]]
    body: bytes
    #: The request's own path (for the trailing-slash redirect of an empty proxy path).
    request_path: str = ""
    raw_query: str = ""


@dataclass(slots=True)
class ConnectResponse:
    """What a connector answers: status, headers and a body (bytes or a stream of chunks)."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes | AsyncIterator[bytes] = b""


Connector = Callable[[ConnectRequest], Awaitable[ConnectResponse]]


@dataclass(frozen=True, slots=True)
class ConnectSpec:
    """A connector and how it is routed: the methods it takes and whether a sub-path follows."""

    connector: Connector
    methods: frozenset[str]
    subpath: bool = False


_CONNECTORS: weakref.WeakKeyDictionary[Store, dict[str, ConnectSpec]] = weakref.WeakKeyDictionary()


def install(store: Store, subresource: str, spec: ConnectSpec) -> None:
    """Serve ``subresource`` of ``store``'s objects through ``spec``."""
    _CONNECTORS.setdefault(store, {})[subresource] = spec


def connector_for(store: Store, subresource: str) -> ConnectSpec | None:
    """The connector serving ``subresource`` of ``store``, if one was installed."""
    table = _CONNECTORS.get(store)
    return table.get(subresource) if table else None
