"""The CustomResourceDefinition resource itself: its description, strategy and store.

A CRD is an ordinary cluster-scoped object with a status subresource. What is special: its
defaulting and validation (both from the CRD-validation module), ``status.storedVersions`` kept
by the strategy, and DELETE, which (as kube's CRD REST) first marks the CRD Terminating with the
cleanup finalizer so that its custom resources go first.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.registry.meta import now_rfc3339
from genericapi.registry.options import DeleteOptions
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.storage import errors as serrors

from . import conditions
from .crdvalidation import default_crd, validate_crd, validate_crd_update

GROUP = "apiextensions.k8s.io"
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """What discovery publishes as ``storageVersionHash`` (first 8 bytes of a SHA-256, base64)."""
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode("ascii")


CRD_INFO = ResourceInfo(
    GROUP, "v1", "CustomResourceDefinition", "customresourcedefinitions", "customresourcedefinition",
    namespaced=False, short_names=("crd", "crds"), categories=("api-extensions",), subresources=("status",),
    extra={"storageVersionHash": storage_version_hash(GROUP, "v1", "CustomResourceDefinition")},
)


def storage_version(crd: dict[str, Any]) -> str:
    for v in (crd.get("spec") or {}).get("versions") or []:
        if isinstance(v, dict) and v.get("storage") is True:
            return str(v.get("name") or "")
    return ""


def _add_stored_version(crd: dict[str, Any]) -> None:
    version = storage_version(crd)
    if not version:
        return
    status = crd.setdefault("status", {})
    stored = status.get("storedVersions")
    if not isinstance(stored, list):
        stored = status["storedVersions"] = []
    if version not in stored:
        stored.append(version)


class CRDStrategy(Strategy):
    """Defaulting, storedVersions and validation of CustomResourceDefinitions."""

    tracks_generation = True
    #: kube's CRD strategy (and its status strategy): a PUT must name the version it replaces.
    allow_unconditional_update = False

    def __init__(self, schemas: SchemaCatalog | None) -> None:
        super().__init__(CRD_INFO, schemas)

    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        obj["status"] = {"acceptedNames": {"kind": "", "plural": ""}, "storedVersions": []}
        default_crd(obj)
        _add_stored_version(obj)

    def default(self, obj: dict[str, Any]) -> None:
        default_crd(obj)

    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        super().prepare_for_update(new, old)
        default_crd(new)
        _add_stored_version(new)

    def validate(self, obj: dict[str, Any]) -> list[FieldError]:
        return validate_crd(obj)  # metadata included

    def validate_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return self.validate_meta(new) + validate_crd_update(new, old)


class CRDStore(Store):
    """CRD storage whose first DELETE marks the CRD Terminating instead of removing it."""

    async def delete(self, namespace: str, name: str, opts: DeleteOptions) -> tuple[dict[str, Any], bool]:
        """kube's CRD REST Delete in one etcd round trip: from the watch cache's copy (kube reads
        etcd, then runs GuaranteedUpdate on the cache's copy), what that copy decides without a
        write decided again on the current state when it may be stale. The uid precondition kube
        takes from its read is taken from the first current state (a cached copy is checked by the
        write's revision compare instead)."""
        origin = await self._origin(namespace, name, current=opts.dry_run)
        for _ in range(100):
            meta = origin.obj["metadata"]
            if opts.precondition_uid is None and origin.current:
                opts = copy.copy(opts)
                opts.precondition_uid = meta.get("uid")
            try:
                self._check_preconditions(name, meta, opts)
            except apierrors.APIError as err:
                origin = await self._recheck(origin, err, namespace, name)
                continue
            if meta.get("deletionTimestamp"):
                return await self._delete_from(origin, namespace, name, opts)
            current = self._origin_copy(origin)
            cmeta = current["metadata"]
            try:
                await self.validate_delete(namespace, name, current, opts)
            except apierrors.APIError as err:
                origin = await self._recheck(origin, err, namespace, name)
                continue
            cmeta.setdefault("deletionTimestamp", now_rfc3339())
            cmeta.setdefault("deletionGracePeriodSeconds", 0)
            finalizers = list(cmeta.get("finalizers") or [])
            if CLEANUP_FINALIZER not in finalizers:
                finalizers.append(CLEANUP_FINALIZER)
            cmeta["finalizers"] = finalizers
            conditions.set_condition(current, "Terminating", "True", "InstanceDeletionPending",
                                     "CustomResourceDefinition marked for deletion; "
                                     "CustomResource deletion will begin soon")
            if opts.dry_run:
                return current, False
            kv = origin.kv
            try:
                rev = await self.client.update(kv.key, await self.encode(current), kv.mod_revision)
            except serrors.RevisionConflictError as err:
                origin = await self._origin_after_conflict(err, namespace, name)
                continue
            except serrors.StorageError as err:
                raise self._err(err, name) from err
            cmeta["resourceVersion"] = str(rev)
            return current, False
        raise apierrors.optimistic_lock(self.info.group, self.info.plural, name)
