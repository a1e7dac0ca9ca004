"""kube-apiserver's ``priority-and-fairness-config-producer`` post-start hook: APF's
mandatory and suggested configuration objects, kept as kube keeps them, and FlowSchemas' ``Dangling``
condition.

Priority levels first, then FlowSchemas (kube's order). A missing object is created. A mandatory one
is always brought back to its fixed spec (the ``exempt`` level keeps a user's ``spec.exempt``) with
``apf.kubernetes.io/autoupdate-spec: "true"``. A suggested one is updated only while its annotation
says ``true`` (no or a bad annotation: auto-update only if it was never edited, ``generation`` 1; the
annotation is then written down); an object with the annotation ``true`` that is no longer in kube's
list is deleted. Every core-api replica runs it at start, before it reports ready, and again after
any change to either kind (kube re-runs it every minute; here a deleted mandatory object comes back
at once), retrying conflicts with another replica from a fresh read.

The same pass keeps each FlowSchema's ``Dangling`` condition (``Found``/``NotFound``, kube's message),
which kube's config consumer writes from every apiserver.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Callable
from typing import Any

from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.flowcontrol import bootstrap
from genericapi.controllers import LocalClient
from genericapi.registry.meta import now_rfc3339
from genericapi.registry.store import Store
from genericapi.server.apiserver import GenericAPIServer

from .defaults import groups as defaulting
from .posthooks import HookGroup

log = logging.getLogger(__name__)

#: kube 1.33's name (pkg/registry/flowcontrol/rest PostStartHookName; older releases said
#: apiserver/bootstrap-system-flowcontrol-configuration).
HOOK_NAME = "priority-and-fairness-config-producer"
TRIES = 10
Obj = dict[str, Any]


def _normal(kind: str, obj: Obj) -> Obj:
    """The object's spec as stored (defaulted), for comparing with what is stored."""
    obj = copy.deepcopy(obj)
    (defaulting.flow_schema if kind == "FlowSchema" else defaulting.priority_level_configuration)(obj)
    return dict(obj.get("spec") or {})


def _autoupdate(obj: Obj) -> bool | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(bootstrap.AUTOUPDATE_ANNOTATION)
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if value in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    return None


def _wanted(kind: str, current: Obj, expected: Obj, mandatory: bool) -> Obj | None:
    """The update that brings ``current`` where kube's ensurer would, or None."""
    annotated = _autoupdate(current)
    if mandatory:
        update_spec = True
    elif annotated is not None:
        update_spec = annotated
    else:
        update_spec = int((current.get("metadata") or {}).get("generation") or 0) == 1
    want_spec = _normal(kind, expected)
    if kind == "PriorityLevelConfiguration" and expected["metadata"]["name"] == bootstrap.EXEMPT \
            and isinstance((current.get("spec") or {}).get("exempt"), dict):
        want_spec["exempt"] = current["spec"]["exempt"]  # the one part of a mandatory spec users may set
    spec_differs = update_spec and (current.get("spec") or {}) != want_spec
    annotation = "true" if update_spec else "false"
    annotation_differs = (current.get("metadata") or {}).get("annotations", {}).get(
        bootstrap.AUTOUPDATE_ANNOTATION) != annotation
    if not spec_differs and not annotation_differs:
        return None
    fixed = copy.deepcopy(current)
    meta = fixed.setdefault("metadata", {})
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict):
        annotations = meta["annotations"] = {}
    annotations[bootstrap.AUTOUPDATE_ANNOTATION] = annotation
    if spec_differs:
        fixed["spec"] = want_spec
    return fixed


async def _ensure(client: LocalClient, kind: str, expected: Obj, current: Obj | None, mandatory: bool) -> str:
    name = expected["metadata"]["name"]
    for _ in range(TRIES):
        try:
            if current is None:
                await client.create("", expected)
                return "created"
            fixed = _wanted(kind, current, expected, mandatory)
            if fixed is None:
                return ""
            await client.update("", name, fixed)
            return "updated"
        except APIError as err:
            if err.code not in (404, 409):
                raise
        try:  # another replica wrote it meanwhile: look again
            current = await client.get("", name)
        except APIError as err:
            if err.code != 404:
                raise
            current = None
    raise RuntimeError(f"{HOOK_NAME}: {kind} {name!r} kept conflicting")


async def _remove_unwanted(client: LocalClient, stored: dict[str, Obj], wanted: set[str]) -> int:
    removed = 0
    for name, obj in stored.items():
        if name in wanted or _autoupdate(obj) is not True:
            continue
        try:
            await client.delete("", name, uid=str(obj["metadata"].get("uid") or "") or None)
            removed += 1
        except APIError as err:
            if err.code not in (404, 409):
                raise
    return removed


def dangling_condition(level: str, exists: bool, now: str) -> Obj:
    """kube's presyncFlowSchemaStatus condition for a schema naming ``level``."""
    quoted = '"' + level.replace("\\", "\\\\").replace('"', '\\"') + '"'  # Go's %q of a plain name
    if exists:
        status, reason = "False", "Found"
        message = f"This FlowSchema references the PriorityLevelConfiguration object named {quoted} and it exists"
    else:
        status, reason = "True", "NotFound"
        message = (f"This FlowSchema references the PriorityLevelConfiguration object named {quoted} but there "
                   "is no such object")
    return {"type": "Dangling", "status": status, "lastTransitionTime": now, "reason": reason, "message": message}


async def _sync_dangling(client: LocalClient, levels: set[str]) -> int:
    """Write each FlowSchema's Dangling condition where it is not already what it should be."""
    items, _rv, _cont = await client.list("")
    written = 0
    for fs in items:
        level = str(((fs.get("spec") or {}).get("priorityLevelConfiguration") or {}).get("name") or "")
        want = dangling_condition(level, level in levels, now_rfc3339())
        conditions = list((fs.get("status") or {}).get("conditions") or [])
        have = next((c for c in conditions if c.get("type") == "Dangling"), None)
        if have is not None and all(have.get(k) == want[k] for k in ("status", "reason", "message")):
            continue
        conditions = [c for c in conditions if c.get("type") != "Dangling"] + [want]
        fs.setdefault("status", {})["conditions"] = conditions
        try:
            await client.update("", fs["metadata"]["name"], fs, subresource="status")
            written += 1
        except APIError as err:
            if err.code not in (404, 409):  # deleted or changed meanwhile: the next pass sees it
                raise
    return written


async def ensure_flowcontrol_configuration(fs_store: Store, pl_store: Store) -> dict[str, int]:
    """One pass of kube's ensurer (levels, then schemas) and of the Dangling conditions."""
    counts = {"created": 0, "updated": 0, "deleted": 0, "status": 0}
    for kind, store, mandatory, suggested in (
            ("PriorityLevelConfiguration", pl_store, bootstrap.mandatory_priority_levels(),
             bootstrap.suggested_priority_levels()),
            ("FlowSchema", fs_store, bootstrap.mandatory_flow_schemas(), bootstrap.suggested_flow_schemas())):
        client = LocalClient(store)
        items, _rv, _cont = await client.list("")
        stored = {o["metadata"]["name"]: o for o in items}
        results = await asyncio.gather(
            *(_ensure(client, kind, o, stored.get(o["metadata"]["name"]), True) for o in mandatory),
            *(_ensure(client, kind, o, stored.get(o["metadata"]["name"]), False) for o in suggested))
        for done in results:
            if done:
                counts[done] += 1
        counts["deleted"] += await _remove_unwanted(client, stored, {o["metadata"]["name"]
                                                                     for o in mandatory + suggested})
    levels, _rv, _cont = await LocalClient(pl_store).list("")
    counts["status"] = await _sync_dangling(LocalClient(fs_store), {o["metadata"]["name"] for o in levels})
    return counts


class FlowControlBootstrap:
    """The hook's first pass, then a pass after every change to either kind (debounced)."""

    def __init__(self, fs_store: Store, pl_store: Store, settle: float = 0.5,
                 on_pass: Callable[[dict[str, int]], None] | None = None) -> None:
        self.fs_store, self.pl_store = fs_store, pl_store
        self.settle = settle
        self.on_pass = on_pass
        self.done = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._changed = asyncio.Event()

    async def first_pass(self) -> None:
        counts = await ensure_flowcontrol_configuration(self.fs_store, self.pl_store)
        log.info("%s: %d created, %d updated, %d deleted, %d status", HOOK_NAME, counts["created"],
                 counts["updated"], counts["deleted"], counts["status"])
        self.done.set()
        self._tasks = [asyncio.create_task(self._follow(self.fs_store), name="apf-bootstrap-watch-fs"),
                       asyncio.create_task(self._follow(self.pl_store), name="apf-bootstrap-watch-pl"),
                       asyncio.create_task(self._loop(), name="apf-bootstrap")]

    async def _follow(self, store: Store) -> None:
        client = LocalClient(store)
        while True:
            try:
                _items, rv, _cont = await client.list("")
                async for event in client.watch(rv):
                    if event.type != "BOOKMARK":
                        self._changed.set()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: watch failed; again in a second", HOOK_NAME)
            await asyncio.sleep(1.0)

    async def _loop(self) -> None:
        while True:
            await self._changed.wait()
            await asyncio.sleep(self.settle)  # let a burst of changes (and our own writes) land
            self._changed.clear()
            try:
                counts = await ensure_flowcontrol_configuration(self.fs_store, self.pl_store)
                if self.on_pass is not None:
                    self.on_pass(counts)
            except Exception:
                log.exception("%s: pass failed; again at the next change", HOOK_NAME)
                await asyncio.sleep(1.0)
                self._changed.set()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def install(server: GenericAPIServer, group: HookGroup | None = None) -> None:
    """The post-start hook with its named readiness check (in ``group``: run with the other bootstrap
    hooks and retried until it succeeds); the follow-up passes stop first on shutdown."""
    # Taken now: --runtime-config may hide the group from routes later, the objects are still kept.
    stores = {st.info.plural: st for st in server.stores
              if st.info.group == bootstrap.GROUP and st.info.version == "v1"}
    keeper = FlowControlBootstrap(stores["flowschemas"], stores["prioritylevelconfigurations"])

    async def run(_s: GenericAPIServer) -> None:
        await keeper.first_pass()

    async def stop(_s: GenericAPIServer) -> None:
        await keeper.stop()

    if group is not None:
        group.add(run, HOOK_NAME)
    else:
        server.add_post_start_hook(run, HOOK_NAME)
    server.pre_shutdown.append(stop)
