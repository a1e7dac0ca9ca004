"""Everything APIService-related the gateway runs, behind one object (``APIServiceLayer``).

An embedded ``GenericAPIServer`` serves ``apiregistration.k8s.io/v1`` from the shared etcd with
the shared machinery (verbs, watch, status, tables, OpenAPI). Every replica follows APIServices
with an informer and rebuilds the service-backed routes from them (``routes``), and follows
Services/EndpointSlices (``ClusterServiceView``) to resolve them. The leader of the
``kube-system/kube-aggregator`` Lease runs the auto-registration and availability controllers.
Every replica also keeps the OpenAPI documents of service-backed APIServices (``openapi_aggregation``):
merged into the gateway's ``/openapi/v2``, listed in its ``/openapi/v3`` index and proxied from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from genericapi.apimachinery import user as request_user
from genericapi.apimachinery.apipriorities import GROUP_PRIORITIES
from genericapi.apimachinery.resources import STANDARD_VERBS
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.apimachinery.serviceresolver import ServiceResolver
from genericapi.apimachinery.user import UserInfo
from genericapi.controllers import (
    APIResource,
    ControllerManager,
    HTTPClient,
    Informer,
    LocalClient,
)
from genericapi.controllers.transport import Transport
from genericapi.registry.serviceview import ClusterServiceView
from genericapi.server.apiserver import GenericAPIServer, ServerConfig
from genericapi.server.discovery import aggregated_resource
from genericapi.server.proxy import ReverseProxy
from genericapi.storage.etcd import EtcdTLS
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from ..filters import user_of
from . import discovery
from .autoregister import AutoRegisterController, BuiltinSource
from .availability import AvailabilityController, HTTPProber
from .openapi_aggregation import OpenAPIAggregation
from .routes import HeaderSource, ServiceRoutes, build_routes, proxy_request
from .strategy import APIServiceStrategy
from .tls import probe_context
from .types import GROUP, INFO, KEY_PREFIX, VERSION, api_service_name, is_available

log = logging.getLogger(__name__)

LEASE_NAME = "kube-aggregator"
AGGREGATOR_USER = UserInfo("system:kube-aggregator", ("system:masters", "system:authenticated"))
_OWN_PREFIX = f"/apis/{GROUP}"
_OWN_OPENAPI = f"/openapi/v3/apis/{GROUP}/{VERSION}"
_LEASES = APIResource("coordination.k8s.io", "v1", "leases", "Lease", True, frozenset(STANDARD_VERBS))
#: kube's ``autoRegistrationController.Run(5, ...)``.
AUTOREGISTER_WORKERS = 5
#: With a control channel, the longest the controllers wait for the first chain member to accept
#: requests before they compete for the lease anyway (a member whose control stream cannot be had).
CHAIN_WAIT = 5.0
_CRDS = APIResource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
                    False, frozenset(STANDARD_VERBS), frozenset({"status"}))


@dataclass
class LayerConfig:
    etcd_endpoints: list[str]
    etcd_prefix: str = "/registry"
    watch_cache_size: int = 10_000
    #: Seconds between availability rechecks of service-backed APIServices (kube: 30).
    recheck_interval: float = 10.0
    controllers: bool = True
    #: Seconds between downloads of a service-backed APIService's OpenAPI after a success (kube: 60).
    openapi_refresh: float = 60.0
    #: TLS to etcd (``--etcd-cafile/--etcd-certfile/--etcd-keyfile``); empty: plain.
    etcd_tls: EtcdTLS = field(default_factory=EtcdTLS)


class APIServiceLayer:
    def __init__(self, config: LayerConfig, chain_urls: Sequence[str], chain_ssl: ssl.SSLContext | None,
                 proxy_client_cert: tuple[str, str] | None, header_source: HeaderSource,
                 builtins: BuiltinSource, wait_for_chain: bool = False) -> None:
        schemas = SchemaCatalog.load()
        self.server = GenericAPIServer(
            ServerConfig("aggregator", config.etcd_endpoints, config.etcd_prefix,
                         watch_cache_size=config.watch_cache_size, etcd_tls=config.etcd_tls),
            lambda _g, _v: (0,), storage_hash=lambda info: info.extra.get("storageVersionHash", ""),
            definitions=schemas.definitions)
        self.store = self.server.install(INFO, APIServiceStrategy(INFO, schemas), KEY_PREFIX)
        self.client = LocalClient(self.store, AGGREGATOR_USER)
        self.informer = Informer(self.client)
        self.view = ClusterServiceView(self.server.etcd, config.etcd_prefix)
        self.resolver = ServiceResolver(self.view)
        self.routes = ServiceRoutes()
        self.openapi = OpenAPIAggregation(lambda: self.routes, self.resolver, interval=config.openapi_refresh)
        self._cert = proxy_client_cert
        self._builtins = builtins
        self._registered = False
        self._header_source = header_source
        self._fetched: dict[str, dict[str, Any]] = {}
        self._rebuild_pending = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._prober = HTTPProber(probe_context(proxy_client_cert))
        self.availability: AvailabilityController | None = None
        self.manager: ControllerManager | None = None
        self._transport: Transport | None = None
        #: Set by ``chain_accepting``; with ``wait_for_chain`` the controllers start on it (see ``start``).
        self._chain_up = asyncio.Event()
        self._wait_for_chain = wait_for_chain
        self._manager_gate: asyncio.Task[None] | None = None
        if config.controllers and chain_urls:
            self._transport = Transport(chain_urls, chain_ssl, user=AGGREGATOR_USER)
            self.manager = ControllerManager(HTTPClient(self._transport, _LEASES), LEASE_NAME)
            crds = Informer(HTTPClient(self._transport, _CRDS))
            # kube-apiserver runs its autoregister controller with 5 workers: the ~20 built-in
            # APIServices of a fresh etcd are created 5 at a time (readiness waits for them).
            self.manager.add(AutoRegisterController(self.client, self.informer, crds, builtins), AUTOREGISTER_WORKERS)
            self.availability = AvailabilityController(self.client, self.informer, self.resolver, self._prober,
                                                       view_synced=lambda: self.view.ready,
                                                       interval=config.recheck_interval)
            self.view.subscribe(self.availability.service_changed)
            self.manager.add(self.availability, 2)
        self.informer.add_handler(lambda _t, _o, _p: self._schedule_rebuild())

    # -- lifecycle --------------------------------------------------------------------------
    async def registration_complete(self) -> bool:
        """kube's ``autoregister-completion`` readiness: every built-in group-version the members
        serve has its local APIService, Available. Once true it stays true (a boot-sequence check),
        so a client that waited for ``/readyz`` finds every APIService listed."""
        if self._registered:
            return True
        wanted = [api_service_name(g, v) for g, v in self._builtins() if (g, v) in GROUP_PRIORITIES]
        if not wanted or not self.informer.synced:
            return False
        for name in wanted:
            obj = self.informer.get("", name)
            if obj is None or not is_available(obj):
                return False
        self._registered = True
        return True

    async def start(self) -> None:
        await self.server.start()
        await self.view.start()
        await self.informer.start()
        self.openapi.start()
        if self.manager is not None:
            if self._wait_for_chain:
                self._manager_gate = asyncio.get_running_loop().create_task(self._start_manager_once_chain_serves())
            else:
                await self.manager.start()

    def chain_accepting(self) -> None:
        """The first chain member accepts requests (its control channel says so): the lease and the
        CRDs, read through the chain, can be had now. The leader election starts at once instead of
        retrying with a growing backoff while core-api starts (its retries had reached 0.4-1.6 s
        by the time core-api served: issue 15's cold start waited that long for autoregistration)."""
        self._chain_up.set()

    async def _start_manager_once_chain_serves(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._chain_up.wait(), CHAIN_WAIT)
        if self.manager is not None:
            await self.manager.start()

    async def stop(self) -> None:
        gate, self._manager_gate = self._manager_gate, None
        if gate is not None:
            gate.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gate
        if self.manager is not None:
            await self.manager.stop()
        await self.informer.stop()
        await self.openapi.stop()
        for task in list(self._tasks):
            task.cancel()
        await self.view.stop()
        await self.server.stop()
        await self._prober.close()
        if self._transport is not None:
            await self._transport.close()
        for route in self.routes.by_group_version.values():
            if route.proxy is not None:
                await route.proxy.close()

    def end_streams(self) -> None:
        self.store.cache.end_watchers()
        for route in self.routes.by_group_version.values():
            if route.proxy is not None:
                route.proxy.end_streams()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- routes -----------------------------------------------------------------------------
    def _schedule_rebuild(self) -> None:
        if not self._rebuild_pending:
            self._rebuild_pending = True
            asyncio.get_running_loop().call_soon(self._rebuild)

    def _rebuild(self) -> None:
        self._rebuild_pending = False
        table, dropped = build_routes(self.informer.items(), self.routes, self._cert, self._header_source)
        self.routes = table
        self.openapi.sync(self.informer.items(), table)
        for proxy in dropped:
            self._spawn(_close_later(proxy))
        names = {r.name for r in table.by_group_version.values()}
        self._fetched = {k: v for k, v in self._fetched.items() if k in names}
        self._spawn(self.refresh_discovery())

    async def refresh_discovery(self, only_missing: bool = False) -> None:
        """Fetch the discovery of every available service-backed group-version."""
        todo = []
        for route in self.routes.by_group_version.values():
            if not route.available or (only_missing and route.name in self._fetched):
                continue
            try:
                todo.append((route, self.resolver.resolve(route.ref.namespace, route.ref.name, route.ref.port)))
            except Exception as err:
                log.debug("not fetching discovery of %s: %s", route.name, err)
        if todo:
            self._fetched.update(await discovery.fetch_all(todo))

    # -- requests ---------------------------------------------------------------------------
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Serve the request if it is ours (our group, a service-backed one); False otherwise."""
        path: str = scope["path"]
        if path == _OWN_PREFIX or path.startswith(_OWN_PREFIX + "/"):
            await self._serve_own(scope, receive, send)
            return True
        if path.rstrip("/") == _OWN_OPENAPI and scope["method"] in ("GET", "HEAD"):
            scope = {**scope, "path_params": {"path": f"apis/{GROUP}/{VERSION}"}}
            response = await self.server.openapi.v3(Request(scope, receive))
            await response(scope, receive, send)
            return True
        route = self.routes.route_for(path)
        if route is None and path.startswith("/openapi/v3/") and scope["method"] in ("GET", "HEAD"):
            key = path[len("/openapi/v3/"):].strip("/")
            if self.openapi.serves_v3(key):
                route = self.routes.route_for("/" + key)  # the backend serves its own v3 documents
        if route is not None:
            recheck = self.availability.recheck if self.availability is not None else None
            await proxy_request(route, self.resolver, scope, receive, send, recheck)
            return True
        parts = path.rstrip("/").split("/")
        if len(parts) == 3 and parts[1] == "apis" and scope["method"] in ("GET", "HEAD") \
                and any(g == parts[2] for g, _v in self.routes.by_group_version):
            body = discovery.group_document(parts[2], self.informer.items())
            if body is not None:
                await _send_json(send, body, scope["method"] == "HEAD")
                return True
        return False

    async def _serve_own(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = request_user.current_user.set(user_of(scope))
        try:
            await self.server.router(scope, receive, send)
        finally:
            request_user.current_user.reset(token)

    async def decorate_apis(self, content_type: str, body: bytes) -> bytes:
        """The merged ``/apis`` of the members, with APIService groups and order (see discovery)."""
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            return body
        apiservices = self.informer.items()
        if doc.get("kind") == "APIGroupDiscoveryList":
            if any(r.available and r.name not in self._fetched for r in self.routes.by_group_version.values()):
                await self.refresh_discovery(only_missing=True)
            own = {"metadata": {"creationTimestamp": None, "name": GROUP},
                   "versions": [{"version": VERSION, "resources": [aggregated_resource(INFO)],
                                 "freshness": "Current"}]}
            doc = discovery.aggregated_apis(doc, own, apiservices, self.routes, self._fetched)
        elif doc.get("kind") == "APIGroupList":
            versions = [{"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}]
            own = {"name": GROUP, "versions": versions, "preferredVersion": versions[0]}
            doc = discovery.legacy_apis(doc, own, apiservices)  # available or not, as kube lists them
        return orjson.dumps(doc)

    async def decorate_openapi_index(self, body: bytes) -> bytes:
        """The members' ``/openapi/v3`` index with our group-version's document and the service-backed ones added."""
        try:
            doc = orjson.loads(body)
            own = orjson.loads((await self.server.openapi.encoded()).v3_index)
        except orjson.JSONDecodeError:
            return body
        paths = {**(doc.get("paths") or {}), **{k: v for k, v in (own.get("paths") or {}).items()
                                               if k.startswith(f"apis/{GROUP}/")}}
        paths.update(self.openapi.v3_entries())  # service-backed group-versions: requests go to their backend
        return orjson.dumps({**doc, "paths": dict(sorted(paths.items()))})


async def _close_later(proxy: ReverseProxy) -> None:
    await asyncio.sleep(5)  # let requests already on it finish
    with contextlib.suppress(Exception):
        await proxy.close()


async def _send_json(send: Send, body: bytes, head: bool) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": b"" if head else body})


__all__ = ["APIServiceLayer", "LayerConfig"]
