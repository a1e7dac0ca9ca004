"""kube-apiserver's ``rbac/bootstrap-roles`` post-start hook: the default RBAC objects, reconciled.

Every core-api replica runs it at start (as every kube-apiserver does) before it reports ready:
missing defaults are created, stored ones with ``autoupdate`` not ``"false"`` get what they lack
(``rbac_reconcile``: a union, user additions stay). One list per kind, then a write only for what
differs, so a restart of a settled cluster costs four lists. Conflicts with another replica doing
the same (409 on create or update) are retried from a fresh read. The cluster-scoped defaults and
the namespaced ones are written at the same time (each kind's roles before its bindings); core-api
runs this hook together with the other bootstrap hooks and retries it until it succeeds
(``posthooks``), as kube polls its hook.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from genericapi.apimachinery.errors import APIError
from genericapi.controllers import LocalClient
from genericapi.registry.store import Store

from . import rbac_policy as policy
from .rbac_policy import RBAC_GROUP, Obj
from .rbac_reconcile import needs_recreate, reconcile_binding, reconcile_role

log = logging.getLogger(__name__)

HOOK_NAME = "rbac/bootstrap-roles"
TRIES = 10

Reconcile = Callable[[Obj, Obj], "Obj | None"]


def defaults() -> dict[str, list[Obj]]:
    """The default objects per plural of rbac.authorization.k8s.io, in the order kube writes them."""
    return {
        "clusterroles": policy.cluster_roles() + policy.controller_roles(),
        "clusterrolebindings": policy.cluster_role_bindings() + policy.controller_role_bindings(),
        "roles": policy.namespace_roles(),
        "rolebindings": policy.namespace_role_bindings(),
    }


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


async def _ensure(client: LocalClient, expected: Obj, current: Obj | None, binding: bool) -> str:
    """Create, update or leave one object; return what was done ("" for nothing)."""
    namespace, name = _key(expected)
    for _ in range(TRIES):
        try:
            if current is None:
                await client.create(namespace, expected)
                return "created"
            if binding and needs_recreate(current, expected):
                await client.delete(namespace, name, uid=str(current["metadata"].get("uid") or "") or None)
                current = None
                continue
            fixed = (reconcile_binding if binding else reconcile_role)(current, expected)
            if fixed is None:
                return ""
            await client.update(namespace, name, fixed)
            return "updated"
        except APIError as err:
            if err.code not in (404, 409):
                raise
        try:  # another replica wrote it meanwhile: look again
            current = await client.get(namespace, name)
        except APIError as err:
            if err.code != 404:
                raise
            current = None
    raise RuntimeError(f"{HOOK_NAME}: {name!r} kept conflicting")


async def _reconcile_kind(stores: dict[tuple[str, str], Store], plural: str, objects: list[Obj]) -> list[str]:
    """One list of the kind, then every default created, updated or left concurrently."""
    client = LocalClient(stores[(RBAC_GROUP, plural)], manager="kube-apiserver")  # as kube's post-start hook
    items, _rv, _cont = await client.list("")
    stored = {_key(o): o for o in items}
    binding = plural.endswith("bindings")
    return list(await asyncio.gather(*(_ensure(client, o, stored.get(_key(o)), binding) for o in objects)))


async def ensure_rbac_defaults(stores: dict[tuple[str, str], Store],
                               namespaces_ready: Awaitable[object] | None = None) -> dict[str, int]:
    """Reconcile every default; returns counts of objects created and updated. The cluster-scoped
    kinds (roles before their bindings, as kube) go at once; the namespaced Roles and RoleBindings
    (in kube-system and kube-public) alongside, once ``namespaces_ready`` says those namespaces exist."""
    kinds = defaults()

    async def in_order(plurals: tuple[str, ...], after: Awaitable[object] | None = None) -> list[str]:
        if after is not None:
            await after
        done: list[str] = []
        for plural in plurals:
            done += await _reconcile_kind(stores, plural, kinds[plural])
        return done

    results = await asyncio.gather(in_order(("clusterroles", "clusterrolebindings")),
                                   in_order(("roles", "rolebindings"), namespaces_ready))
    counts = {"created": 0, "updated": 0}
    for done in results[0] + results[1]:
        if done:
            counts[done] += 1
    log.info("%s: %d created, %d updated", HOOK_NAME, counts["created"], counts["updated"])
    return counts
