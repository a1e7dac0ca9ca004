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
from typing import Any

import orjson

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.storage import errors as serrors
from genericapi.storage.cacher import CacheWatcher, WatchCache
from genericapi.storage.etcd import EtcdClient, KeyValue, prefix_end

from .codec import JsonCodec
from .meta import generate_name, new_uid, now_rfc3339
from .options import DeleteOptions, ListOptions, ListResult, Predicate
from .strategy import Strategy
from .translate import to_api_error

log = logging.getLogger(__name__)

#: Hook run before a write: (operation, store, namespace, object) -> None or raise APIError.
AdmissionHook = Callable[[str, "Store", str, dict[str, Any]], Awaitable[None]]

_GENERATE_NAME_ATTEMPTS = 8
#: Unpinned updates (patches without a resourceVersion) retry on conflict like etcd3's
#: GuaranteedUpdate; the bound only stops a pathological livelock.
_CONFLICT_RETRIES = 200
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
                 admission: list[AdmissionHook] | None = None, watch_cache_size: int = 10_000,
                 codec: JsonCodec | None = None) -> None:
        self.info = info
        self.strategy = strategy
        self.client = client
        self.key_prefix = key_prefix.rstrip("/")
        self.codec = codec or JsonCodec()
        self.cache = WatchCache(client, (self.key_prefix + "/").encode(), self.codec, window=watch_cache_size)
        self.admission: list[AdmissionHook] = admission if admission is not None else []
        #: Whether a garbage collector honours orphan/foreground deletion finalizers.
        self.gc_enabled = False

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

    def _err(self, err: serrors.StorageError, name: str = "") -> APIError:
        return to_api_error(err, self.info, name)

    def _not_found(self, name: str) -> APIError:
        return apierrors.not_found(self.info.group, self.info.plural, name)

    # -- reads ----------------------------------------------------------------------------
    async def _read(self, namespace: str, name: str) -> tuple[dict[str, Any], KeyValue]:
        try:
            kv, _ = await self.client.get(self.key(namespace, name))
        except serrors.StorageError as err:
            raise self._err(err, name) from err
        if kv is None:
            raise self._not_found(name)
        obj, _raw = self.codec.decode(kv.value, kv.mod_revision)
        return obj, kv

    async def get(self, namespace: str, name: str, resource_version: str = "") -> dict[str, Any]:
        if resource_version == "0" and self.cache.ready:
            cached = self.cache.get(self.key(namespace, name))
            if cached is None:
                raise self._not_found(name)
            return copy.deepcopy(cached.obj)
        obj, _ = await self._read(namespace, name)
        return obj

    def _scoped(self, namespace: str, predicate: Predicate | None) -> Predicate | None:
        if not (self.info.namespaced and namespace):
            return predicate
        if predicate is None:
            return lambda o: (o.get("metadata") or {}).get("namespace") == namespace
        pred = predicate
        return lambda o: (o.get("metadata") or {}).get("namespace") == namespace and pred(o)

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
            raise self._err(err) from err
        items, revision = self.cache.list(self.scope_prefix(namespace), self._scoped(namespace, opts.predicate))
        return ListResult([(c.obj, c.raw) for c in items], revision)

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
        try:
            while True:
                batch = max(limit - len(out), 0) if limit else 0
                if limit and pred is not None:
                    batch = max(batch, 100)
                kvs, header, more = await self.client.range(start, end, revision=revision, limit=batch)
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
                    break
                if not more or not kvs:
                    more = False
                    break
                start = kvs[-1].key + b"\0"
        except serrors.TooOldRevisionError as err:
            if opts.continue_token:
                raise apierrors.resource_expired(_CONTINUE_EXPIRED) from err
            raise self._err(err) from err
        except serrors.StorageError as err:
            raise self._err(err) from err
        result = ListResult(out, revision)
        if more and limit:
            result.continue_token = _encode_continue(revision, last_key.decode()[len(self.key_prefix) + 1:])
            if not opts.filtered:
                result.remaining = await self.client.count(last_key + b"\0", end, revision)
        return result

    async def watch(self, namespace: str, opts: ListOptions) -> CacheWatcher:
        rv = opts.resource_version
        start = None if rv in ("", "0") else _parse_rv(rv)
        if opts.send_initial_events and not opts.allow_bookmarks:
            raise apierrors.invalid_object("meta.k8s.io", "ListOptions", "", [apierrors.forbidden(
                "allowWatchBookmarks", "allowWatchBookmarks required when sendInitialEvents is true")])
        try:
            if rv == "":
                # Unset means "most recent": the initial state must be at least as fresh as a
                # quorum read, so the cache first catches up with etcd's current revision.
                await self.cache.wait_for_revision(await self.client.current_revision())
            return await self.cache.watch(start, self._scoped(namespace, opts.predicate),
                                          initial_events=opts.send_initial_events)
        except serrors.StorageError as err:
            raise self._err(err) from err

    # -- create ---------------------------------------------------------------------------
    async def create(self, namespace: str, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
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
        if meta.get("resourceVersion"):
            raise apierrors.internal_error("resourceVersion should not be set on objects to be created")
        generated = not meta.get("name") and bool(meta.get("generateName"))
        for hook in self.admission:
            await hook("CREATE", self, namespace, obj)
        self.strategy.prepare_for_create(obj)
        self.strategy.default(obj)
        for attempt in range(_GENERATE_NAME_ATTEMPTS if generated else 1):
            if generated:
                meta["name"] = generate_name(meta["generateName"])
            self._fill_system_fields(meta)
            errs = self.strategy.validate(obj)
            if errs:
                raise apierrors.invalid_object(self.info.group, self.info.kind, meta.get("name", ""), errs)
            if dry_run:
                return obj
            try:
                rev = await self.client.create(self.key(namespace, meta["name"]), self.codec.encode(obj))
            except serrors.KeyExistsError as err:
                if generated and attempt + 1 < _GENERATE_NAME_ATTEMPTS:
                    continue
                if generated:
                    raise apierrors.generate_name_conflict(self.info.group, self.info.plural,
                                                           meta["name"]) from err
                raise self._err(err, meta.get("name", "")) from err
            except serrors.StorageError as err:
                raise self._err(err, meta.get("name", "")) from err
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
                     subresource: str = "") -> dict[str, Any]:
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
            out_meta["resourceVersion"] = wanted_rv or old["metadata"]["resourceVersion"]
            return out

        return await self.guaranteed_update(namespace, name, produce, dry_run=dry_run,
                                            subresource=subresource, precondition=bool(wanted_rv))

    async def guaranteed_update(self, namespace: str, name: str,
                                produce: Callable[[dict[str, Any]], dict[str, Any]], *,
                                dry_run: bool = False, subresource: str = "",
                                precondition: bool | None = None) -> dict[str, Any]:
        """Read, transform, write; retried on conflict unless the caller pinned a version.

        ``produce`` gets a private copy of the stored object. When ``precondition`` is None the
        caller pinned a version iff ``produce`` changed ``metadata.resourceVersion`` (a patch
        that carries one).
        """
        for _ in range(_CONFLICT_RETRIES):
            old, kv = await self._read(namespace, name)
            current_rv = old["metadata"]["resourceVersion"]
            new = produce(copy.deepcopy(old))
            if not isinstance(new.get("metadata"), dict):
                new["metadata"] = {}
            new_rv = str(new["metadata"].get("resourceVersion") or current_rv)
            pinned = precondition if precondition is not None else new_rv != current_rv
            if new_rv != current_rv:
                raise apierrors.optimistic_lock(self.info.group, self.info.plural, name)
            new = self._prepare_update(namespace, name, new, old, subresource)
            for hook in self.admission:
                await hook("UPDATE", self, namespace, new)
            errs = self.strategy.validate_update(new, old)
            if errs:
                raise apierrors.invalid_object(self.info.group, self.info.kind, name, errs)
            new_meta = new["metadata"]
            if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers"):
                # The last finalizer is gone from an object being deleted: it goes now.
                if dry_run:
                    return new
                try:
                    await self.client.delete(kv.key, kv.mod_revision)
                except serrors.RevisionConflictError:
                    if pinned:
                        raise apierrors.optimistic_lock(self.info.group, self.info.plural, name) from None
                    continue
                except serrors.StorageError as err:
                    raise self._err(err, name) from err
                return new
            if new == old:
                return old  # nothing changed: no write, no new resourceVersion (as kube)
            if dry_run:
                return new
            try:
                rev = await self.client.update(kv.key, self.codec.encode(new), kv.mod_revision)
            except serrors.RevisionConflictError:
                if pinned:
                    raise apierrors.optimistic_lock(self.info.group, self.info.plural, name) from None
                continue
            except serrors.StorageError as err:
                raise self._err(err, name) from err
            new_meta["resourceVersion"] = str(rev)
            return new
        raise apierrors.optimistic_lock(self.info.group, self.info.plural, name)

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
        for _ in range(_CONFLICT_RETRIES):
            obj, kv = await self._read(namespace, name)
            meta = obj["metadata"]
            self._check_preconditions(name, meta, opts)
            for hook in self.admission:
                await hook("DELETE", self, namespace, obj)
            finalizers = list(meta.get("finalizers") or [])
            policy = opts.propagation_policy
            if policy is None and opts.orphan_dependents:
                policy = "Orphan"
            if self.gc_enabled and policy == "Orphan" and "orphan" not in finalizers:
                finalizers.append("orphan")
            if self.gc_enabled and policy == "Foreground" and "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            if finalizers:
                if meta.get("deletionTimestamp") and finalizers == list(meta.get("finalizers") or []):
                    return obj, False  # already being deleted; nothing changes
                meta.setdefault("deletionTimestamp", now_rfc3339())
                meta.setdefault("deletionGracePeriodSeconds", 0)
                meta["finalizers"] = finalizers
                if self.strategy.tracks_generation:
                    meta["generation"] = int(meta.get("generation") or 1) + 1
                if opts.dry_run:
                    return obj, False
                try:
                    rev = await self.client.update(kv.key, self.codec.encode(obj), kv.mod_revision)
                except serrors.RevisionConflictError:
                    continue
                except serrors.StorageError as err:
                    raise self._err(err, name) from err
                meta["resourceVersion"] = str(rev)
                return obj, False
            if opts.dry_run:
                return obj, True
            try:
                await self.client.delete(kv.key, kv.mod_revision)
            except serrors.RevisionConflictError:
                continue
            except serrors.KeyNotFoundError as err:
                raise self._not_found(name) from err
            except serrors.StorageError as err:
                raise self._err(err, name) from err
            return obj, True
        raise apierrors.optimistic_lock(self.info.group, self.info.plural, name)

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
            deleted.append((out, orjson.dumps(out)))
        return ListResult(deleted, listed.revision)


def _parse_rv(rv: str) -> int:
    # Decimal ASCII digits only, as Go's ParseUint (Python's int() also takes "+1", " 1", "1_0").
    if not (rv.isascii() and rv.isdigit()):
        raise apierrors.bad_request(f'invalid resource version: "{rv}"')
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
