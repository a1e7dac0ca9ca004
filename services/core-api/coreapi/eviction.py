"""``pods/eviction``: kube's ``EvictionREST``, deleting a Pod only as its PodDisruptionBudget allows.

The rules (which budget, when it can be ignored, how it is spent) are in ``disruption``; this
module does the reads and writes in kube's order: the Pod (deleted at once when it is pending,
finished or terminating), the namespace's PDBs (more than one covering the Pod is kube's 500),
the budget spent through the PDB's status (retried on conflicts, refreshed each time), then the
delete with the Eviction's ``deleteOptions`` (pinned to the Pod's resourceVersion where kube
pins it). The answer is a Success Status with code 201. kubechain runs no disruption
controller: a PDB's status is whatever was last written to it, so a budget whose status was
never written (observedGeneration behind generation) refuses every eviction with 429, as
kube's does until its controller has processed it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.gofmt import go_v
from genericapi.handlers.params import delete_options
from genericapi.registry.meta import now_rfc3339
from genericapi.registry.options import DeleteOptions, ListOptions
from genericapi.registry.store import Store

from . import disruption
from .virtual import created_status, ensure_namespace, mapping

#: kube's EvictionsRetry: 20 attempts, 500 ms apart.
RETRY_STEPS = 20
RETRY_DELAY = 0.5


def _is_conflict(err: apierrors.APIError) -> bool:
    return err.code == 409 and err.reason == "Conflict"


def _delete_options(eviction: dict[str, Any], dry_run: bool) -> DeleteOptions:
    """``propagateDryRun``: the request's dryRun and the Eviction's deleteOptions.dryRun must agree."""
    query = ["All"] if dry_run else []
    body = eviction.get("deleteOptions")
    if body is None:
        return dataclasses.replace(DeleteOptions(), dry_run=dry_run)
    if not isinstance(body, dict):
        raise apierrors.bad_request("deleteOptions must be an object")
    content = body.get("dryRun") or []
    if content and query and content != query:
        raise apierrors.unknown_error(
            f"Non-matching dry-run options in request and content: {go_v(query)} and {go_v(content)}")
    opts = delete_options({}, body)
    return dataclasses.replace(opts, dry_run=opts.dry_run or dry_run)


async def _retrying(pinned: bool, attempt: Any) -> Any:
    """``retry.OnError(EvictionsRetry, IsConflict, ...)``; a caller-pinned version is never retried."""
    for step in range(RETRY_STEPS):
        try:
            return await attempt()
        except apierrors.APIError as err:
            if pinned or not _is_conflict(err) or step == RETRY_STEPS - 1:
                raise
        await asyncio.sleep(RETRY_DELAY)
    return None


async def evict(pods: Store, pdbs: Store, namespace: str, name: str, eviction: dict[str, Any],
                dry_run: bool) -> dict[str, Any]:
    """``EvictionREST.Create`` for the Pod ``name``."""
    meta = mapping(eviction.get("metadata"))
    if meta.get("name", "") != name:
        raise apierrors.bad_request("name in URL does not match name in Eviction object")
    original = _delete_options(eviction, dry_run)
    pinned = original.precondition_rv is not None

    async def ignore_pdb_or_read() -> tuple[dict[str, Any], bool]:
        pod = await pods.get(namespace, name)
        if not disruption.can_ignore_pdb(pod):
            return pod, False
        opts = original
        if disruption.should_enforce_resource_version(pod) and not pinned:
            opts = dataclasses.replace(original, precondition_rv=pod["metadata"].get("resourceVersion"))
        await pods.delete(namespace, name, opts)
        return pod, True

    pod, deleted = await _retrying(pinned, ignore_pdb_or_read)
    if deleted:
        return created_status()

    listed = await pdbs.list(namespace, ListOptions())
    covering = disruption.matching_pdbs([obj for obj, _ in listed.items], pod)
    if len(covering) > 1:
        raise apierrors.APIError(500, "", disruption.MULTIPLE_PDBS_MESSAGE)
    pin_to_pod = False
    pdb_name = ""
    if covering:
        pdb = covering[0]
        pdb_name = str(pdb["metadata"]["name"])
        if disruption.unready_pod_may_go(pod, pdb):
            pin_to_pod = True
        else:
            await _spend(pdbs, namespace, pdb, name, original.dry_run)
    opts = original
    if pin_to_pod:
        opts = dataclasses.replace(original, precondition_rv=pod["metadata"].get("resourceVersion"))
    try:
        await pods.delete(namespace, name, opts)
    except apierrors.APIError as err:
        if _is_conflict(err) and pin_to_pod and not pinned:
            raise disruption.still_processing(pdb_name) from None
        raise
    return created_status()


async def _spend(pdbs: Store, namespace: str, pdb: dict[str, Any], pod_name: str, dry_run: bool) -> None:
    """Verify and decrement the budget through its status, refreshing it after each conflict."""
    name = str(pdb["metadata"]["name"])
    current = pdb
    for step in range(RETRY_STEPS):
        if step:
            current = await pdbs.get(namespace, name)
        decrement = disruption.check_and_decrement(current, pod_name, now_rfc3339(), dry_run)
        if dry_run:
            return
        try:
            await pdbs.update(namespace, name, decrement.pdb, subresource="status")
            return
        except apierrors.APIError as err:
            if not _is_conflict(err):
                raise
        await asyncio.sleep(RETRY_DELAY)
    raise apierrors.timeout(f'couldn\'t update PodDisruptionBudget "{name}" due to conflicts', 10)


def install_pod_eviction(pods: Store, pdbs: Store) -> None:
    """POST ``pods/<name>/eviction``."""

    async def create(namespace: str, name: str, obj: dict[str, Any], dry_run: bool) -> tuple[int, dict[str, Any]]:
        ensure_namespace(obj, namespace)
        return 201, await evict(pods, pdbs, namespace, name, obj, dry_run)

    pods.subresource_creators["eviction"] = create
