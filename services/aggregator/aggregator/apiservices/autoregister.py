"""The auto-registration controller: a local APIService for every built-in and CRD group-version.

kube-apiserver registers, through kube-aggregator's autoregister controller, one local APIService
per group-version its delegates serve: built-ins (label ``kube-aggregator.kubernetes.io/automanaged:
onstart``, priorities from kube's table; a group-version missing from the table is skipped, as
kube does) and every served version of every CRD (label ``true``, priority 1000/100, deleted
when the CRD or the version goes). An APIService without the label belongs to its user and is
never touched; ``onstart`` ones are created and updated but not deleted (a delegate that is down
for a moment must not take built-in groups out of discovery).

The built-in group-versions come from the gateway's routing table (what the chain members
publish in discovery); CRDs are followed with an informer over the chain. Runs on the leader only.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.apipriorities import CRD_PRIORITY, GROUP_PRIORITIES, GroupVersion
from genericapi.controllers import Controller, Informer, ResourceClient

from .types import (
    AUTOMANAGED_ALWAYS,
    AUTOMANAGED_LABEL,
    AUTOMANAGED_ONSTART,
    GROUP,
    KIND,
    VERSION,
    api_service_name,
    name_of,
)

log = logging.getLogger(__name__)

#: group-versions the chain members serve, as the gateway last learned them
BuiltinSource = Callable[[], Iterable[GroupVersion]]


def crd_group_versions(crd: dict[str, Any]) -> list[GroupVersion]:
    """The served group-versions of a CRD."""
    spec = crd.get("spec") or {}
    group = str(spec.get("group") or "")
    return [(group, str(v.get("name") or "")) for v in spec.get("versions") or []
            if isinstance(v, dict) and v.get("served") is True and v.get("name")]


def desired_apiservices(builtins: Iterable[GroupVersion],
                        crds: Iterable[dict[str, Any]]) -> dict[str, tuple[dict[str, Any], str]]:
    """APIService name -> (spec, automanaged label) that should exist."""
    out: dict[str, tuple[dict[str, Any], str]] = {}
    claimed: set[GroupVersion] = set()
    for crd in crds:
        for group, version in crd_group_versions(crd):
            claimed.add((group, version))
            out[api_service_name(group, version)] = (_spec(group, version, CRD_PRIORITY), AUTOMANAGED_ALWAYS)
    for gv in builtins:
        priority = GROUP_PRIORITIES.get(gv)
        if priority is None or gv in claimed:
            continue
        out[api_service_name(*gv)] = (_spec(gv[0], gv[1], priority), AUTOMANAGED_ONSTART)
    return out


def _spec(group: str, version: str, priority: tuple[int, int]) -> dict[str, Any]:
    return {"service": None, "group": group, "version": version, "groupPriorityMinimum": priority[0],
            "versionPriority": priority[1]}


def _label(obj: dict[str, Any]) -> str:
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(AUTOMANAGED_LABEL) or "")


#: For this long after the controller starts, the members' group-versions are looked at every
#: STARTING_INTERVAL seconds instead of ``interval``.
STARTING_SECONDS = 30.0
STARTING_INTERVAL = 0.05

class AutoRegisterController(Controller):
    name = "apiservice-autoregister"

    def __init__(self, client: ResourceClient, apiservices: Informer, crds: Informer,
                 builtins: BuiltinSource, interval: float = 2.0) -> None:
        super().__init__()
        self.client = client
        self.apiservices = apiservices
        self.crds = crds
        self.builtins = builtins
        self.interval = interval
        self.informers = [crds]  # the APIService informer is shared and runs on every replica
        self._running = False
        self._known_builtins: frozenset[GroupVersion] = frozenset()
        apiservices.add_handler(lambda _t, obj, _p: self._enqueue(name_of(obj)))
        crds.add_handler(self._crd_changed)

    def _enqueue(self, name: str) -> None:
        if self._running and name:
            self.queue.add(name)

    def _crd_changed(self, _etype: str, obj: dict[str, Any], prev: dict[str, Any] | None) -> None:
        for gv in {*crd_group_versions(obj), *(crd_group_versions(prev) if prev else [])}:
            self._enqueue(api_service_name(*gv))

    def desired(self) -> dict[str, tuple[dict[str, Any], str]]:
        return desired_apiservices(self._known_builtins, self.crds.items())

    async def on_synced(self) -> None:
        await self.apiservices.wait_synced()
        self._running = True
        self._known_builtins = frozenset(self.builtins())
        for name in {*self.desired(), *(name_of(o) for o in self.apiservices.items() if _label(o))}:
            self._enqueue(name)

    async def run(self, workers: int = 1) -> None:
        watcher = asyncio.create_task(self._watch_builtins())
        try:
            await super().run(workers)
        finally:
            self._running = False
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _watch_builtins(self) -> None:
        """The members' group-versions live in the gateway's memory: look at them now and then
        (often while the chain starts: readiness waits on these APIServices; issue 15's cold start
        lost up to ``interval`` here). Reading them is a set over a few dozen pairs."""
        loop = asyncio.get_running_loop()
        starting_until = loop.time() + STARTING_SECONDS
        while True:
            await asyncio.sleep(STARTING_INTERVAL if loop.time() < starting_until else self.interval)
            current = frozenset(self.builtins())
            if current != self._known_builtins:
                changed = current ^ self._known_builtins
                self._known_builtins = current
                for gv in changed:
                    self._enqueue(api_service_name(*gv))

    async def reconcile(self, key: Hashable) -> None:
        name = str(key)
        want = self.desired().get(name)
        current = self.apiservices.get("", name)
        if current is None:
            if want is None:
                return
            spec, label = want
            obj = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
                   "metadata": {"name": name, "labels": {AUTOMANAGED_LABEL: label}}, "spec": spec}
            try:
                await self.client.create("", obj)
                log.info("registered APIService %s (%s)", name, label)
            except apierrors.APIError as err:
                if err.code != 409:
                    raise
            return
        label = _label(current)
        if not label:
            return  # the user's own APIService
        if want is None:
            if label == AUTOMANAGED_ALWAYS:
                try:
                    await self.client.delete("", name, uid=(current.get("metadata") or {}).get("uid"))
                    log.info("removed APIService %s", name)
                except apierrors.APIError as err:
                    if err.code not in (404, 409):
                        raise
            return
        spec, want_label = want
        have = current.get("spec") or {}
        if all(have.get(k) == v for k, v in spec.items()) and label == want_label \
                and not have.get("caBundle") and not have.get("insecureSkipTLSVerify"):
            return
        updated = copy.deepcopy(current)
        updated["spec"] = dict(spec)
        updated["metadata"].setdefault("labels", {})[AUTOMANAGED_LABEL] = want_label
        await self.client.update("", name, updated)
