"""The CRD controller: from CRDs in the watch cache to served custom resources (level-triggered).

It does, in one worker, what apiextensions-apiserver's naming, establishing and finalizing
controllers and its CR handler do: grant names (``NamesAccepted``, ``status.acceptedNames``),
install a store per served version and publish it (routes, discovery, OpenAPI), then mark the
CRD ``Established``. A deleted CRD (``Terminating``) first loses all its custom resources (their
own finalizers honoured), then the cleanup finalizer, then its routes. On start every CRD is
reconciled before the server reports ready, so established CRDs are served after a restart.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery import fields
from genericapi.apimachinery.serviceresolver import ServiceResolver
from genericapi.registry.fieldtracking import Writer
from genericapi.registry.options import DeleteOptions, ListOptions
from genericapi.registry.store import Store
from genericapi.server.apiserver import GenericAPIServer
from genericapi.storage.cacher import CacheEvent, WatchClosed

from . import conditions, crd_serving, naming
from .cr_store import ConvertingStore
from .crds import CLEANUP_FINALIZER, CRDStore

log = logging.getLogger(__name__)

_CLEANUP_TIMEOUT = 60.0
#: kube-apiserver's apiextensions controllers write as kube-apiserver (their user agent's
#: prefix): CRD status (names, Established, Terminating) and the cleanup finalizer's removal.
_STATUS_WRITER = Writer("kube-apiserver", "status")
_WRITER = Writer("kube-apiserver")


class CRDController:
    def __init__(self, server: GenericAPIServer, crds: CRDStore, base_definitions: dict[str, Any],
                 resolver: ServiceResolver | None = None) -> None:
        self.server = server
        self.resolver = resolver
        self.crds = crds
        self.base_definitions = base_definitions
        self.serving: dict[str, tuple[crd_serving.CRDServing, list[Store]]] = {}
        self.terminating: set[str] = set()
        self._dirty: dict[str, None] = {}
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._finalizing: dict[str, asyncio.Task[bool]] = {}

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, _server: GenericAPIServer | None = None) -> None:
        """Serve every CRD whose names are accepted, then follow changes (a post-start hook)."""
        await self.crds.cache.wait_for_revision(await self.crds.client.current_revision())
        for crd in self._all():
            try:
                await self._ensure_serving(crd)
            except Exception:
                log.exception("serving CRD %s at start failed", crd["metadata"].get("name"))
        self._tasks = [asyncio.create_task(self._watch_loop()), asyncio.create_task(self._work_loop())]

    async def stop(self) -> None:
        """Stop reconciling (the server stops the stores it serves)."""
        for task in [*self._tasks, *self._finalizing.values()]:
            task.cancel()
        for built, _stores in self.serving.values():
            if built.converter is not None:
                await built.converter.close()

    def _all(self) -> list[dict[str, Any]]:
        items, _rev = self.crds.cache.list(self.crds.scope_prefix(""))
        return [c.obj for c in items]

    def _get(self, name: str) -> dict[str, Any] | None:
        cached = self.crds.cache.get(self.crds.key("", name))
        return copy.deepcopy(cached.obj) if cached is not None else None

    def enqueue(self, name: str) -> None:
        self._dirty[name] = None
        self._wake.set()

    def _enqueue_group(self, group: str, but: str) -> None:
        for crd in self._all():
            name = crd["metadata"]["name"]
            if name != but and (crd.get("spec") or {}).get("group") == group:
                self.enqueue(name)

    async def _watch_loop(self) -> None:
        while True:
            watcher = await self.crds.cache.watch(None, None)
            try:
                while True:
                    item = await watcher.next_item(None)
                    if isinstance(item, WatchClosed):
                        break
                    if isinstance(item, CacheEvent):
                        name = (item.obj.get("metadata") or {}).get("name", "")
                        self.enqueue(name)
                        if item.type == "DELETED":
                            self._enqueue_group((item.obj.get("spec") or {}).get("group", ""), name)
            finally:
                watcher.close()

    async def _work_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._dirty:
                name = next(iter(self._dirty))
                del self._dirty[name]
                try:
                    await self.reconcile(name)
                except Exception:
                    log.exception("reconciling CRD %s failed; retrying", name)
                    asyncio.get_running_loop().call_later(1.0, self.enqueue, name)

    # -- reconcile ----------------------------------------------------------------------------
    async def reconcile(self, name: str) -> None:
        crd = self._get(name)
        if crd is None:
            await self._uninstall(name)
            return
        if crd["metadata"].get("deletionTimestamp"):
            if CLEANUP_FINALIZER in (crd["metadata"].get("finalizers") or []) and name not in self._finalizing:
                task = asyncio.create_task(self._finalize(name))
                self._finalizing[name] = task
                task.add_done_callback(lambda t: self._finalized(name, t))
            return
        if await self._sync_names(crd):
            return  # the status write comes back through the watch
        if conditions.is_true(crd, "NamesAccepted") or conditions.is_true(crd, "Established"):
            await self._ensure_serving(crd)
            if not conditions.is_true(crd, "Established"):
                conditions.set_condition(crd, "Established", "True", "InitialNamesAccepted",
                                         "the initial names have been accepted")
                await self._write_status(crd)

    async def _sync_names(self, crd: dict[str, Any]) -> bool:
        """Grant names; True when the status was written."""
        spec_names = (crd.get("spec") or {}).get("names") or {}
        accepted = (crd.get("status") or {}).get("acceptedNames") or {}
        if spec_names == accepted and conditions.find(crd, "NamesAccepted") is not None:
            return False
        result = naming.compute_names(crd, self._all())
        nc = result.names_accepted
        if accepted == result.accepted and conditions.equivalent(crd, nc.type, nc.status, nc.reason, nc.message):
            return False
        crd.setdefault("status", {})["acceptedNames"] = result.accepted
        conditions.set_condition(crd, nc.type, nc.status, nc.reason, nc.message)
        est = result.established
        conditions.set_condition(crd, est.type, est.status, est.reason, est.message)
        if await self._write_status(crd):
            self._enqueue_group((crd.get("spec") or {}).get("group", ""), crd["metadata"]["name"])
        return True

    async def _write_status(self, crd: dict[str, Any]) -> bool:
        name = crd["metadata"]["name"]
        try:
            await self.crds.update("", name, crd, subresource="status", writer=_STATUS_WRITER)
            return True
        except apierrors.APIError as err:
            if err.code in (404, 409):
                self.enqueue(name)  # changed or gone meanwhile: look again
                return False
            raise

    # -- serving ------------------------------------------------------------------------------
    async def _ensure_serving(self, crd: dict[str, Any]) -> None:
        name = crd["metadata"]["name"]
        if not (conditions.is_true(crd, "NamesAccepted") or conditions.is_true(crd, "Established")):
            return
        current = self.serving.get(name)
        fp = crd_serving.fingerprint(crd)
        if current is not None and current[0].fingerprint == fp:
            return
        built = crd_serving.build(crd, lambda: name in self.terminating, self.resolver)
        cfg = self.server.config
        prefix = f"{cfg.etcd_prefix.rstrip('/')}/{built.key_prefix}"
        stores: list[Store] = []
        for v in built.versions:
            if built.converter is not None:
                stores.append(ConvertingStore(v.info, v.strategy, self.server.etcd, prefix, self.server.admission,
                                              watch_cache_size=cfg.watch_cache_size, converter=built.converter,
                                              storage_version=built.storage_version))
            else:
                stores.append(Store(v.info, v.strategy, self.server.etcd, prefix, self.server.admission,
                                    watch_cache_size=cfg.watch_cache_size, codec=v.codec))
        for store in stores:
            store.gc_enabled = True  # core-api's garbage collector honours orphan/foreground on custom resources
            self.server.encrypt_store(store)
        await asyncio.gather(*(s.start() for s in stores))
        old = self.serving.get(name)
        self.serving[name] = (built, stores)
        if old is not None:
            for store in old[1]:
                self.server.remove_store(store)
            if (old[0].group, old[0].plural) != (built.group, built.plural):
                fields.unregister_selectable_fields(old[0].group, old[0].plural)
        for v, store in zip(built.versions, stores, strict=True):
            self.server.add_store(store)
            if v.selectable_fields or v.info.version == built.versions[0].info.version:
                fields.register_selectable_fields(built.group, built.plural, v.selectable_fields,
                                                  namespaced=v.info.namespaced)
        self._publish()
        if old is not None:
            await self._stop(old)
        log.info("serving %s (%s)", name, ", ".join(v.info.version for v in built.versions))

    async def _uninstall(self, name: str) -> None:
        self.terminating.discard(name)
        # The CRD is gone: another replica finished its cleanup. A cleanup of ours still running
        # would go on against stores stopped below, so it ends here (nothing is left to do).
        finalizing = self._finalizing.pop(name, None)
        if finalizing is not None:
            finalizing.cancel()
        current = self.serving.pop(name, None)
        if current is None:
            return
        built, stores = current
        for store in stores:
            self.server.remove_store(store)
        if not any((s.group, s.plural) == (built.group, built.plural) for s, _ in self.serving.values()):
            fields.unregister_selectable_fields(built.group, built.plural)
        self._publish()
        await self._stop(current)
        log.info("stopped serving %s", name)

    @staticmethod
    async def _stop(served: tuple[crd_serving.CRDServing, list[Store]]) -> None:
        await asyncio.gather(*(s.stop() for s in served[1]), return_exceptions=True)
        if served[0].converter is not None:
            await served[0].converter.close()

    def _publish(self) -> None:
        definitions = dict(self.base_definitions)
        for built, _stores in self.serving.values():
            definitions.update(built.definitions)
        self.server.set_definitions(definitions)
        self.server.publish()

    # -- deletion -----------------------------------------------------------------------------
    def _finalized(self, name: str, task: asyncio.Task[bool]) -> None:
        """A cleanup attempt ended; unless it finished, look at the CRD again shortly."""
        if self._finalizing.get(name) is task:
            del self._finalizing[name]
        failed = task.cancelled() or task.exception() is not None
        if failed and not task.cancelled():
            log.error("cleaning up CRD %s failed: %s", name, task.exception())
        if failed or not task.result():
            asyncio.get_running_loop().call_later(0.2, self.enqueue, name)

    async def _finalize(self, name: str) -> bool:
        """One pass of kube's finalizing controller; True when done (or nothing left to do)."""
        self.terminating.add(name)
        crd = self._get(name)
        if crd is None:
            return True
        if not conditions.equivalent(crd, "Terminating", "True", "InstanceDeletionInProgress",
                                     "CustomResource deletion is in progress"):
            conditions.set_condition(crd, "Terminating", "True", "InstanceDeletionInProgress",
                                     "CustomResource deletion is in progress")
            if not await self._write_status(crd):
                return False
            crd = self._get(name) or crd
        if conditions.is_true(crd, "Established") and name in self.serving:
            status, reason, message = await self._delete_instances(self.serving[name][1][0])
        else:
            status, reason, message = "False", "NeverEstablished", "resource was never established"
        crd = self._get(name)
        if crd is None:
            return True
        conditions.set_condition(crd, "Terminating", status, reason, message)
        if not await self._write_status(crd) or status == "True":
            return False
        crd = self._get(name)
        if crd is None:
            return True
        crd["metadata"]["finalizers"] = [f for f in crd["metadata"].get("finalizers") or []
                                         if f != CLEANUP_FINALIZER]
        try:
            await self.crds.update("", name, crd, writer=_WRITER)
        except apierrors.APIError as err:
            if err.code not in (404, 409):
                raise
            return err.code == 404
        return True

    async def _delete_instances(self, store: Store) -> tuple[str, str, str]:
        try:
            listed = await store.list("", ListOptions())
        except apierrors.APIError as err:
            return "True", "InstanceDeletionFailed", f"could not list instances: {err.message}"
        namespaces = {(obj.get("metadata") or {}).get("namespace", "") for obj, _raw in listed.items}
        failures: list[str] = []
        for ns in sorted(namespaces):
            try:
                await store.delete_collection(ns, ListOptions(), DeleteOptions())
            except apierrors.APIError as err:
                failures.append(err.message)
        if failures:
            detail = failures[0] if len(failures) == 1 else "[" + ", ".join(failures) + "]"
            return "True", "InstanceDeletionFailed", f"could not issue all deletes: {detail}"
        deadline = time.monotonic() + _CLEANUP_TIMEOUT
        delay = 0.05
        while True:
            remaining = await store.list("", ListOptions())
            if not remaining.items:
                return "False", "InstanceDeletionCompleted", "removed all instances"
            if time.monotonic() > deadline:
                return ("True", "InstanceDeletionCheck",
                        "could not confirm zero CustomResources remaining: timed out waiting for the condition")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
