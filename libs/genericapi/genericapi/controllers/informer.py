"""``Informer``: one resource listed and watched into a local cache, with change handlers.

As client-go's shared informer: list, then watch from the list's resourceVersion; a watch that
ends is resumed from the last version seen; a 410 (version too old) relists and reports the
difference (objects gone while away arrive as DELETED), so handlers stay level-triggered.
Handlers run synchronously on the informer's task and must only enqueue work; cached objects
are shared and read-only (copy before changing one). A ``transform`` (client-go's
``SetTransform``) reduces each object before it is cached and handed to handlers: the controllers
run inside core-api, so every object their informers hold counts against the API server's memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from genericapi.apimachinery.errors import APIError
from genericapi.backoff import Backoff

from .authorizing import AuthorizingClient
from .tasks import cancel_and_wait
from .types import ResourceClient, WatchEvent

log = logging.getLogger(__name__)

#: (event type, object, previous object or None) -> None
Handler = Callable[[str, dict[str, Any], dict[str, Any] | None], None]
#: An object as listed or watched -> what the informer keeps of it (must keep metadata's
#: name, namespace and resourceVersion).
Transform = Callable[[dict[str, Any]], dict[str, Any]]
Key = tuple[str, str]


def metadata_only(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as kube's metadata informers hold it: apiVersion, kind and metadata, without
    managedFields (kube-controller-manager trims those from every informer's cache)."""
    meta = obj.get("metadata") or {}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def object_key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class Informer:
    """list + watch one resource into a local cache; relists on 410; calls handlers."""

    def __init__(self, client: ResourceClient, namespace: str = "", transform: Transform | None = None,
                 field_selector: str = "") -> None:
        """``field_selector``: only the objects it selects are listed, watched and kept (a controller
        that reads one object by name needs no copy of every other)."""
        # kube's informers are shared, listing and watching as kube-controller-manager itself.
        if isinstance(client, AuthorizingClient) and client.shared is not None:
            client = client.shared
        self.client = client
        self.namespace = namespace
        self._transform = transform
        self.field_selector = field_selector
        self.resource_version = ""
        self._cache: dict[Key, dict[str, Any]] = {}
        self._handlers: list[Handler] = []
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- handlers and reads -----------------------------------------------------------------
    def add_handler(self, on_event: Handler) -> None:
        """Register a handler; once synced, it is first told of every cached object (ADDED)."""
        self._handlers.append(on_event)
        if self._synced.is_set():
            for obj in list(self._cache.values()):
                self._call(on_event, "ADDED", obj, None)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._cache.get((namespace, name))

    def items(self) -> list[dict[str, Any]]:
        return list(self._cache.values())

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        if self._task is None:
            r = self.client.resource
            self._task = asyncio.create_task(self._run(), name=f"informer:{r.group}/{r.plural}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        self._synced.clear()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    # -- the loop -------------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = Backoff(0.05, 5.0)
        need_list = True
        r = self.client.resource
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                seen = 0
                events = (self.client.watch(self.resource_version, self.namespace, field_selector=self.field_selector)
                          if self.field_selector else self.client.watch(self.resource_version, self.namespace))
                async for event in events:
                    self._apply(event)
                    seen += 1
                    backoff.reset()
                if seen:
                    continue  # the watch ended cleanly: resume from the last version seen
            except asyncio.CancelledError:
                raise
            except APIError as err:
                if err.code == 410:
                    log.info("informer %s/%s: %s; relisting", r.group, r.plural, err.message)
                    need_list = True
                    continue
                log.warning("informer %s/%s: %s", r.group, r.plural, err.message)
            except Exception:
                log.exception("informer %s/%s failed; retrying", r.group, r.plural)
                need_list = need_list or not self.resource_version
            await asyncio.sleep(backoff.next())

    async def _relist(self) -> None:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            page, rv, token = await self.client.list(self.namespace, field_selector=self.field_selector,
                                                     continue_token=token)
            items.extend(page if self._transform is None else map(self._transform, page))
            if not token:
                break
        fresh = {object_key(o): o for o in items}
        old = self._cache
        self._cache = fresh
        self.resource_version = rv
        for key, obj in old.items():
            if key not in fresh:
                self._emit("DELETED", obj, obj)
        for key, obj in fresh.items():
            prev = old.get(key)
            if prev is None:
                self._emit("ADDED", obj, None)
            elif _rv(prev) != _rv(obj):
                self._emit("MODIFIED", obj, prev)
        self._synced.set()

    def _apply(self, event: WatchEvent) -> None:
        obj = event.object
        rv = _rv(obj)
        if event.type == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        if event.type == "ERROR":
            code = obj.get("code")
            raise APIError(int(code) if isinstance(code, int) else 500, str(obj.get("reason") or "InternalError"),
                           str(obj.get("message") or "watch error"))
        if self._transform is not None:
            obj = self._transform(obj)
        key = object_key(obj)
        if rv:
            self.resource_version = rv
        prev = self._cache.get(key)
        if event.type == "DELETED":
            self._cache.pop(key, None)
            self._emit("DELETED", obj, prev)
            return
        self._cache[key] = obj
        self._emit("MODIFIED" if prev is not None else "ADDED", obj, prev)

    def _emit(self, etype: str, obj: dict[str, Any], prev: dict[str, Any] | None) -> None:
        for handler in list(self._handlers):
            self._call(handler, etype, obj, prev)

    def _call(self, handler: Handler, etype: str, obj: dict[str, Any], prev: dict[str, Any] | None) -> None:
        try:
            handler(etype, obj, prev)
        except Exception:
            log.exception("informer handler failed on %s %s", etype, object_key(obj))


def _rv(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
