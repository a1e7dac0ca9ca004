"""``ClientSet``: every resource the chain serves, as ``ResourceClient``s for controllers.

This process's own stores are reached directly (``LocalClient``); what the delegate link serves
(custom resources of extensions-api, and whatever it delegates to) is found through the
delegate's discovery and reached over HTTP (``HTTPClient``). Aggregated discovery (one request)
is asked for first; a delegate that answers with the legacy group list is walked group by group.
``refresh`` re-reads the delegate's discovery; ``start`` polls it and calls ``on_change``
callbacks when the served set changes (a CRD established or removed).
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.authorization import Authorizer
from genericapi.apimachinery.user import UserInfo
from genericapi.registry.store import Store

from .authorizing import AuthorizingClient
from .http import HTTPClient
from .local import LocalClient, resource_of
from .tasks import cancel_and_wait
from .transport import Transport
from .types import (
    CONTROLLER_MANAGER,
    CONTROLLER_USER,
    CONTROLLER_USER_AGENT,
    APIResource,
    ResourceClient,
    controller_user,
)

log = logging.getLogger(__name__)

AGGREGATED_DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
_ACCEPT = AGGREGATED_DISCOVERY + ",application/json"
_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key putting kube's preferred version first: GA > beta > alpha, higher numbers first."""
    m = _VERSION.match(version)
    if m is None:
        return (3, 0, 0, version)
    major, level, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[level]
    return (rank, -major, -minor, "")


def resources_from_aggregated(doc: dict[str, Any]) -> list[APIResource]:
    """Resources of an ``apidiscovery.k8s.io/v2`` APIGroupDiscoveryList (preferred versions first)."""
    out: list[APIResource] = []
    for group in doc.get("items") or []:
        name = str((group.get("metadata") or {}).get("name") or "")
        for ver in group.get("versions") or []:
            version = str(ver.get("version") or "")
            for res in ver.get("resources") or []:
                kind = str((res.get("responseKind") or {}).get("kind") or "")
                subs = frozenset(str(s.get("subresource")) for s in res.get("subresources") or [])
                out.append(APIResource(name, version, str(res.get("resource") or ""), kind,
                                       res.get("scope") == "Namespaced", frozenset(res.get("verbs") or ()),
                                       subs))
    return out


def resources_from_list(group: str, version: str, doc: dict[str, Any]) -> list[APIResource]:
    """Resources of a legacy APIResourceList (``/apis/<group>/<version>``)."""
    main: dict[str, dict[str, Any]] = {}
    subs: dict[str, set[str]] = {}
    for res in doc.get("resources") or []:
        name = str(res.get("name") or "")
        if "/" in name:
            parent, sub = name.split("/", 1)
            subs.setdefault(parent, set()).add(sub)
        else:
            main[name] = res
    return [APIResource(group, version, name, str(res.get("kind") or ""), bool(res.get("namespaced")),
                        frozenset(res.get("verbs") or ()), frozenset(subs.get(name, ())))
            for name, res in main.items()]


class ClientSet:
    """Every resource the chain serves; local stores first, then the delegate's."""

    def __init__(self, stores: Iterable[Store] = (), delegate_urls: Sequence[str] = (), *,
                 ssl_context: ssl.SSLContext | None = None, user: UserInfo = CONTROLLER_USER,
                 manager: str | None = CONTROLLER_MANAGER, user_agent: str = CONTROLLER_USER_AGENT,
                 authorizer: Authorizer | None = None) -> None:
        """``manager``: the field manager of the controllers' writes (kube-controller-manager's,
        as kube derives it from that process's user agent; ``user_agent`` says the same to the
        delegate). ``authorizer``: asked before every call (``AuthorizingClient``), as the API
        server authorizes kube-controller-manager's requests; None trusts every call."""
        self.user = user
        self.authorizer = authorizer
        self._manager = manager
        self._users: dict[str, ControllerClientSet] = {}
        self._local: dict[tuple[str, str, str], LocalClient] = {}
        for store in stores:
            client = LocalClient(store, user, manager)
            r = client.resource
            self._local[(r.group, r.plural, r.version)] = client
        self.transport = Transport(delegate_urls, ssl_context, user, user_agent) if delegate_urls else None
        self._remote: dict[tuple[str, str, str], APIResource] = {}
        self._remote_clients: dict[tuple[str, str, str], HTTPClient] = {}
        self._callbacks: list[Callable[[], Awaitable[None]]] = []
        self._poller: asyncio.Task[None] | None = None
        #: One refresh at a time: the poller and controllers that refresh before acting (the
        #: namespace deleter) must not run the change callbacks concurrently.
        self._refresh_lock = asyncio.Lock()

    # -- the served set ------------------------------------------------------------------------
    def resources(self) -> list[APIResource]:
        """One entry per (group, plural): its preferred version (local stores win)."""
        best: dict[tuple[str, str], APIResource] = {}
        for (group, plural, _v), client in sorted(self._local.items(), key=lambda kv: version_priority(kv[0][2])):
            best.setdefault((group, plural), client.resource)
        for (group, plural, _v), res in self._remote.items():  # in the delegate's preference order
            best.setdefault((group, plural), res)
        return list(best.values())

    @property
    def shared(self) -> ClientSet:
        """The clients of kube-controller-manager's own user (its shared informers' reads)."""
        return self

    def for_controller(self, name: str) -> ClientSet:
        """The clients one controller loop uses: its calls act as (and are authorized for) its
        service account ``system:serviceaccount:kube-system:<name>``, its informers read as this
        set's user (kube's shared informers); discovery is this set's."""
        view = self._users.get(name)
        if view is None:
            view = self._users[name] = ControllerClientSet(self, controller_user(name))
        return view

    def _authorized(self, inner: ResourceClient, user: UserInfo, shared: ResourceClient | None) -> ResourceClient:
        if self.authorizer is None:
            return inner
        return AuthorizingClient(inner, user, self.authorizer, shared)

    def client(self, group: str, plural: str, version: str = "") -> ResourceClient:
        """The client of a resource (its preferred version unless ``version``); 404 when not served."""
        return self._authorized(self._raw_client(group, plural, version), self.user, None)

    def _raw_client(self, group: str, plural: str, version: str = "") -> ResourceClient:
        if version:
            local = self._local.get((group, plural, version))
            if local is not None:
                return local
            key = (group, plural, version)
            if key in self._remote:
                return self._http(key)
        else:
            for res in self.resources():
                if res.group == group and res.plural == plural:
                    return self._raw_client(group, plural, res.version)
        raise apierrors.not_found(group, plural, "")

    def _http(self, key: tuple[str, str, str]) -> HTTPClient:
        client = self._remote_clients.get(key)
        if client is None or client.resource != self._remote[key]:
            assert self.transport is not None
            client = self._remote_clients[key] = HTTPClient(self.transport, self._remote[key])
        return client

    # -- discovery of the delegate -------------------------------------------------------------
    async def refresh(self) -> bool:
        """Re-read the delegate's discovery; True when the served set changed (callbacks ran)."""
        if self.transport is None:
            return False
        async with self._refresh_lock:
            found = await self._discover()
            remote = {(r.group, r.plural, r.version): r for r in found if r.group or r.version}
            if remote == self._remote and list(remote) == list(self._remote):
                return False
            self._remote = remote
            for callback in list(self._callbacks):
                try:
                    await callback()
                except Exception:
                    log.exception("discovery change callback failed")
            return True

    async def _discover(self) -> list[APIResource]:
        assert self.transport is not None
        _s, ctype, doc = await self.transport.request("GET", "/apis", accept=_ACCEPT)
        if not isinstance(doc, dict):
            return []
        if "apidiscovery.k8s.io" in ctype or doc.get("kind") == "APIGroupDiscoveryList":
            return resources_from_aggregated(doc)
        out: list[APIResource] = []
        for group in doc.get("groups") or []:
            name = str(group.get("name") or "")
            preferred = str((group.get("preferredVersion") or {}).get("version") or "")
            versions = [str(v.get("version") or "") for v in group.get("versions") or []]
            versions.sort(key=lambda v: (v != preferred, version_priority(v)))
            for version in versions:
                try:
                    _s, _t, listed = await self.transport.request("GET", f"/apis/{name}/{version}")
                except apierrors.APIError as err:
                    if err.code == 404:
                        continue  # removed between the two requests
                    raise
                if isinstance(listed, dict):
                    out.extend(resources_from_list(name, version, listed))
        return out

    def on_change(self, callback: Callable[[], Awaitable[None]]) -> None:
        self._callbacks.append(callback)

    async def start(self, interval: float = 5.0) -> None:
        """Read the delegate's discovery in the background: at once, then every ``interval`` seconds."""
        if self.transport is None or self._poller is not None:
            return
        self._poller = asyncio.create_task(self._poll(interval), name="clientset-discovery")

    async def _poll(self, interval: float) -> None:
        while True:
            try:
                await self.refresh()
            except apierrors.APIError as err:
                log.debug("delegate discovery failed: %s", err.message)
            except Exception:
                log.exception("delegate discovery failed")
            await asyncio.sleep(interval)

    async def close(self) -> None:
        poller, self._poller = self._poller, None
        await cancel_and_wait(poller)
        if self.transport is not None:
            await self.transport.close()


class ControllerClientSet(ClientSet):
    """``ClientSet.for_controller``: the parent's stores, link and discovery, another user."""

    def __init__(self, parent: ClientSet, user: UserInfo) -> None:
        super().__init__((), (), user=user, manager=parent._manager, authorizer=parent.authorizer)
        self.parent = parent
        self._local = {key: LocalClient(c.store, user, parent._manager) for key, c in parent._local.items()}
        self.transport = parent.transport.for_user(user) if parent.transport is not None else None

    @property
    def shared(self) -> ClientSet:
        return self.parent

    def resources(self) -> list[APIResource]:
        return self.parent.resources()

    def client(self, group: str, plural: str, version: str = "") -> ResourceClient:
        self._remote = self.parent._remote  # the parent's discovery, as it is now
        inner = self._raw_client(group, plural, version)
        return self._authorized(inner, self.user, self.parent.client(group, plural, inner.resource.version))

    def for_controller(self, name: str) -> ClientSet:
        return self.parent.for_controller(name)

    async def refresh(self) -> bool:
        return await self.parent.refresh()

    def on_change(self, callback: Callable[[], Awaitable[None]]) -> None:
        self.parent.on_change(callback)

    async def start(self, interval: float = 5.0) -> None:
        await self.parent.start(interval)

    async def close(self) -> None:
        """Nothing of its own: the sessions are the parent's."""


__all__ = ["AGGREGATED_DISCOVERY", "ClientSet", "ControllerClientSet", "resource_of", "resources_from_aggregated",
           "resources_from_list", "version_priority"]
