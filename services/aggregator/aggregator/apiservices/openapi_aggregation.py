"""OpenAPI of service-backed APIServices: kube-aggregator's OpenAPI v2 and v3 aggregation controllers.

Every gateway replica keeps, per service-backed APIService, the last document its backend served:

- v2: ``/openapi/v2`` fetched through the APIService's route (the proxy's TLS context and client
  certificate, the Service resolved at that moment) as ``system:aggregator``, with the previous
  ETag in ``If-None-Match`` (a 304 keeps the document; a backend that sends no ETag gets a local
  content hash, compared instead). Only the paths under ``/apis/<group>/<version>/`` and the
  definitions they use are kept (``openapi_specmerge.filter_by_path_prefixes``); the gateway merges
  the documents into its ``/openapi/v2`` in kube's order (``ordered_v2``).
- v3: the backend's ``/openapi/v3`` index entry for ``apis/<group>/<version>`` (its hashed URL);
  the gateway lists it in its own index and proxies requests for it to the backend.

Like kube, a failed download (backend unavailable, an error status, a body that is not a Swagger
document) is logged and the last good document is kept (kube's ``cached.LastSuccess``): an
unavailable backend does not take its schema out of the gateway's OpenAPI, deleting its
APIService does. Each APIService is refreshed when it is added, every ``interval`` seconds after a
success (kube: one minute), with exponential backoff from ``interval`` up to an hour after a
failure, and at once when its APIService changes after a failure (it became available).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from genericapi.apimachinery.serviceresolver import ServiceResolutionError, ServiceResolver

from .openapi_specmerge import filter_by_path_prefixes
from .routes import ServiceRoute, ServiceRoutes
from .types import name_of, priorities, service_ref, spec

log = logging.getLogger(__name__)

#: The identity kube-aggregator downloads specs as (no groups).
FETCH_HEADERS = {"X-Remote-User": "system:aggregator"}
#: kube marks an ETag it computed itself (the backend sent none) with this prefix; it is never sent back.
LOCAL_ETAG_PREFIX = '"6E8F849B434D4B98A569B9D7718876E9-'
DOWNLOAD_TIMEOUT = 60.0
MAX_BACKOFF = 3600.0


class SpecError(Exception):
    """A download that gave no usable document (the last good one stays)."""


@dataclass
class SpecState:
    name: str
    apiservice: dict[str, Any]
    #: The filtered ``/openapi/v2`` last downloaded, and its ETag.
    v2: dict[str, Any] | None = None
    v2_etag: str = ""
    #: The backend's ``/openapi/v3`` index entries for this group-version (None: never fetched or no v3).
    v3: dict[str, Any] | None = None
    failures: int = 0
    last_error: str = ""
    #: What a change must alter to warrant an immediate refetch (where the backend is, its TLS, availability).
    fingerprint: tuple[Any, ...] = field(default_factory=tuple)

    @property
    def group_version(self) -> tuple[str, str]:
        s = spec(self.apiservice)
        return str(s.get("group") or ""), str(s.get("version") or "")

    @property
    def v3_key(self) -> str:
        group, version = self.group_version
        return f"apis/{group}/{version}" if group else f"api/{version}"


def _fingerprint(obj: dict[str, Any], available: bool) -> tuple[Any, ...]:
    s = spec(obj)
    return (service_ref(obj), s.get("caBundle"), s.get("insecureSkipTLSVerify"), available)


def local_etag(data: bytes) -> str:
    return f'{LOCAL_ETAG_PREFIX}{hashlib.sha512(data).hexdigest().upper()}"'


def parse_swagger(body: bytes) -> dict[str, Any]:
    """A Swagger 2.0 document from a backend's body; SpecError when it is not one."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise SpecError(f"invalid JSON: {err}") from err
    if not isinstance(doc, dict):
        raise SpecError(f"expected a Swagger document (a JSON object), got {type(doc).__name__}")
    for section in ("paths", "definitions", "parameters"):
        value = doc.get(section)
        if value is not None and not isinstance(value, dict):
            raise SpecError(f"{section}: expected an object, got {type(value).__name__}")
        for key, item in (value or {}).items():
            if not isinstance(item, dict):
                raise SpecError(f"{section}.{key}: expected an object, got {type(item).__name__}")
    return doc


def _by_priority(a: SpecState, b: SpecState, group_priority: dict[str, int]) -> int:
    """kube's ``byPriority`` for service-backed specs: group priority descending, then name. Within a
    group kube compares an APIService's version priority with itself, so only names order them."""
    ga, gb = a.group_version[0], b.group_version[0]
    if ga != gb:
        pa, pb = group_priority.get(ga, 0), group_priority.get(gb, 0)
        if pa != pb:
            return -1 if pa > pb else 1
    return (a.name > b.name) - (a.name < b.name)


class OpenAPIAggregation:
    def __init__(self, routes: Callable[[], ServiceRoutes], resolver: ServiceResolver, interval: float = 60.0,
                 timeout: float = DOWNLOAD_TIMEOUT) -> None:
        self._routes = routes
        self._resolver = resolver
        self.interval = interval
        self.timeout = timeout
        self.states: dict[str, SpecState] = {}
        #: Bumped whenever the set of v2 documents changes (part of the merged document's cache key).
        self.generation = 0
        self._due: dict[str, float] = {}
        self._inflight: set[str] = set()
        self._again: set[str] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._jobs: set[asyncio.Task[None]] = set()

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._jobs) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._task = None

    # -- following APIServices ----------------------------------------------------------------
    def sync(self, apiservices: list[dict[str, Any]], routes: ServiceRoutes) -> None:
        """Track exactly the service-backed ``apiservices`` (called on every APIService change)."""
        available = {r.name: r.available for r in routes.by_group_version.values()}
        seen: set[str] = set()
        for obj in apiservices:
            if service_ref(obj) is None:
                continue
            name = name_of(obj)
            seen.add(name)
            fingerprint = _fingerprint(obj, available.get(name, False))
            state = self.states.get(name)
            if state is None:
                self.states[name] = SpecState(name, obj, fingerprint=fingerprint)
                self._schedule(name, 0.0)
                continue
            changed = fingerprint != state.fingerprint
            state.apiservice, state.fingerprint = obj, fingerprint
            if changed and (state.failures or state.v2 is None):
                self._schedule(name, 0.0)  # as kube: a failing APIService that changed is retried at once
        for name in [n for n in self.states if n not in seen]:
            gone = self.states.pop(name)
            self._due.pop(name, None)
            if gone.v2 is not None:
                self.generation += 1

    def _schedule(self, name: str, delay: float) -> None:
        if name in self._inflight:
            self._again.add(name)
            return
        when = time.monotonic() + delay
        if delay == 0.0 or name not in self._due or self._due[name] > when:
            self._due[name] = when
        self._wake.set()

    async def _run(self) -> None:
        while True:
            now = time.monotonic()
            for name in [n for n, t in self._due.items() if t <= now and n not in self._inflight]:
                del self._due[name]
                self._inflight.add(name)
                job = asyncio.get_running_loop().create_task(self._refresh_and_requeue(name))
                self._jobs.add(job)
                job.add_done_callback(self._jobs.discard)
            wait = min(self._due.values(), default=now + 3600.0) - now
            self._wake.clear()
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation
            # that arrives as the wake-up does, and stop() would then wait for this loop forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(wait, 0.05)):
                    await self._wake.wait()

    async def _refresh_and_requeue(self, name: str) -> None:
        try:
            ok = await self.refresh(name)
        except Exception:  # a bug must not stop this APIService's refreshes
            log.exception("loading OpenAPI spec for %r failed", name)
            state = self.states.get(name)
            if state is not None:
                state.failures += 1
            ok = False
        finally:
            self._inflight.discard(name)
        state = self.states.get(name)
        if state is None:
            self._again.discard(name)
            return
        if name in self._again:
            self._again.discard(name)
            self._schedule(name, 0.0)
        elif ok:
            self._schedule(name, self.interval)
        else:
            self._schedule(name, min(self.interval * 2 ** (state.failures - 1), MAX_BACKOFF))

    # -- downloading --------------------------------------------------------------------------
    async def refresh(self, name: str) -> bool:
        """Download one APIService's documents now; False (and the last good ones kept) on failure."""
        state = self.states.get(name)
        if state is None:
            return True
        errors: list[str] = []
        try:
            route, base = self._target(state)
        except SpecError as err:
            errors.append(str(err))
        else:
            # v2 and v3 are kube's two controllers: each keeps its own last good download.
            try:
                v2, etag = await self._download_v2(state, route, base)
                if self.states.get(name) is state and (etag != state.v2_etag or (v2 is None) != (state.v2 is None)):
                    state.v2, state.v2_etag = v2, etag
                    self.generation += 1
            except SpecError as err:
                errors.append(str(err))
            try:
                state.v3 = await self._download_v3(state, route, base)
            except SpecError as err:
                errors.append(str(err))
        if not errors:
            state.failures, state.last_error = 0, ""
            return True
        state.failures += 1
        state.last_error = "; ".join(errors)
        log.warning("loading OpenAPI spec for %r failed (attempt %d), keeping the last one: %s", name,
                    state.failures, state.last_error)
        return False

    def _target(self, state: SpecState) -> tuple[ServiceRoute, str]:
        route = self._routes().by_group_version.get(state.group_version)
        if route is None or route.name != state.name:
            raise SpecError("no route to the APIService")
        if not route.available:
            raise SpecError("service unavailable")  # what kube's proxy answers its downloader
        if route.proxy is None:
            raise SpecError(route.error)
        ref = route.ref
        try:
            return route, self._resolver.resolve(ref.namespace, ref.name, ref.port)
        except ServiceResolutionError as err:
            raise SpecError(f"service unavailable: {err.message}") from err

    async def _get(self, route: ServiceRoute, base: str, path: str,
                   headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        assert route.proxy is not None
        import aiohttp  # a service-backed APIService's first spec loads it, not the start

        try:
            async with route.proxy.session(base).get(
                    base + path, headers={**FETCH_HEADERS, "Accept": "application/json", **headers},
                    timeout=aiohttp.ClientTimeout(total=self.timeout)) as resp:
                return resp.status, {k.lower(): v for k, v in resp.headers.items()}, await resp.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise SpecError(f"GET {base}{path}: {err or type(err).__name__}") from err

    async def _download_v2(self, state: SpecState, route: ServiceRoute,
                           base: str) -> tuple[dict[str, Any] | None, str]:
        headers = {}
        if state.v2_etag and not state.v2_etag.startswith(LOCAL_ETAG_PREFIX):
            headers["If-None-Match"] = state.v2_etag
        status, resp_headers, body = await self._get(route, base, "/openapi/v2", headers)
        if status == 304 and state.v2_etag:
            return state.v2, state.v2_etag
        if status == 404:
            raise SpecError("the backend serves no /openapi/v2 (404)")
        if status != 200:
            raise SpecError(f"failed to retrieve openAPI spec, http error: ResponseCode: {status}, "
                            f"Body: {body[:512].decode('utf-8', 'replace')}")
        etag = resp_headers.get("etag", "")
        if not etag:
            etag = local_etag(body)
            if etag == state.v2_etag:
                return state.v2, etag
        group, version = state.group_version
        doc = await asyncio.to_thread(_parse_and_filter, body, f"/apis/{group}/{version}/")
        return doc, etag

    async def _download_v3(self, state: SpecState, route: ServiceRoute, base: str) -> dict[str, Any] | None:
        status, _h, body = await self._get(route, base, "/openapi/v3", {})
        if status == 404:
            return None  # a server without OpenAPI v3 (kube converts its v2; not done here)
        if status != 200:
            raise SpecError(f"failed to retrieve the OpenAPI v3 index, http error: ResponseCode: {status}")
        try:
            index = orjson.loads(body)
        except orjson.JSONDecodeError as err:
            raise SpecError(f"OpenAPI v3 index: invalid JSON: {err}") from err
        paths = index.get("paths") if isinstance(index, dict) else None
        if not isinstance(paths, dict):
            raise SpecError("OpenAPI v3 index: expected an object with paths")
        entry = paths.get(state.v3_key)
        if not isinstance(entry, dict) or not isinstance(entry.get("serverRelativeURL"), str):
            return {}
        return {state.v3_key: entry}

    # -- what the gateway serves ----------------------------------------------------------------
    def ordered_v2(self) -> list[dict[str, Any]]:
        """The v2 documents to merge, in kube-aggregator's order."""
        states = [s for s in self.states.values() if s.v2 is not None]
        group_priority: dict[str, int] = {}
        for s in states:
            group = s.group_version[0]
            group_priority[group] = max(group_priority.get(group, priorities(s.apiservice)[0]),
                                        priorities(s.apiservice)[0])
        states.sort(key=functools.cmp_to_key(lambda a, b: _by_priority(a, b, group_priority)))
        return [s.v2 for s in states if s.v2 is not None]

    def v3_entries(self) -> dict[str, Any]:
        """The gateway's ``/openapi/v3`` index entries of service-backed group-versions."""
        out: dict[str, Any] = {}
        for s in self.states.values():
            out.update(s.v3 or {})
        return out

    def serves_v3(self, key: str) -> bool:
        return any(key in (s.v3 or {}) for s in self.states.values())


def _parse_and_filter(body: bytes, prefix: str) -> dict[str, Any]:
    return filter_by_path_prefixes(parse_swagger(body), [prefix])
