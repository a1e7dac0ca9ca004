"""Namespaces: their lifecycle on delete and the ``finalize`` subresource (kube's namespace REST).

kube-apiserver does not delete a namespace on the first DELETE: it marks it (``deletionTimestamp``,
``status.phase: Terminating``) and the namespace controller empties it, then removes its token
(``kubernetes``) from ``spec.finalizers`` through ``PUT .../finalize``. The namespace goes when
``spec.finalizers`` and ``metadata.finalizers`` are both empty. This module holds that:

* ``NamespaceStrategy``: ``PrepareForCreate`` adds the ``kubernetes`` finalizer (when a namespace
  controller runs), updates keep ``spec.finalizers`` and ``status``, finalizer names are checked;
* ``NamespaceFinalizeStrategy``: the ``finalize`` subresource, which may change ``spec.finalizers``
  (and keeps ``status``);
* ``NamespaceStore``: DELETE as ``pkg/registry/core/namespace/storage``: the first request marks
  the namespace (and sets the ``orphan``/``foregroundDeletion`` finalizers the delete options ask
  for); later ones return it while ``spec.finalizers`` is non-empty, and delete it once empty.

One deviation: a namespace that has no ``spec.finalizers`` when first deleted (created before
this existed, or with its finalizers removed) is deleted at once instead of being marked, since
nothing would ever finalize it (kube would leave it ``Terminating`` until a second DELETE).
"""

from __future__ import annotations

import copy
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.apimachinery.validation import validate_qualified_name
from genericapi.registry.admissionchain import AdmissionChain
from genericapi.registry.codec import JsonCodec
from genericapi.registry.fieldtracking import Writer
from genericapi.registry.meta import now_rfc3339
from genericapi.registry.options import DeleteOptions
from genericapi.registry.store import Store
from genericapi.storage import errors as serrors
from genericapi.storage.etcd import EtcdClient

from .strategies import NamespaceStrategy as _BaseNamespaceStrategy

#: The namespace controller's token in ``spec.finalizers``.
FINALIZER_KUBERNETES = "kubernetes"
#: Finalizer names allowed without a ``/`` (``IsStandardFinalizerName``).
STANDARD_FINALIZERS = frozenset({FINALIZER_KUBERNETES, "orphan", "foregroundDeletion"})
_CONFLICT_RETRIES = 200


def spec_finalizers(ns: dict[str, Any]) -> list[str]:
    spec = ns.get("spec")
    found = spec.get("finalizers") if isinstance(spec, dict) else None
    return [f for f in found if isinstance(f, str)] if isinstance(found, list) else []


def validate_finalizer_name(value: str, path: str) -> list[FieldError]:
    """``validateFinalizerName``: a qualified name, and a standard one when it has no prefix."""
    errs = [apierrors.invalid(path, value, m) for m in validate_qualified_name(value)]
    if "/" not in value and value not in STANDARD_FINALIZERS:
        errs.append(apierrors.invalid(path, value,
                                      "name is neither a standard finalizer name nor is it fully qualified"))
    return errs


class NamespaceStrategy(_BaseNamespaceStrategy):
    """Create/update rules of Namespace (``namespaceStrategy``)."""

    def __init__(self, info: ResourceInfo, schemas: SchemaCatalog | None = None,
                 add_kubernetes_finalizer: bool = True) -> None:
        super().__init__(info, schemas)
        self.returns_deleted_object = True
        #: Whether create adds ``kubernetes`` to spec.finalizers (only when a namespace controller
        #: runs: otherwise nothing would ever finalize the namespace).
        self.add_kubernetes_finalizer = add_kubernetes_finalizer

    def prepare_for_create(self, obj: dict[str, Any]) -> None:
        super().prepare_for_create(obj)
        if not self.add_kubernetes_finalizer:
            return
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            spec = obj["spec"] = {}
        finalizers = spec.get("finalizers")
        if not isinstance(finalizers, list):
            finalizers = spec["finalizers"] = []
        if FINALIZER_KUBERNETES not in finalizers:
            finalizers.append(FINALIZER_KUBERNETES)

    def default(self, obj: dict[str, Any]) -> None:
        # spec.finalizers is never defaulted (kube: "we let it get removed over life of object"):
        # whatever defaulting does, the list stays as prepared.
        spec = obj.get("spec")
        had = isinstance(spec, dict) and "finalizers" in spec
        kept = copy.deepcopy(spec.get("finalizers")) if isinstance(spec, dict) and had else None
        super().default(obj)
        spec = obj.get("spec")
        if isinstance(spec, dict):
            if had:
                spec["finalizers"] = kept
            else:
                spec.pop("finalizers", None)

    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        """Only ``finalize`` changes spec.finalizers and only ``status`` changes status."""
        _keep(new, old, "status")
        old_spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
        assert isinstance(old_spec, dict)
        new_spec = new.get("spec")
        if not isinstance(new_spec, dict):
            new_spec = new["spec"] = {}
        if "finalizers" in old_spec:
            new_spec["finalizers"] = copy.deepcopy(old_spec["finalizers"])
        else:
            new_spec.pop("finalizers", None)
        if not new_spec and "spec" not in old:
            new.pop("spec", None)

    def validate(self, obj: dict[str, Any]) -> list[FieldError]:
        errs = super().validate(obj)
        for name in spec_finalizers(obj):
            errs.extend(validate_finalizer_name(name, "spec.finalizers"))
        return errs

    def validate_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        errs = super().validate_update(new, old)
        for name in spec_finalizers(new):
            errs.extend(validate_finalizer_name(name, "spec.finalizers"))
        return errs


class NamespaceFinalizeStrategy(NamespaceStrategy):
    """``PUT /api/v1/namespaces/{name}/finalize`` (``namespaceFinalizeStrategy``)."""

    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any]) -> None:
        _keep(new, old, "status")

    def validate_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        errs = self._validate_schema(new) + self.validate_meta(new)
        for i, name in enumerate(spec_finalizers(new)):
            errs.extend(validate_finalizer_name(name, f"spec.finalizers[{i}]"))
        return errs


def _keep(new: dict[str, Any], old: dict[str, Any], key: str) -> None:
    if key in old:
        new[key] = copy.deepcopy(old[key])
    else:
        new.pop(key, None)


def _gc_finalizers(current: list[str], opts: DeleteOptions) -> list[str]:
    """The orphan/foregroundDeletion finalizers a namespace DELETE asks for (its own rules:
    the options decide, else the finalizers already there stay)."""
    orphan = "orphan" in current
    foreground = "foregroundDeletion" in current
    if opts.orphan_dependents is not None:
        orphan, foreground = opts.orphan_dependents, not opts.orphan_dependents
    elif opts.propagation_policy is not None:
        orphan = opts.propagation_policy == "Orphan"
        foreground = opts.propagation_policy == "Foreground"
    out = [f for f in current if f not in ("orphan", "foregroundDeletion")]
    if orphan:
        out.append("orphan")
    if foreground:
        out.append("foregroundDeletion")
    return out


class NamespaceStore(Store):
    """The namespaces store, with kube's two-phase delete and the ``finalize`` subresource."""

    def __init__(self, info: ResourceInfo, strategy: NamespaceStrategy, client: EtcdClient, key_prefix: str,
                 admission: AdmissionChain | None = None, watch_cache_size: int = 10_000,
                 codec: JsonCodec | None = None) -> None:
        super().__init__(info, strategy, client, key_prefix, admission, watch_cache_size, codec)
        finalize = copy.copy(self)
        finalize.strategy = NamespaceFinalizeStrategy(info, strategy.schemas, strategy.add_kubernetes_finalizer)
        self._finalize_view: Store = finalize

    def should_delete_during_update(self, obj: dict[str, Any]) -> bool:
        return super().should_delete_during_update(obj) and not spec_finalizers(obj)

    async def update(self, namespace: str, name: str, new: dict[str, Any], *, dry_run: bool = False,
                     subresource: str = "", writer: Writer | None = None) -> dict[str, Any]:
        if subresource == "finalize":
            return await self._finalize_view.update(namespace, name, new, dry_run=dry_run, writer=writer)
        return await super().update(namespace, name, new, dry_run=dry_run, subresource=subresource, writer=writer)

    async def delete(self, namespace: str, name: str, opts: DeleteOptions) -> tuple[dict[str, Any], bool]:
        """kube's namespace REST Delete in one etcd round trip: it starts from the watch cache's copy
        (kube reads etcd first, then runs GuaranteedUpdate on the cache's copy); what that copy
        decides without a write (a precondition or admission error, "still terminating") is decided
        again on the current state when the copy may be stale, as the generic store's writes are."""
        origin = await self._origin("", name, current=opts.dry_run)
        for _ in range(_CONFLICT_RETRIES):
            meta = origin.obj["metadata"]
            try:
                self._check_preconditions(name, meta, opts)
            except apierrors.APIError as err:
                origin = await self._recheck(origin, err, "", name)
                continue
            if meta.get("deletionTimestamp"):
                if not spec_finalizers(origin.obj):
                    return await self._delete_from(origin, namespace, name, opts)
                fresh = await self._current_instead(origin, "", name)
                if fresh is not None:
                    origin = fresh
                    continue
                return origin.obj, False  # the namespace controller is still at work
            if not spec_finalizers(origin.obj):
                return await self._delete_from(origin, namespace, name, opts)
            obj = self._origin_copy(origin)
            meta = obj["metadata"]
            try:
                await self.validate_delete(namespace, name, obj, opts)
            except apierrors.APIError as err:
                origin = await self._recheck(origin, err, "", name)
                continue
            meta["deletionTimestamp"] = now_rfc3339()
            status = obj.get("status")
            if not isinstance(status, dict):
                status = obj["status"] = {}
            status["phase"] = "Terminating"
            finalizers = _gc_finalizers(list(meta.get("finalizers") or []), opts)
            if finalizers:
                meta["finalizers"] = finalizers
            else:
                meta.pop("finalizers", None)
            if opts.dry_run:
                return obj, False
            kv = origin.kv
            try:
                rev = await self.client.update(kv.key, await self.encode(obj), kv.mod_revision)
            except serrors.RevisionConflictError as err:
                origin = await self._origin_after_conflict(err, "", name)
                continue
            except serrors.StorageError as err:
                raise self._err(err, name) from err
            meta["resourceVersion"] = str(rev)
            return obj, False
        raise apierrors.optimistic_lock(self.info.group, self.info.plural, name)


def build_store(info: ResourceInfo, schemas: SchemaCatalog, client: EtcdClient, key_prefix: str,
                admission: AdmissionChain, watch_cache_size: int, *,
                add_kubernetes_finalizer: bool) -> NamespaceStore:
    strategy = NamespaceStrategy(info, schemas, add_kubernetes_finalizer)
    return NamespaceStore(info, strategy, client, key_prefix, admission, watch_cache_size)
