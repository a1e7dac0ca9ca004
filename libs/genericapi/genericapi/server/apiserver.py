"""A generic API server: stores on one etcd, the API router, discovery, OpenAPI, health.

Each service builds one of these, installs its resources (a ``ResourceInfo`` and a strategy
each), adds post-start hooks (bootstrap, controllers) and runs it. This is the Python shape of
``GenericAPIServer`` + ``InstallAPIGroups`` + ``PrepareRun`` + ``Run`` from the seeds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery import k8sproto, user
from genericapi.apimachinery import serviceaccount as satoken
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.handlers.body import MAX_BODY_BYTES
from genericapi.registry.admissionchain import AdmissionChain
from genericapi.registry.codec import JsonCodec
from genericapi.registry.store import Store
from genericapi.registry.strategy import Strategy
from genericapi.storage.errors import StorageError
from genericapi.storage.etcd import EtcdClient, EtcdTLS

from . import encryptionconfig, metrics, tracing, tracingconfig
from .app import Dispatcher, build_app, serve
from .auditannotations import recorded as with_audit_annotations
from .control import ControlListen, ControlServer
from .discovery import DiscoveryDocuments, OrderFn
from .health import HealthChecks
from .leanhttp import LeanHttpProtocol
from .openapi import OpenAPIService
from .proxy import ReverseProxy
from .router import APIRouter
from .tls import ClientCertProtocol, peer_identity

log = logging.getLogger(__name__)

PostStartHook = Callable[["GenericAPIServer"], Awaitable[None]]


@dataclass
class ServerConfig:
    name: str
    etcd_endpoints: list[str]
    etcd_prefix: str = "/registry"
    bind_address: str = "127.0.0.1"
    port: int = 0
    delegate_urls: list[str] = field(default_factory=list)
    tls_cert_file: str = ""
    tls_key_file: str = ""
    client_ca_file: str = ""
    proxy_client_cert_file: str = ""
    proxy_client_key_file: str = ""
    bookmark_interval: float = 60.0
    shutdown_delay: float = 1.0
    watch_cache_size: int = 10_000
    unix_socket: str = ""
    #: ``host:port`` of the gateway, as clients reach it (published in ``/api``).
    advertise_address: str = ""
    #: Client certificate common names whose X-Remote-* headers are trusted (over TLS).
    requestheader_allowed_names: tuple[str, ...] = ("front-proxy-client",)
    #: The gRPC control channel to the gateway (discovery stream, health): a Unix socket, or a TCP
    #: port on ``bind_address`` (TLS with the serving cert and client CA when given). Neither: off.
    grpc_unix_socket: str = ""
    grpc_port: int = 0
    #: kube's ``--encryption-provider-config``: an EncryptionConfiguration file ("": nothing encrypted).
    encryption_provider_config: str = ""
    #: ``--etcd-cafile/--etcd-certfile/--etcd-keyfile``: TLS to etcd (empty: plain).
    etcd_tls: EtcdTLS = field(default_factory=EtcdTLS)
    #: kube's ``--tracing-config-file`` (tracing.py; "": no tracing).
    tracing_config_file: str = ""


def add_common_flags(parser: argparse.ArgumentParser, default_port: int) -> None:
    parser.add_argument("--etcd-servers", "--etcd-endpoints", dest="etcd_endpoints",
                        default="http://127.0.0.1:2379", help="comma-separated etcd client URLs")
    parser.add_argument("--etcd-prefix", default="/registry", help="key prefix of every object in etcd")
    add_etcd_tls_flags(parser)
    parser.add_argument("--bind-address", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=default_port)
    parser.add_argument("--bind-unix-socket", default="",
                        help="serve on this Unix socket instead of TCP (a link on one host: no TLS; "
                             "keep it in a directory only the gateway's user can enter)")
    parser.add_argument("--delegate-url", action="append", default=[],
                        help="next link of the delegation chain (repeat for replicas)")
    parser.add_argument("--tls-cert-file", default="")
    parser.add_argument("--tls-private-key-file", default="")
    parser.add_argument("--client-ca-file", default="",
                        help="require client certificates signed by this CA (the gateway's proxy client)")
    parser.add_argument("--proxy-client-cert-file", default="")
    parser.add_argument("--proxy-client-key-file", default="")
    parser.add_argument("--watch-bookmark-interval", type=float, default=60.0)
    parser.add_argument("--watch-cache-size", type=int, default=10_000,
                        help="events each resource's watch cache keeps for resuming watches")
    parser.add_argument("--shutdown-delay", type=float, default=1.0)
    parser.add_argument("--requestheader-allowed-names", default="front-proxy-client",
                        help="comma-separated client certificate names allowed to assert users in X-Remote-*")
    parser.add_argument("--advertise-address", default="127.0.0.1:6443",
                        help="host:port clients reach the API at (the gateway's), published in /api")
    parser.add_argument("--grpc-bind-unix-socket", default="",
                        help="serve the gRPC control channel (discovery stream, health) on this Unix socket")
    parser.add_argument("--grpc-port", type=int, default=0,
                        help="serve the gRPC control channel on this TCP port (0: not on TCP); TLS as the API")
    parser.add_argument("--encryption-provider-config", default="",
                        help="EncryptionConfiguration file: which resources are encrypted in etcd, and how")
    parser.add_argument("--log-level", default="INFO")
    add_tracing_flag(parser)


def add_tracing_flag(parser: argparse.ArgumentParser) -> None:
    """kube-apiserver's tracing flag (a TracingConfiguration file: endpoint, samplingRatePerMillion)."""
    parser.add_argument("--tracing-config-file", default="", help="File with apiserver tracing configuration.")


def load_tracing(path: str, component: str) -> tracing.Tracing | None:
    """The service's tracing, or exit at start as kube-apiserver does on a file it refuses."""
    check_tracing_file(path)
    return tracing.load(path, component)


def check_tracing_file(path: str) -> None:
    """Exit at once (kube's wording) when ``--tracing-config-file`` names a file kube would refuse."""
    if not path:
        return
    try:
        tracingconfig.load(path)
    except ValueError as err:
        raise SystemExit(f"Error: {err}") from None


def add_etcd_tls_flags(parser: argparse.ArgumentParser) -> None:
    """kube-apiserver's etcd client TLS flags."""
    parser.add_argument("--etcd-cafile", default="",
                        help="SSL Certificate Authority file used to secure etcd communication")
    parser.add_argument("--etcd-certfile", default="", help="SSL certification file used to secure etcd communication")
    parser.add_argument("--etcd-keyfile", default="", help="SSL key file used to secure etcd communication")


def etcd_tls_from_args(args: argparse.Namespace) -> EtcdTLS:
    return EtcdTLS(args.etcd_cafile, args.etcd_certfile, args.etcd_keyfile)


def add_authorization_mode_flag(parser: argparse.ArgumentParser) -> None:
    """``--authorization-mode`` (kube's name): every link takes it, extensions-api without the rest of
    the identity flags."""
    parser.add_argument("--authorization-mode", default="AlwaysAllow", choices=("AlwaysAllow", "RBAC"),
                        help="who may do what: everyone everything (kube-apiserver's own default), or RBAC "
                             "(system:masters may do anything)")


def add_identity_flags(parser: argparse.ArgumentParser) -> None:
    """The authorization and service-account-token flags the gateway and core-api share (kube's names)."""
    add_authorization_mode_flag(parser)
    parser.add_argument("--service-account-issuer", default=satoken.DEFAULT_ISSUER,
                        help="the iss claim service account tokens carry")
    parser.add_argument("--api-audiences", default="",
                        help="comma-separated audiences of service account tokens (default: the issuer)")


def api_audiences(args: argparse.Namespace) -> list[str]:
    """``--api-audiences``, defaulting to the issuer as kube-apiserver does."""
    return [a for a in args.api_audiences.split(",") if a] or [args.service_account_issuer]


def config_from_args(name: str, args: argparse.Namespace) -> ServerConfig:
    return ServerConfig(
        name=name,
        etcd_endpoints=[e.strip() for e in args.etcd_endpoints.split(",") if e.strip()],
        etcd_prefix=args.etcd_prefix,
        bind_address=args.bind_address,
        port=args.port,
        delegate_urls=list(args.delegate_url),
        tls_cert_file=args.tls_cert_file,
        tls_key_file=args.tls_private_key_file,
        client_ca_file=args.client_ca_file,
        proxy_client_cert_file=args.proxy_client_cert_file,
        proxy_client_key_file=args.proxy_client_key_file,
        bookmark_interval=args.watch_bookmark_interval,
        shutdown_delay=args.shutdown_delay,
        watch_cache_size=args.watch_cache_size,
        unix_socket=args.bind_unix_socket,
        advertise_address=args.advertise_address,
        requestheader_allowed_names=tuple(n.strip() for n in args.requestheader_allowed_names.split(",") if n.strip()),
        grpc_unix_socket=args.grpc_bind_unix_socket,
        grpc_port=args.grpc_port,
        encryption_provider_config=args.encryption_provider_config,
        etcd_tls=etcd_tls_from_args(args),
        tracing_config_file=args.tracing_config_file,
    )


def client_ssl_context(ca_file: str, cert_file: str, key_file: str) -> ssl.SSLContext | None:
    """TLS for calls to the next link: verify it with the CA, present our proxy client cert."""
    if not ca_file and not cert_file:
        return None
    ctx = ssl.create_default_context(cafile=ca_file or None)
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


class GenericAPIServer:
    def __init__(self, config: ServerConfig, order: OrderFn,
                 storage_hash: Callable[[ResourceInfo], str] = lambda _i: "",
                 definitions: dict[str, Any] | None = None) -> None:
        self.config = config
        self.etcd = EtcdClient(config.etcd_endpoints, tls=config.etcd_tls)
        self.tracing = load_tracing(config.tracing_config_file, config.name)
        if self.tracing is not None:
            self.etcd.instruments.tracer = self.tracing.tracer
        metrics.storage_objects_from(self._object_counts)
        self.encryption = encryptionconfig.load(config.encryption_provider_config) \
            if config.encryption_provider_config else None
        self.stores: list[Store] = []
        self.by_resource: dict[tuple[str, str], Store] = {}
        #: The admission chain of every store this server installs (built in the service's server.py).
        self.admission = AdmissionChain()
        self.post_start: list[PostStartHook] = []
        #: Run first on stop (controllers stop and release their lease before the stores go).
        self.pre_shutdown: list[PostStartHook] = []
        self.health = HealthChecks()
        self._order = order
        self._storage_hash = storage_hash
        self._definitions = definitions or {}
        self._started = asyncio.Event()
        #: Set when the drain ends the watches: new watches are refused (429, Retry-After) until exit.
        self.draining = False
        self._warm: asyncio.Future[object] | None = None
        #: Under ``run``, the control channel reports SERVING once the HTTP socket is bound and the
        #: post-start hooks are done, not at the end of ``start`` (uvicorn binds after the lifespan's
        #: start-up); the hooks then run after ``start`` returned, while the socket accepts.
        self._serve_once_bound = False
        self._socket_bound = False
        self._post_start_task: asyncio.Task[None] | None = None
        #: Why a post-start hook run in the background failed ("" while none did): ``run`` exits.
        self.post_start_failure = ""
        self._stop_run: asyncio.Event | None = None
        #: Under ``run``, the control channel's ACCEPTING waits for this event too (core-api: its
        #: system namespaces exist, so the gateway's first lease write in kube-system is admitted).
        self.accept_gate: asyncio.Event | None = None
        self._accept_task: asyncio.Task[None] | None = None
        self.delegate: ReverseProxy | None = None
        if config.delegate_urls:
            ctx = client_ssl_context(config.client_ca_file, config.proxy_client_cert_file,
                                     config.proxy_client_key_file) \
                if any(u.startswith("https") for u in config.delegate_urls) else None
            urls = [u.rstrip("/") for u in config.delegate_urls]
            self.delegate = ReverseProxy(lambda _scope: urls, ssl_context=ctx, max_body_bytes=MAX_BODY_BYTES,
                                         header_source=_pass_user_headers if self.tracing is None
                                         else tracing.inject_headers(_pass_user_headers))
        self.discovery = DiscoveryDocuments([], order, storage_hash)
        self.openapi = OpenAPIService([], self._definitions)
        self.router = APIRouter([], self.discovery, delegate=self.delegate,
                                bookmark_interval=config.bookmark_interval)
        # kube's names: etcd everywhere; etcd-readiness and informer-sync (here: every store's watch
        # cache and every post-start hook, named or not, has run) for readiness only.
        self.health.add("etcd", self._etcd_ok)
        self.health.add("etcd-readiness", self._etcd_ok, liveness=False)
        self.health.add("informer-sync", self._started_ok, liveness=False)
        self._informers = self.health.post_start_hook("generic-apiserver-start-informers")
        #: Called with the new documents at every ``publish`` (on the event loop; keep them cheap).
        self.publish_hooks: list[Callable[[DiscoveryDocuments], None]] = []
        self.control: ControlServer | None = None
        listen = ControlListen(config.grpc_unix_socket, config.bind_address, config.grpc_port,
                               config.tls_cert_file, config.tls_key_file, config.client_ca_file)
        if listen.enabled:
            self.control = ControlServer(config.name, listen)
            self.publish_hooks.append(self.control.feed.update)

    async def _etcd_ok(self) -> bool:
        try:
            await asyncio.wait_for(self.etcd.current_revision(), 2.0)
            return True
        except (StorageError, TimeoutError):
            return False

    async def _started_ok(self) -> bool:
        return self._started.is_set()

    def add_post_start_hook(self, hook: PostStartHook, *names: str) -> None:
        """Run ``hook`` after the stores started (in the order added), with kube's named checks
        ``poststarthook/<name>`` failing until it returned (several names: kube has one hook per
        name where one hook here does their work)."""
        statuses = [self.health.post_start_hook(name) for name in names]

        async def run(server: GenericAPIServer) -> None:
            await hook(server)
            for status in statuses:
                status.finish()

        self.post_start.append(run)

    def install(self, info: ResourceInfo, strategy: Strategy, key_prefix: str,
                codec: JsonCodec | None = None) -> Store:
        return self.add_store(Store(info, strategy, self.etcd, f"{self.config.etcd_prefix.rstrip('/')}/{key_prefix}",
                                    self.admission, watch_cache_size=self.config.watch_cache_size, codec=codec))

    def encrypt_store(self, store: Store) -> None:
        """Give the store's keys the encryption providers ``--encryption-provider-config`` names for
        its resource (before the store first reads: its watch cache decrypts from the start)."""
        if self.encryption is None:
            return
        transformers = self.encryption.transformers_for(store.info.group, store.info.plural)
        if transformers is not None:
            self.etcd.set_transformer(store.scope_prefix(""), transformers)

    def add_store(self, store: Store) -> Store:
        """Serve a store built elsewhere (a resource with its own Store subclass)."""
        self.encrypt_store(store)
        self.etcd.instruments.name_resource(store.scope_prefix(""), _group_resource(store))
        self.stores.append(store)
        self.by_resource[(store.info.group, store.info.plural)] = store
        return store

    def remove_store(self, store: Store) -> None:
        """Stop routing to a store at the next ``publish`` (resources installed at run time, e.g.
        a deleted CRD's); the caller stops the store once it is unpublished."""
        self.stores = [s for s in self.stores if s is not store]
        key = (store.info.group, store.info.plural)
        if self.by_resource.get(key) is store:
            del self.by_resource[key]
            for other in self.stores:
                if (other.info.group, other.info.plural) == key:
                    self.by_resource[key] = other

    def set_definitions(self, definitions: dict[str, Any]) -> None:
        """Replace the OpenAPI definitions (a new mapping; published at the next ``publish``)."""
        self._definitions = definitions

    def publish(self) -> None:
        """Make the installed stores visible to routing, discovery and OpenAPI, at once."""
        infos = [s.info for s in self.stores]
        self.discovery = DiscoveryDocuments(infos, self._order, self._storage_hash,
                                            server_address=self.config.advertise_address)
        self.openapi.update(infos, self._definitions)
        self.router.set_stores(list(self.stores), self.discovery)
        for hook in self.publish_hooks:
            hook(self.discovery)

    async def start(self) -> None:
        await self._wait_for_etcd()
        self.publish()
        if self.control is not None:  # NOT_SERVING until the end: the gateway connects meanwhile
            await self.control.bind()
        await asyncio.gather(*(s.start() for s in self.stores))
        self._informers.finish()
        if self._serve_once_bound:
            # kube-apiserver's order: the server listens once its storage is up and runs the
            # post-start hooks while it serves (each hook's readyz check, informer-sync and the
            # control channel's SERVING wait for them). The gateway can take its lease and read
            # CRDs through this member while the bootstrap hooks write (issue 15, cold start).
            self._post_start_task = asyncio.get_running_loop().create_task(
                self._post_start_in_background(), name=f"{self.config.name} post-start hooks")
            return
        await self._post_start()

    async def _post_start(self) -> None:
        for hook in self.post_start:
            await hook(self)
        self._started.set()
        await self._report_serving()
        # Then, off the way to ready (issue 15, cold start: a thread started before SERVING held the
        # GIL while the loop reported it): the OpenAPI documents, and the protobuf descriptors off
        # the event loop now, not on the first typed request.
        asyncio.get_running_loop().create_task(self.openapi.warm())
        self._warm = asyncio.get_running_loop().run_in_executor(None, k8sproto.registry)
        log.info("%s ready", self.config.name)

    async def _post_start_in_background(self) -> None:
        try:
            await self._post_start()
        except asyncio.CancelledError:
            raise
        except Exception as err:
            # kube-apiserver: klog.Fatalf("PostStartHook %q failed: %v"): the process exits.
            log.critical("%s: a post-start hook failed: %r", self.config.name, err, exc_info=True)
            self.post_start_failure = repr(err)
            if self._stop_run is not None:
                self._stop_run.set()

    async def _report_serving(self) -> None:
        """SERVING on the control channel once started and, under ``run``, the socket accepts."""
        if self.control is not None and self._started.is_set() and (self._socket_bound or not self._serve_once_bound):
            await self.control.serve()

    async def _bound(self) -> None:
        """``run``'s socket is bound (after ``start``): the gateway hears the member accept requests,
        and SERVING once the post-start hooks are done too."""
        self._socket_bound = True
        if self.control is not None:
            gate = self.accept_gate
            if gate is None or gate.is_set():
                await self.control.accepting()
            else:
                self._accept_task = asyncio.get_running_loop().create_task(self._accepting_after(gate))
        await self._report_serving()

    async def _accepting_after(self, gate: asyncio.Event) -> None:
        await gate.wait()
        if self.control is not None:
            await self.control.accepting()

    async def _wait_for_etcd(self) -> None:
        delay = 0.05
        for _ in range(200):
            try:
                await self.etcd.current_revision()
                return
            except StorageError as err:
                log.info("waiting for etcd: %s", err)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        raise RuntimeError("etcd did not become available")

    async def stop(self) -> None:
        for task in (self._post_start_task, self._accept_task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._post_start_task = self._accept_task = None
        for hook in self.pre_shutdown:
            try:
                await hook(self)
            except Exception:
                log.exception("pre-shutdown hook failed")
        if self.control is not None:
            await self.control.stop()
        await asyncio.gather(*(s.stop() for s in self.stores), return_exceptions=True)
        if self.delegate is not None:
            await self.delegate.close()
        await self.etcd.close()
        metrics.storage_objects_from(self._object_counts, remove=True)
        if self.tracing is not None:
            await asyncio.to_thread(self.tracing.shutdown)

    def _object_counts(self) -> list[tuple[str, int]]:
        """``apiserver_storage_objects``: each served resource's count, from its watch cache."""
        return [(_group_resource(s), s.cache.object_count) for s in self.stores if s.cache.ready]

    async def end_watches(self) -> None:
        self.draining = True
        if self.control is not None:
            await self.control.drain()  # the gateway hears NOT_SERVING as this server stops accepting
        for store in self.stores:
            store.cache.end_watchers()
        if self.delegate is not None:
            self.delegate.end_streams()  # watches this link relays to the next one end cleanly too

    def app(self) -> Dispatcher:
        def extra(app: Starlette) -> None:
            app.add_route("/openapi/v2", self.openapi.v2, methods=["GET"], include_in_schema=False)
            app.add_route("/openapi/v3", self.openapi.v3_index, methods=["GET"], include_in_schema=False)
            app.add_route("/openapi/v3/{path:path}", self.openapi.v3, methods=["GET"], include_in_schema=False)

        api: ASGIApp = _Lazy(self)
        if self.tracing is not None:
            api = tracing.ServerSpans(api, self.tracing, tracing.trust_link)
        shell = build_app(self.config.name, api, self.health, on_start=self.start, on_stop=self.stop,
                          extra=extra)
        return Dispatcher(shell, api)

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Serve until SIGTERM (or ``stop`` is set); the control channel reports SERVING only once
        the HTTP socket accepts connections."""
        ssl_options: dict[str, Any] = {}
        if self.config.unix_socket:
            ssl_options = {"uds": self.config.unix_socket}
        elif self.config.tls_cert_file:
            ssl_options = {"ssl_certfile": self.config.tls_cert_file, "ssl_keyfile": self.config.tls_key_file}
            if self.config.client_ca_file:
                ssl_options.update(ssl_ca_certs=self.config.client_ca_file, ssl_cert_reqs=ssl.CERT_REQUIRED)
        self._serve_once_bound = True
        self._stop_run = stop if stop is not None else asyncio.Event()
        await serve(self.app(), self.health, host=self.config.bind_address, port=self.config.port,
                    ssl_options=ssl_options, shutdown_delay=self.config.shutdown_delay,
                    http_protocol=ClientCertProtocol if "ssl_certfile" in ssl_options else LeanHttpProtocol,
                    before_exit=self.end_watches, after_startup=self._bound, stop=self._stop_run)
        if self.post_start_failure:
            raise SystemExit(255)  # as kube-apiserver's Fatalf: a supervisor starts it again


class _Lazy:
    """The router as mounted; indirection so ``publish`` can swap what it serves.

    Over TLS it also enforces whose ``X-Remote-*`` headers count: only a client certificate
    whose common name is an allowed front proxy (the gateway) may assert a user, as
    kube-apiserver's request-header authenticator does; anyone else's are dropped.
    """

    def __init__(self, server: GenericAPIServer) -> None:
        self._server = server
        self._allowed = frozenset(server.config.requestheader_allowed_names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._server.draining and _is_watch(scope):
            # A client reconnecting its watch while this server drains (as informers do at once)
            # is asked to come back later, as kube-apiserver's retry-after filter does, instead of
            # holding the drain open until its deadline.
            await _refuse_while_draining(send)
            return
        if scope["type"] == "http":
            identity = peer_identity(scope)
            if identity is not None and identity[0] not in self._allowed:
                scope["headers"] = [(k, v) for k, v in scope["headers"] if not k.lower().startswith(b"x-remote-")]
            token = user.current_user.set(user.from_headers(scope["headers"]))
            try:
                await with_audit_annotations(self._server.router, scope, receive, send)
            finally:
                user.current_user.reset(token)
            return
        await self._server.router(scope, receive, send)


def _is_watch(scope: Scope) -> bool:
    if "/watch/" in scope["path"]:
        return True
    query = scope.get("query_string", b"")
    return any(part in (b"watch=1", b"watch=true", b"watch=True") for part in query.split(b"&"))


async def _refuse_while_draining(send: Send) -> None:
    body = apierrors.too_many_requests("The apiserver is shutting down, please try again later.", 5).body()
    await send({"type": "http.response.start", "status": 429,
                "headers": [(b"content-type", b"application/json"), (b"retry-after", b"5"),
                            (b"connection", b"close"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _group_resource(store: Store) -> str:
    """kube's GroupResource string (``pods``, ``deployments.apps``): its metrics' resource label."""
    info = store.info
    return f"{info.plural}.{info.group}" if info.group else info.plural


def _pass_user_headers(scope: Scope) -> list[tuple[str, str]]:
    """Delegation keeps the authenticated user the gateway sent (this hop is trusted)."""
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]
            if k.decode("latin-1").lower().startswith("x-remote-")]

