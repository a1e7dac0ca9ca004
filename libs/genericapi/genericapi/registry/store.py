"""The generic store: every verb of every resource, on etcd and the watch cache.

A resource is a ``ResourceInfo`` plus a ``Strategy`` on this one store. The store owns keys,
system metadata, optimistic concurrency (resourceVersion = etcd mod_revision), finalizers and
list/watch semantics; the strategy owns what is special about the kind.
"""

from __future__ import annotations

import base64
import copy
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from genericapi.apimachinery import admission as adm
from genericapi.apimachinery import deepjson
from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.gofmt import GoRendered, go_quote
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.storage import errors as serrors
from genericapi.storage.cacher import CacheWatcher, WatchCache
from genericapi.storage.etcd import EtcdClient, KeyValue, prefix_end

from .admissionchain import AdmissionChain, attributes, request_admission
from .codec import JsonCodec
from .fieldtracking import FieldTracker, Writer
from .meta import generate_name, new_uid, now_rfc3339, same_but_server_metadata
from .options import DeleteOptions, ListOptions, ListResult
from .selection import attrs_function
from .strategy import Strategy
from .subresourceview import SubresourceView
from .translate import to_api_error
from .writeorigin import WriteOrigin

log = logging.getLogger(__name__)

#: Called once a write that a begin hook prepared succeeded (True) or failed (False).
FinishHook = Callable[[bool], Awaitable[None]]
#: kube's BeginCreate: (object, dry_run) -> finish; runs after defaulting, before validation.
BeginCreateHook = Callable[[dict[str, Any], bool], Awaitable[FinishHook]]
#: kube's BeginUpdate: (new, old, dry_run) -> finish; runs after defaulting, before validation.
BeginUpdateHook = Callable[[dict[str, Any], dict[str, Any], bool], Awaitable[FinishHook]]
#: kube's AfterDelete: (the deleted object); runs once it is gone from etcd (never on dry-run).
AfterDeleteHook = Callable[[dict[str, Any]], Awaitable[None]]
#: A create-only subresource (kube's ``NamedCreater``: ``pods/binding``, ``pods/eviction``):
#: (namespace, name, the decoded body, dry_run) -> (HTTP status, response object).
SubresourceCreate = Callable[[str, str, dict[str, Any], bool], Awaitable[tuple[int, dict[str, Any]]]]

_GENERATE_NAME_ATTEMPTS = 8
#: Unpinned updates (patches without a resourceVersion) retry on conflict like etcd3's
#: GuaranteedUpdate; the bound only stops a pathological livelock.
_CONFLICT_RETRIES = 200
_LIST_EXPIRED = "The resourceVersion for the provided list is too old."
_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)


class Store:
    """Storage and semantics of one resource (all namespaces)."""

    def __init__(self, info: ResourceInfo, strategy: Strategy, client: EtcdClient, key_prefix: str,
                 admission: AdmissionChain | None = None, watch_cache_size: int = 10_000,
                 codec: JsonCodec | None = None) -> None:
        self.info = info
        self.strategy = strategy
        self.client = client
        self.key_prefix = key_prefix.rstrip("/")
        self.codec = codec or JsonCodec()
        self.cache = WatchCache(client, (self.key_prefix + "/").encode(), self.codec, window=watch_cache_size,
                                attrs=attrs_function(info.group, info.plural))
        #: The service's admission chain (shared by its stores; empty: nothing runs).
        self.admission: AdmissionChain = admission if admission is not None else AdmissionChain()
        #: Whether a garbage collector honours orphan/foreground deletion finalizers.
        self.gc_enabled = False
        #: Propagation when a DELETE names none (kube's DefaultGarbageCollectionPolicy):
        #: "Background" for most resources, "Orphan" for a few group-versions (batch/v1 Jobs).
        self.default_gc_policy = "Background"
        #: Warning for a DELETE that names no propagation (batch/v1 Jobs warn that pods stay).
        self.default_policy_warning = ""
        #: Resources that allocate around their writes (Service ClusterIPs and NodePorts).
        self.begin_create: BeginCreateHook | None = None
        self.begin_update: BeginUpdateHook | None = None
        self.after_delete: AfterDeleteHook | None = None
        #: managedFields bookkeeping of writes that name a writer (fieldtracking.py).
        self.fields = FieldTracker(strategy, self.key_prefix, self.codec)
        #: Warning sent with every response of a deprecated resource ("": none).
        self.deprecation_warning = ""
        #: POST on ``<object>/<subresource>``, by subresource name (see SubresourceCreate).
        self.subresource_creators: dict[str, SubresourceCreate] = {}

    async def start(self) -> None:
        await self.cache.start()

    async def stop(self) -> None:
        await self.cache.stop()

    # -- keys -----------------------------------------------------------------------------
    def key(self, namespace: str, name: str) -> bytes:
        if self.info.namespaced:
            return f"{self.key_prefix}/{namespace}/{name}".encode()
        return f"{self.key_prefix}/{name}".encode()

    def scope_prefix(self, namespace: str) -> bytes:
        if self.info.namespaced and namespace:
            return f"{self.key_prefix}/{namespace}/".encode()
        return f"{self.key_prefix}/".encode()

    def _err(self, err: serrors.StorageError, name: str = "", operation: str = "") -> APIError:
        return to_api_error(err, self.info, name, operation)

    async def encode(self, obj: dict[str, Any]) -> bytes:
        """The stored bytes of ``obj``; a store whose conversion needs I/O (a CRD's conversion
        webhook) overrides this."""
        return self.codec.encode(obj)

    def _not_found(self, name: str) -> APIError:
        return apierrors.not_found(self.info.group, self.info.plural, name)

    # -- reads ----------------------------------------------------------------------------
    def _decode(self, kv: KeyValue) -> dict[str, Any]:
        """The stored object of ``kv`` at its revision: a new object on every call, decoded from
        the bytes already held. A write's private copy of the stored object is made so: parsing is
        cheaper than ``copy.deepcopy`` at any size (about 20x at 10,000 levels, where deepcopy
        recurses in Python), and ``codec.decode`` would also serialize the object again."""
        obj = self.codec.from_storage(deepjson.loads(kv.value))
        obj.setdefault("metadata", {})["resourceVersion"] = str(kv.mod_revision)
        return obj

    async def _read_kv(self, namespace: str, name: str) -> KeyValue:
        try:
            kv, _ = await self.client.get(self.key(namespace, name))
        except serrors.StorageError as err:
            raise self._err(err, name, operation="get") from err
        if kv is None:
            raise self._not_found(name)
        return kv

    async def _read(self, namespace: str, name: str) -> tuple[dict[str, Any], KeyValue]:
        kv = await self._read_kv(namespace, name)
        obj = self._decode(kv)
        return (obj if self._serves_as_stored() else await self._served(obj)), kv

    async def _served(self, stored: dict[str, Any]) -> dict[str, Any]:
        """``stored`` (as etcd and the watch cache hold it, resourceVersion set) as this store serves
        it. Itself here; a store converting at its edges (a custom resource whose conversion is a
        webhook) overrides this, and then everything read, from etcd or from the watch cache,
        passes through it: a write starting from the cached copy sees what a read would."""
        return stored

    def _serves_as_stored(self) -> bool:
        """Whether ``_served`` is the identity (the store's objects are the cache's)."""
        return type(self)._served is Store._served

    def _private_copy(self, read: dict[str, Any], kv: KeyValue) -> dict[str, Any]:
        """A copy of ``read`` (what ``_read`` returned with ``kv``) that a write may change: decoded
        again from ``kv`` when the store serves objects as stored, else a deep copy (``_served`` may
        have called a conversion webhook: doing that again for a copy would be another call)."""
        if self._serves_as_stored():
            return self._decode(kv)
        return copy.deepcopy(read)

    # -- where a write starts (writeorigin.py) --------------------------------------------
    async def _origin(self, namespace: str, name: str, *, current: bool = False) -> WriteOrigin:
        """The state an update or delete starts from: the watch cache's copy when the cache is ready
        and holds the key (kube's Cacher passes it as ``cachedExistingObject``), else etcd's (404
        when etcd has no such key). ``current`` asks for etcd's. The cached copy goes through
        ``_served`` as a read does; a copy that fails to convert is never the answer (it may be
        stale): etcd's is read and converted instead."""
        if not current and self.cache.ready:
            cached = self.cache.get(self.key(namespace, name))
            if cached is not None:
                if self._serves_as_stored():
                    return WriteOrigin.from_cache(cached)
                try:
                    return WriteOrigin.from_cache(cached, await self._served(cached.decode()))
                except APIError:
                    pass  # decided again on the current state below
        obj, kv = await self._read(namespace, name)
        return WriteOrigin(obj, kv, True)

    async def _origin_after_conflict(self, err: serrors.RevisionConflictError, namespace: str,
                                     name: str) -> WriteOrigin:
        """The state to retry from after a Txn's compare failed: what its else branch read (current,
        no read of our own), as etcd3's GuaranteedUpdate retries."""
        kv = err.current
        if isinstance(kv, KeyValue):
            obj = self._decode(kv)
            return WriteOrigin(obj if self._serves_as_stored() else await self._served(obj), kv, True)
        return await self._origin(namespace, name, current=True)

    def _origin_copy(self, origin: WriteOrigin) -> dict[str, Any]:
        """A private copy of the origin's object, for a write to change."""
        if origin.cached is not None and self._serves_as_stored():
            return origin.cached.decode()
        return self._private_copy(origin.obj, origin.kv)

    async def _recheck(self, origin: WriteOrigin, err: APIError, namespace: str, name: str) -> WriteOrigin:
        """``err`` came out of a write computed on ``origin``: raise it when ``origin`` is current or
        turns out to be (etcd holds the same revision); else the current state to do it again on
        (etcd3's ``if !origStateIsCurrent { getCurrentState(); continue }``). A stale cache never
        answers a precondition, conflict, validation or admission error of its own."""
        if origin.current:
            raise err
        fresh = await self._origin(namespace, name, current=True)
        if fresh.revision == origin.revision:
            raise err
        return fresh

    async def _current_instead(self, origin: WriteOrigin, namespace: str, name: str) -> WriteOrigin | None:
        """A write computed on ``origin`` ends without writing ("nothing changed", a pending graceful
        deletion): None when ``origin`` is current (or etcd holds its revision, and the value needs no
        rewrite for a new encryption key), else the current state to do it again on."""
        if origin.current:
            return None
        fresh = await self._origin(namespace, name, current=True)
        if fresh.revision == origin.revision and not fresh.kv.stale:
            return None
        return fresh

    async def get(self, namespace: str, name: str, resource_version: str = "") -> dict[str, Any]:
        if resource_version not in ("", "0"):
            _refuse_unparseable_rv(resource_version)
        if resource_version == "0" and self.cache.ready:
            cached = self.cache.get(self.key(namespace, name))
            if cached is None:
                raise self._not_found(name)
            obj = cached.decode()  # a new object from the cached JSON
            return obj if self._serves_as_stored() else await self._served(obj)
        obj, _ = await self._read(namespace, name)
        return obj

    async def list(self, namespace: str, opts: ListOptions) -> ListResult:
        rv, match = opts.resource_version, opts.resource_version_match
        if opts.continue_token:
            if rv or match:
                raise apierrors.bad_request(
                    "specifying resource version is not allowed when using continue")
            return await self._list_from_etcd(namespace, opts)
        if match == "Exact":
            if not rv or rv == "0":
                raise apierrors.invalid_object("meta.k8s.io", "ListOptions", "", [apierrors.forbidden(
                    "resourceVersionMatch", "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"\"")])
            return await self._list_from_etcd(namespace, opts, revision=_parse_rv(rv))
        if match and match != "NotOlderThan":
            raise apierrors.bad_request(f'unsupported resourceVersionMatch "{match}"')
        if opts.limit > 0 and rv != "0":
            if rv:
                return await self._list_from_etcd(namespace, opts, revision=_parse_rv(rv))
            return await self._list_from_etcd(namespace, opts)
        # Served from the watch cache: rv=0 (any), rv=N (not older than N), or unset
        # (consistent: the cache first catches up with etcd's current revision).
        try:
            if rv and rv != "0":
                await self.cache.wait_for_revision(_parse_rv(rv))
            elif not rv:
                await self.cache.wait_for_revision(await self.client.current_revision())
        except serrors.StorageError as err:
            raise self._err(err, operation="list") from err
        # The namespace is the key prefix; the predicate runs on the cache's attributes where it can.
        items, revision = self.cache.list(self.scope_prefix(namespace), opts.predicate)
        return ListResult(None, revision, entries=items)

    async def _list_from_etcd(self, namespace: str, opts: ListOptions, revision: int = 0) -> ListResult:
        prefix = self.scope_prefix(namespace)
        start = prefix
        if opts.continue_token:
            revision, start_key = _decode_continue(opts.continue_token, self.key_prefix)
            start = f"{self.key_prefix}/{start_key}".encode()
            if not start.startswith(prefix):
                raise apierrors.bad_request("continue key is not valid for this list")
        end = prefix_end(prefix)
        pred = opts.predicate
        out: list[tuple[dict[str, Any], bytes]] = []
        limit = opts.limit
        more = False
        last_key = b""
        remaining = 0
        try:
            while True:
                batch = max(limit - len(out), 0) if limit else 0
                if limit and pred is not None:
                    batch = max(batch, 100)
                # etcd counts [start, end) in the same answer: a page's remainingItemCount needs no
                # second call (kube's GetList takes it from the page's response).
                kvs, header, more, count = await self.client.range_counted(start, end, revision=revision,
                                                                           limit=batch)
                revision = revision or header
                stopped = len(kvs) - 1
                for i, kv in enumerate(kvs):
                    obj, raw = self.codec.decode(kv.value, kv.mod_revision)
                    last_key = kv.key
                    if pred is None or pred(obj):
                        out.append((obj, raw))
                        if limit and len(out) >= limit:
                            stopped = i
                            break
                if limit and len(out) >= limit:
                    more = more or stopped < len(kvs) - 1
                    remaining = count - (stopped + 1)  # the keys after the last one returned
                    break
                if not more or not kvs:
                    more = False
                    break
                start = kvs[-1].key + b"\0"
        except serrors.FutureRevisionRefusedError as err:
            raise self._err(err, operation="list") from err
        except serrors.TooOldRevisionError as err:
            if opts.continue_token:
                raise apierrors.resource_expired(_CONTINUE_EXPIRED) from err
            # etcd compacted it: kube's etcd3 store (interpretListError) words it so.
            raise apierrors.resource_expired(_LIST_EXPIRED) from err
        except serrors.StorageError as err:
            raise self._err(err, operation="list") from err
        result = ListResult(out, revision)
        if more and limit:
            result.continue_token = _encode_continue(revision, last_key.decode()[len(self.key_prefix) + 1:])
            if not opts.filtered:
                result.remaining = remaining
        return result

    async def watch(self, namespace: str, opts: ListOptions) -> CacheWatcher:
        rv = opts.resource_version
        if rv not in ("", "0"):
            _refuse_unparseable_rv(rv)
        start = None if rv in ("", "0") else _parse_rv(rv)
        if opts.send_initial_events and not opts.allow_bookmarks:
            raise apierrors.invalid_object("meta.k8s.io", "ListOptions", "", [apierrors.forbidden(
                "allowWatchBookmarks", "allowWatchBookmarks required when sendInitialEvents is true")])
        try:
            if rv == "":
                # Unset means "most recent": the initial state must be at least as fresh as a
                # quorum read, so the cache first catches up with etcd's current revision.
                await self.cache.wait_for_revision(await self.client.current_revision())
            return await self.cache.watch(start, opts.predicate, initial_events=opts.send_initial_events,
                                          key_prefix=self.scope_prefix(namespace))
        except serrors.StorageError as err:
            raise self._err(err, operation="watch") from err

    # -- create ---------------------------------------------------------------------------
    async def create(self, namespace: str, obj: dict[str, Any], dry_run: bool = False,
                     writer: Writer | None = None) -> dict[str, Any]:
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        if self.info.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != namespace:
                raise apierrors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not dry_run and _set_resource_version(meta):
            # etcd3's store.Create: a version that parses as a non-zero number is refused (500, kube's
            # ErrResourceVersionSetOnCreate); anything else ("v1", "0", "-1") is cleared and ignored.
            raise apierrors.internal_error("resourceVersion should not be set on objects to be created")
        generated = not meta.get("name") and bool(meta.get("generateName"))
        scope = request_admission.get()
        body_clean = scope is not None and scope.schema_clean is obj  # its handler walked it: nothing found
        before_admission = self.fields.before_admission(obj, writer if self.admission else None)
        attrs = None
        if self.admission:
            attrs = self.admission_attributes(adm.CREATE, namespace, str(meta.get("name") or ""), obj, None,
                                              dry_run=dry_run)
            await self.admission.admit(attrs)
            obj = attrs.obj if attrs.obj is not None else obj
            if not isinstance(obj.get("metadata"), dict):
                obj["metadata"] = {}  # a webhook patched it away: validation reports what is missing
            meta = obj["metadata"]
            # kube's BeforeCreate (after mutating admission): an emptied namespace is the request's
            # again (a moved one was refused by the webhook plugin); cluster-scoped objects have none.
            if self.info.namespaced:
                meta["namespace"] = meta.get("namespace") or namespace
            else:
                meta.pop("namespace", None)
        admitted = before_admission.added(obj) if before_admission is not None else None
        self.strategy.prepare_for_create(obj)
        self.strategy.default(obj)
        for attempt in range(_GENERATE_NAME_ATTEMPTS if generated else 1):
            if generated:
                meta["name"] = generate_name(meta["generateName"])
            self._fill_system_fields(meta)
            self.fields.track(None, obj, writer, admitted=admitted)
            finish = await self.begin_create(obj, dry_run) if self.begin_create is not None else None
            written = False
            try:
                if body_clean and before_admission is not None \
                        and before_admission.same_but_metadata(obj):
                    errs = self.strategy.validate_schema_clean(obj)
                else:
                    errs = self.strategy.validate(obj)
                if errs:
                    raise apierrors.invalid_object(self.info.group, self.info.kind, meta.get("name", ""), errs)
                if attrs is not None:
                    # The record keeps the request's name: "" for a generateName create, as kube's.
                    attrs.obj = obj
                    await self.admission.validate(attrs)
                if dry_run:
                    written = True
                    return obj
                try:
                    rev = await self.client.create(self.key(namespace, meta["name"]), await self.encode(obj))
                except serrors.KeyExistsError as err:
                    if generated and attempt + 1 < _GENERATE_NAME_ATTEMPTS:
                        continue
                    if generated:
                        raise apierrors.generate_name_conflict(self.info.group, self.info.plural,
                                                               meta["name"]) from err
                    raise self._err(err, meta.get("name", ""), operation="create") from err
                except serrors.StorageError as err:
                    raise self._err(err, meta.get("name", ""), operation="create") from err
                written = True
            finally:
                if finish is not None:
                    await finish(written)  # a failed create gives back what it allocated
            meta["resourceVersion"] = str(rev)
            return obj
        raise AssertionError("unreachable")

    def _fill_system_fields(self, meta: dict[str, Any]) -> None:
        meta["uid"] = new_uid()
        meta["creationTimestamp"] = now_rfc3339()
        meta.pop("deletionTimestamp", None)
        meta.pop("deletionGracePeriodSeconds", None)
        meta.pop("selfLink", None)
        if self.strategy.tracks_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)

    # -- update / patch -------------------------------------------------------------------
    async def update(self, namespace: str, name: str, new: dict[str, Any], *, dry_run: bool = False,
                     subresource: str = "", writer: Writer | None = None) -> dict[str, Any]:
        """PUT: replace the object (or its status); conflicts when resourceVersion is stale."""
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            meta = new["metadata"] = {}
        body_name = meta.get("name")
        if body_name and body_name != name:
            raise apierrors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})")
        if self.info.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != namespace:
                raise apierrors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request")
        wanted_rv = meta.get("resourceVersion") or ""

        def produce(old: dict[str, Any]) -> dict[str, Any]:
            out = copy.deepcopy(new)
            out_meta = out.setdefault("metadata", {})
            out_meta["name"] = name
            if wanted_rv:
                out_meta["resourceVersion"] = wanted_rv  # "0": unconditional, if the kind allows it
            else:
                out_meta.pop("resourceVersion", None)  # none (Go's omitempty): unconditional likewise
            return out

        # Pinned: a version that parses and is not 0 (a lost race is then kube's 409, no retry).
        pinned = _parse_uint_error(str(wanted_rv)) is None and int(wanted_rv) != 0
        return await self.guaranteed_update(namespace, name, produce, dry_run=dry_run,
                                            subresource=subresource, precondition=pinned, writer=writer)

    async def guaranteed_update(self, namespace: str, name: str,
                                produce: Callable[[dict[str, Any]], dict[str, Any]], *,
                                dry_run: bool = False, subresource: str = "",
                                precondition: bool | None = None, writer: Writer | None = None,
                                view: SubresourceView | None = None,
                                view_from_parent: bool = False) -> dict[str, Any]:
        """Read, transform, write; retried on conflict unless the caller pinned a version.

        ``produce`` gets a private copy of the stored object. When ``precondition`` is None the
        caller pinned a version iff ``produce`` changed ``metadata.resourceVersion`` (a patch
        that carries one). With a ``view`` (``/scale``), ``produce`` gets and returns the view of
        the stored object, admission sees views, and the admitted view is turned back into the
        object (``subresource`` still names how the strategy prepares the object: "" for scale).
        ``view_from_parent``: ``produce`` changes the stored object itself (an apply to ``/scale``
        merges managed fields of the parent) and admission sees the view of what it made.
        """
        origin = await self._origin(namespace, name, current=dry_run)
        for _ in range(_CONFLICT_RETRIES):
            old, kv = origin.obj, origin.kv
            finish: FinishHook | None = None
            out: dict[str, Any] | None = None
            try:
                try:
                    new, attrs, finish = await self._produce_update(
                        namespace, name, produce, origin, dry_run, subresource, writer, view, view_from_parent)
                    await self._validate_update(name, new, old, attrs, view, subresource)
                except APIError as err:
                    # Decided on a copy that may be stale: again on the current state, unless it is.
                    origin = await self._recheck(origin, err, namespace, name)
                    continue
                if new == old and not kv.stale and not self.should_delete_during_update(new):
                    # Nothing changed: no write, no new resourceVersion (as kube), once the stored
                    # object is known to be this one. A value stored with an older encryption key
                    # is written again all the same (how keys are rotated).
                    fresh = await self._current_instead(origin, namespace, name)
                    if fresh is None:
                        out = old
                        return old
                    origin = fresh
                    continue
                try:
                    out = await self._write_update(name, new, kv, dry_run)
                except serrors.RevisionConflictError as err:
                    # The resourceVersion a PUT pinned is not the stored one any more: kube's 409.
                    # (A patch's own resourceVersion meets the current state in the next round.)
                    if precondition:
                        raise apierrors.optimistic_lock(self.info.group, self.info.plural, name) from None
                    origin = await self._origin_after_conflict(err, namespace, name)
                    continue
                return out
            finally:
                if finish is not None:
                    await finish(out is not None)  # a failed or retried update gives back its allocations
        raise apierrors.optimistic_lock(self.info.group, self.info.plural, name)

    async def _produce_update(self, namespace: str, name: str,
                              produce: Callable[[dict[str, Any]], dict[str, Any]], origin: WriteOrigin,
                              dry_run: bool, subresource: str, writer: Writer | None,
                              view: SubresourceView | None, view_from_parent: bool,
                              ) -> tuple[dict[str, Any], adm.Attributes | None, FinishHook | None]:
        """kube's tryUpdate up to validation: the new object from ``produce`` on a private copy of
        ``origin``, mutating admission, the version check, the strategy's preparation, field
        tracking and the resource's begin-update hook: (new, admission record, finish hook)."""
        old = origin.obj
        current_rv = old["metadata"]["resourceVersion"]
        old_view = view.to_view(old) if view is not None else None
        base = old  # the object the admitted view is written back into
        if old_view is not None and not view_from_parent:
            new = produce(copy.deepcopy(old_view))
        else:
            new = produce(self._origin_copy(origin))
            if view is not None:
                base, new = new, view.to_view(new)
        if not isinstance(new.get("metadata"), dict):
            new["metadata"] = {}
        attrs = None
        if self.admission:
            # kube's mutating admission runs in the update's object transformers: on the
            # patched or replaced object (a PUT's as sent: no resourceVersion if it named none),
            # against the stored one, before the version check and PrepareForUpdate.
            if view is not None:
                attrs = self.view_attributes(view, namespace, name, new, old_view, dry_run)
            else:
                attrs = self.admission_attributes(adm.UPDATE, namespace, name, new, old,
                                                  subresource=subresource, dry_run=dry_run)
            await self.admission.admit(attrs)
            new = attrs.obj if attrs.obj is not None else new
            if not isinstance(new.get("metadata"), dict):
                new["metadata"] = {}  # a webhook patched it away: a version of 0, as kube reads it
        self._check_update_version(name, new["metadata"], current_rv, carried=view is not None)
        if view is not None:
            new = view.to_parent(self._origin_copy(origin) if base is old else copy.deepcopy(base), new)
        produced = new
        new = self._prepare_update(namespace, name, new, old, subresource)
        self.fields.track(old, new, writer, produced)
        finish = None
        if self.begin_update is not None and subresource != "status":
            finish = await self.begin_update(new, old, dry_run)
        return new, attrs, finish

    def _check_update_version(self, name: str, meta: dict[str, Any], current_rv: str, *, carried: bool) -> None:
        """kube's Store.Update on the version the new object names (APIObjectVersioner's
        ObjectResourceVersion, Go's ParseUint): one that does not parse is that error unwrapped (a
        500 with no reason, ErrorToAPIStatus's answer to a plain error); 0 ("" or "0") is an
        unconditional update when the strategy allows it (``allow_unconditional_update``, kube's
        AllowUnconditionalUpdate: custom resources and CRDs do not; then 422 "must be specified
        for an update", on the resource's plural as kube words it); any other that is not the
        stored one is the optimistic-lock 409. A view (``/scale``) without a version carries the
        stored one over (kube's scaleUpdatedObjectInfo). An unconditional update gets the stored
        version, so "nothing changed" compares like with like."""
        wanted = meta.get("resourceVersion") or ""
        if not isinstance(wanted, str):
            wanted = str(wanted)
        if not wanted and carried:
            meta["resourceVersion"] = current_rv
            return
        problem = _parse_uint_error(wanted) if wanted else None
        if problem is not None:
            raise APIError(500, "", problem)
        version = int(wanted) if wanted else 0
        if version == 0:
            if not self.strategy.allow_unconditional_update:
                raise apierrors.invalid_object(self.info.group, self.info.plural, name, [apierrors.invalid(
                    "metadata.resourceVersion", GoRendered("0x0"), "must be specified for an update")])
            meta["resourceVersion"] = current_rv
        elif version != int(current_rv):
            raise apierrors.optimistic_lock(self.info.group, self.info.plural, name)

    async def storage_update(self, namespace: str, name: str,
                             mutate: Callable[[dict[str, Any]], dict[str, Any]], *,
                             dry_run: bool = False) -> dict[str, Any]:
        """kube's ``Storage.GuaranteedUpdate`` beneath the strategy: read (the watch cache's copy
        first, as kube's Cacher), ``mutate`` (it may raise), write against the read revision, again
        after a lost race. No strategy, admission or field tracking runs: ``pods/binding`` writes
        spec.nodeName and a status condition so."""
        origin = await self._origin(namespace, name, current=dry_run)
        for _ in range(_CONFLICT_RETRIES):
            try:
                new = mutate(self._origin_copy(origin))
            except APIError as err:
                origin = await self._recheck(origin, err, namespace, name)
                continue
            if dry_run:
                return new
            kv = origin.kv
            try:
                rev = await self.client.update(kv.key, await self.encode(new), kv.mod_revision)
            except serrors.RevisionConflictError as err:
                origin = await self._origin_after_conflict(err, namespace, name)
                continue
            except serrors.StorageError as err:
                raise self._err(err, name, operation="update") from err
            new.setdefault("metadata", {})["resourceVersion"] = str(rev)
            return new
        raise apierrors.optimistic_lock(self.info.group, self.info.plural, name)

    async def _validate_update(self, name: str, new: dict[str, Any], old: dict[str, Any],
                               attrs: adm.Attributes | None, view: SubresourceView | None,
                               subresource: str = "") -> None:
        """Validate one prepared update: the strategy, the resource's own validating plugins, then
        validating admission."""
        if view is None and _update_schema_clean(new):
            errs = self.strategy.validate_update_schema_clean(new, old)
        else:
            errs = self.strategy.validate_update(new, old)
        if errs:
            raise apierrors.invalid_object(self.info.group, self.info.kind, name, errs)
        await self.validate_update_plugins(name, new, old, subresource)
        if attrs is not None:
            if view is not None:
                # kube's toScaleUpdateValidation: the validating plugins see the two objects' views
                attrs.obj, attrs.old_obj = view.to_view(new), view.to_view(old)
            else:
                attrs.obj = new
            await self.admission.validate(attrs)

    async def _write_update(self, name: str, new: dict[str, Any], kv: KeyValue, dry_run: bool) -> dict[str, Any]:
        """Write one validated update that changes something: the Txn against ``kv``'s revision
        (RevisionConflictError carries the key as it is now)."""
        if self.should_delete_during_update(new):
            # The last finalizer is gone from an object being deleted: it goes now.
            if dry_run:
                return new
            try:
                await self.client.delete(kv.key, kv.mod_revision)
            except serrors.RevisionConflictError:
                raise
            except serrors.StorageError as err:
                raise self._err(err, name, operation="update") from err
            await self._deleted(new)
            return new
        if dry_run:
            return new
        try:
            rev = await self.client.update(kv.key, await self.encode(new), kv.mod_revision)
        except serrors.RevisionConflictError:
            raise
        except serrors.StorageError as err:
            raise self._err(err, name, operation="update") from err
        new["metadata"]["resourceVersion"] = str(rev)
        return new

    # -- admission ------------------------------------------------------------------------
    def admission_attributes(self, operation: str, namespace: str, name: str, obj: dict[str, Any] | None,
                             old: dict[str, Any] | None, *, subresource: str = "",
                             dry_run: bool = False) -> adm.Attributes:
        """The admission record of a write to this resource (a store serving another kind for a
        subresource overrides this)."""
        return attributes(self.info, operation, namespace, name, obj, old, subresource=subresource, dry_run=dry_run)

    def view_attributes(self, view: SubresourceView, namespace: str, name: str, obj: dict[str, Any],
                        old: dict[str, Any] | None, dry_run: bool) -> adm.Attributes:
        """The record of an update through ``view``: this resource and the view's subresource,
        with the view's kind (kube: ``apps/v1 deployments`` ``scale``, ``autoscaling/v1 Scale``)."""
        attrs = attributes(self.info, adm.UPDATE, namespace, name, obj, old, subresource=view.subresource,
                           dry_run=dry_run)
        attrs.kind_group, attrs.kind_version, attrs.kind = view.gvk
        return attrs

    async def validate_update_plugins(self, name: str, new: dict[str, Any], old: dict[str, Any],
                                      subresource: str) -> None:
        """kube's in-tree validating admission plugins that concern only this resource (the CSR
        store's CertificateApproval and CertificateSigning), run on each prepared update before the
        chain's validating plugins, as kube orders them; on a stale copy they are decided again."""

    async def admit_delete(self, namespace: str, name: str, opts: DeleteOptions) -> None:
        """kube's DELETE handler runs the mutating plugins first, with neither object (``name``
        is "" for a deletecollection: once for the whole request)."""
        if self.admission:
            await self.admission.admit(self.admission_attributes(adm.DELETE, namespace, name, None, None,
                                                                 dry_run=opts.dry_run))

    async def validate_delete(self, namespace: str, name: str, old: dict[str, Any], opts: DeleteOptions) -> None:
        """kube's deleteValidation: the validating plugins see the stored object as the old one."""
        if self.admission:
            await self.admission.validate(self.admission_attributes(adm.DELETE, namespace, name, None, old,
                                                                    dry_run=opts.dry_run))

    async def _deleted(self, obj: dict[str, Any]) -> None:
        """The object is gone from etcd: run the resource's after-delete hook (releases)."""
        if self.after_delete is not None:
            try:
                await self.after_delete(obj)
            except Exception:  # the delete happened; a failed cleanup must not turn it into an error
                log.exception("after-delete hook of %s %s failed", self.info.plural,
                              obj.get("metadata", {}).get("name"))

    def _prepare_update(self, namespace: str, name: str, new: dict[str, Any], old: dict[str, Any],
                        subresource: str) -> dict[str, Any]:
        old_meta = old["metadata"]
        if subresource == "status":
            new = self.strategy.prepare_for_status_update(new, old)
        else:
            self.strategy.prepare_for_update(new, old)
            self.strategy.default(new)
        meta = new["metadata"]
        meta["name"] = name
        if self.info.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        for fixed in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if fixed in old_meta:
                meta[fixed] = old_meta[fixed]
            else:
                meta.pop(fixed, None)
        meta.pop("selfLink", None)
        if self.strategy.tracks_generation:
            gen = int(old_meta.get("generation") or 1)
            if subresource != "status" and self.strategy.spec_changed(new, old):
                gen += 1
            meta["generation"] = gen
        elif "generation" in old_meta:
            meta["generation"] = old_meta["generation"]
        return new

    # -- delete ---------------------------------------------------------------------------
    async def delete(self, namespace: str, name: str, opts: DeleteOptions) -> tuple[dict[str, Any], bool]:
        """Delete one object: (the object, whether it is gone now rather than pending finalizers)."""
        return await self._delete_from(await self._origin(namespace, name, current=opts.dry_run),
                                       namespace, name, opts)

    async def _delete_from(self, origin: WriteOrigin, namespace: str, name: str,
                           opts: DeleteOptions) -> tuple[dict[str, Any], bool]:
        """``delete`` from ``origin`` (a store whose DELETE first decides something on the object, a
        namespace's or a CRD's, hands on the state it started from: no second look)."""
        for _ in range(_CONFLICT_RETRIES):
            obj, kv = origin.obj, origin.kv
            meta = obj["metadata"]
            try:
                self._check_preconditions(name, meta, opts)
                await self.validate_delete(namespace, name, obj, opts)
                graceful, pending = self._before_delete(obj, opts)
            except APIError as err:
                # Decided on a copy that may be stale: again on the current state, unless it is.
                origin = await self._recheck(origin, err, namespace, name)
                continue
            finalizers = list(meta.get("finalizers") or [])
            if self.gc_enabled:
                finalizers = gc_finalizers(finalizers, opts, self.default_gc_policy)
            unchanged = pending or (bool(finalizers) and bool(meta.get("deletionTimestamp")) and not graceful
                                    and finalizers == list(meta.get("finalizers") or []))
            if unchanged:
                # A graceful deletion under way that this one would not shorten, or an object already
                # being deleted: nothing is written, once the stored object is known to be this one.
                fresh = await self._current_instead(origin, namespace, name)
                if fresh is not None:
                    origin = fresh
                    continue
                return obj, False
            try:
                if graceful and not finalizers:
                    return obj, await self._graceful_delete(obj, kv, opts.dry_run)
                if finalizers:
                    if self.strategy.tracks_generation and not meta.get("deletionTimestamp"):
                        meta["generation"] = int(meta.get("generation") or 1) + 1  # once, as markAsDeleting
                    meta.setdefault("deletionTimestamp", now_rfc3339())
                    meta.setdefault("deletionGracePeriodSeconds", 0)
                    meta["finalizers"] = finalizers
                    if opts.dry_run:
                        return obj, False
                    try:
                        rev = await self.client.update(kv.key, await self.encode(obj), kv.mod_revision)
                    except serrors.RevisionConflictError:
                        raise
                    except serrors.StorageError as err:
                        raise self._err(err, name, operation="delete") from err
                    meta["resourceVersion"] = str(rev)
                    return obj, False
                if opts.dry_run:
                    return obj, True
                try:
                    await self.client.delete(kv.key, kv.mod_revision)
                except serrors.RevisionConflictError:
                    raise
                except serrors.KeyNotFoundError as err:
                    raise self._not_found(name) from err
                except serrors.StorageError as err:
                    raise self._err(err, name, operation="delete") from err
            except serrors.RevisionConflictError as err:
                # Changed in between: again from what the failed Txn read (kube's retry).
                origin = await self._origin_after_conflict(err, namespace, name)
                continue
            await self._deleted(obj)
            return obj, True
        raise apierrors.optimistic_lock(self.info.group, self.info.plural, name)

    def _before_delete(self, obj: dict[str, Any], opts: DeleteOptions) -> tuple[bool, bool]:
        """kube's ``rest.BeforeDelete``: (graceful, pending). Sets deletionTimestamp (now + grace)
        and deletionGracePeriodSeconds when the strategy grants a grace period; a later delete
        may only shorten a running one; one that does not is pending (nothing changes)."""
        meta = obj["metadata"]
        current = meta.get("deletionGracePeriodSeconds")
        if isinstance(current, int) and current < 0:
            meta["deletionGracePeriodSeconds"] = current = 1
        if meta.get("deletionTimestamp"):
            if not current:
                return False, False  # finalizer deletion, or a grace period already over: delete now
            period = opts.grace_period_seconds
            if period is None or period >= current:
                return False, True
            meta["deletionTimestamp"] = _shift_rfc3339(str(meta["deletionTimestamp"]), period - current)
            meta["deletionGracePeriodSeconds"] = period
            return True, False
        period = self.strategy.check_graceful_delete(obj, opts)
        if period is None:
            return False, False
        meta["deletionTimestamp"] = _shift_rfc3339(now_rfc3339(), period)
        meta["deletionGracePeriodSeconds"] = period
        if self.strategy.tracks_generation:
            meta["generation"] = int(meta.get("generation") or 1) + 1
        return True, False

    async def _graceful_delete(self, obj: dict[str, Any], kv: KeyValue, dry_run: bool) -> bool:
        """Write the graceful deletion marks; with a zero grace period the object then goes (as
        kube: an update then a delete). Whether it is gone; RevisionConflictError (with the key as it
        is now) when a lost race means retry."""
        meta = obj["metadata"]
        immediate = not meta.get("deletionGracePeriodSeconds")
        if dry_run:
            return immediate
        try:
            rev = await self.client.update(kv.key, await self.encode(obj), kv.mod_revision)
        except serrors.RevisionConflictError:
            raise
        except serrors.StorageError as err:
            raise self._err(err, meta.get("name", ""), operation="delete") from err
        meta["resourceVersion"] = str(rev)
        if not immediate:
            return False
        try:
            await self.client.delete(kv.key, rev)
        except serrors.RevisionConflictError:
            raise  # changed in between: the next round deletes it (its grace period is 0)
        except serrors.KeyNotFoundError:
            pass  # someone else deleted it first: that is fine
        except serrors.StorageError as err:
            raise self._err(err, meta.get("name", ""), operation="delete") from err
        await self._deleted(obj)
        return True

    def should_delete_during_update(self, obj: dict[str, Any]) -> bool:
        """Whether an update removed the last finalizer of an object being deleted (it goes now);
        not while a graceful deletion's period runs (its grace, kept from the stored object, > 0)."""
        meta = obj["metadata"]
        return bool(meta.get("deletionTimestamp")) and not meta.get("finalizers") \
            and not meta.get("deletionGracePeriodSeconds")

    def _check_preconditions(self, name: str, meta: dict[str, Any], opts: DeleteOptions) -> None:
        if opts.precondition_uid is not None and opts.precondition_uid != meta.get("uid"):
            raise apierrors.conflict(
                self.info.group, self.info.plural, name,
                f"Precondition failed: UID in precondition: {opts.precondition_uid}, "
                f"UID in object meta: {meta.get('uid')}")
        if opts.precondition_rv is not None and opts.precondition_rv != meta.get("resourceVersion"):
            raise apierrors.conflict(
                self.info.group, self.info.plural, name,
                f"Precondition failed: ResourceVersion in precondition: {opts.precondition_rv}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}")

    async def delete_collection(self, namespace: str, list_opts: ListOptions,
                                opts: DeleteOptions) -> ListResult:
        listed = await self._list_from_etcd(namespace, ListOptions(predicate=list_opts.predicate,
                                                                   filtered=list_opts.filtered))
        deleted: list[tuple[dict[str, Any], bytes]] = []
        for obj, _raw in listed.items:
            meta = obj["metadata"]
            try:
                out, _gone = await self.delete(meta.get("namespace", ""), meta["name"], opts)
            except APIError as err:
                if err.code == 404:
                    continue
                raise
            deleted.append((out, deepjson.dumps(out)))
        return ListResult(deleted, listed.revision)


def _update_schema_clean(new: dict[str, Any]) -> bool:
    """Whether the update or patch being served checked an object whose schema walk found nothing
    (``RequestAdmission.schema_clean_raw``) and ``new``, prepared, differs from it only in server-set
    metadata: its walk then stands for ``new``'s."""
    scope = request_admission.get()
    raw = scope.schema_clean_raw if scope is not None else None
    if raw is None:
        return False
    try:
        before = deepjson.loads(raw)
    except Exception:  # never fail a write over a shortcut
        return False
    return same_but_server_metadata(new, before)


def gc_finalizers(current: list[str], opts: DeleteOptions, default_policy: str) -> list[str]:
    """The finalizers an object gets on DELETE when garbage collection is on, as kube's
    ``deletionFinalizersForGarbageCollection``: the request's orphanDependents or
    propagationPolicy decide; without them an orphan/foregroundDeletion finalizer already there
    stays; otherwise the resource's default policy (only "Orphan" adds a finalizer)."""
    has_orphan, has_foreground = "orphan" in current, "foregroundDeletion" in current
    if opts.orphan_dependents is not None:
        orphan, foreground = opts.orphan_dependents, not opts.orphan_dependents
    elif opts.propagation_policy in ("Orphan", "Background", "Foreground"):
        orphan = opts.propagation_policy == "Orphan"
        foreground = opts.propagation_policy == "Foreground"
    elif has_orphan or has_foreground:
        orphan, foreground = has_orphan, has_foreground and not has_orphan
    else:
        orphan, foreground = default_policy == "Orphan", False
    out = [f for f in current if f not in ("orphan", "foregroundDeletion")]
    if orphan:
        out.append("orphan")
    if foreground:
        out.append("foregroundDeletion")
    return out if set(out) != set(current) else current


def _shift_rfc3339(stamp: str, seconds: int) -> str:
    """An RFC 3339 timestamp moved by ``seconds`` (kube's deletion timestamps are second precision)."""
    try:
        when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        when = datetime.now(UTC)
    return (when + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _set_resource_version(meta: dict[str, Any]) -> bool:
    """Whether a create's ``metadata.resourceVersion`` names a version (Go's ParseUint, non-zero);
    any other value is dropped, as kube's PrepareObjectForStorage clears it."""
    rv = meta.get("resourceVersion")
    if isinstance(rv, str) and rv.isascii() and rv.isdigit() and len(rv) <= 20 and 0 < int(rv) < 2**64:
        return True
    meta.pop("resourceVersion", None)
    return False


def _parse_uint_error(rv: str) -> str | None:
    """Go's ``strconv.ParseUint(rv, 10, 64)`` error text; None when it parses. Decimal ASCII digits
    only, as ParseUint (Python's int() also takes "+1", " 1", "1_0"); past uint64 is its range error."""
    if rv.isascii() and rv.isdigit():
        if int(rv) < 2**64:
            return None
        why = "value out of range"
    else:
        why = "invalid syntax"
    return f"strconv.ParseUint: parsing {go_quote(rv)}: {why}"


def _rv_parse_error(rv: str) -> str | None:
    """kube's APIObjectVersioner.ParseResourceVersion refusing ``rv``: Go's ParseUint error as a
    field.Invalid on ``resourceVersion``; None when it parses (it was a 500 past int64: etcd's)."""
    problem = _parse_uint_error(rv)
    if problem is None:
        return None
    return f"resourceVersion: Invalid value: {go_quote(rv)}: {problem}"


def _refuse_unparseable_rv(rv: str) -> None:
    """A GET or WATCH at a resourceVersion that does not parse: kube 1.33's cacher returns the
    versioner's storage.InvalidError unclassified (CacheDelegator.Get, Cacher.Watch), which
    ErrorToAPIStatus makes a 500 with no reason (kubernetes/kubernetes#139485). LIST checks the same
    thing first and answers 400 (storage.ValidateListOptions; ``_parse_rv``)."""
    problem = _rv_parse_error(rv)
    if problem is not None:
        raise APIError(500, "", problem)


def _parse_rv(rv: str) -> int:
    problem = _rv_parse_error(rv)
    if problem is not None:
        raise apierrors.bad_request(f"invalid resource version: {problem}")
    return int(rv)


def _encode_continue(revision: int, start_key: str) -> str:
    token = orjson.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": start_key + "\x00"})
    return base64.urlsafe_b64encode(token).decode().rstrip("=")


def _decode_continue(token: str, key_prefix: str) -> tuple[int, str]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = orjson.loads(base64.urlsafe_b64decode(padded))
        if not isinstance(data, dict) or data.get("v") != "meta.k8s.io/v1":
            raise ValueError("version")
        rev = int(data["rv"])
        start = str(data["start"])
        if rev <= 0 or start.startswith("/") or ".." in start.split("/"):
            raise ValueError("key")
        return rev, start
    except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        raise apierrors.bad_request(f'continue key is not valid: "{token}"') from None
