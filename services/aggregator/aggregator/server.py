"""The aggregator: the gateway every client talks to (``createAggregatorServer``, first in the chain).

It terminates TLS, authenticates the client, and forwards requests over pooled connections to
the delegation chain with the user in ``X-Remote-*`` headers (client-sent ones stripped).
Health, ``/version`` and ``/metrics`` are answered here. With ``--member-grpc`` the gateway
learns what each member serves from its gRPC control channel (control.py): the routing table is
rebuilt from every pushed discovery update, merged discovery is served from the latest pushed
documents, and a member's readiness is its gRPC health. Without it (a single plain HTTP member)
the routes are read once at start and discovery is fetched per request.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import ssl
from dataclasses import dataclass, field
from typing import Any

import orjson
from genericapi.apimachinery import goflag
from genericapi.apimachinery import serviceaccount as satoken
from genericapi.apimachinery.authorization import Authorizer
from genericapi.apimachinery.requestinfo import RequestInfo
from genericapi.handlers.body import MAX_BODY_BYTES
from genericapi.httpclient import client_errors
from genericapi.registry.rbacview import RBACView
from genericapi.server import metrics
from genericapi.server.apiserver import (
    add_etcd_tls_flags,
    add_identity_flags,
    add_tracing_flag,
    api_audiences,
    check_tracing_file,
    client_ssl_context,
    etcd_tls_from_args,
    load_tracing,
)
from genericapi.server.app import Dispatcher, build_app, run_forever, serve
from genericapi.server.certs import ensure_certificates
from genericapi.server.discovery import wants_aggregated
from genericapi.server.health import HealthChecks, PostStartHookStatus
from genericapi.server.leanhttp import LeanHttpProtocol
from genericapi.server.proxy import ReverseProxy
from genericapi.server.tracing import Tracing, inject_headers
from genericapi.storage.etcd import EtcdTLS
from starlette.types import Receive, Scope, Send

from . import apiservicemetrics, faults_http, filters, masterlease, merged, openapi_merge
from .accounts import ServiceAccountView
from .apiservices.layer import APIServiceLayer, LayerConfig
from .audit.options import AuditOptions, add_audit_flags, build_audit
from .auth import Authenticator, ServiceAccountTokens, load_public_keys, load_token_file
from .control import (
    ControlChannel,
    MemberDiscovery,
    MemberTargets,
    add_control_flags,
    client_credentials,
    parse_member_targets,
)
from .faults import FaultInjector
from .flowcontrol.wiring import PriorityAndFairness, add_flowcontrol_flags, validate_flags
from .metricsmerge import GatewayMetrics
from .routing import RoutingTable
from .secrets import SecretView
from .secrets import attach as attach_secrets

log = logging.getLogger(__name__)

@dataclass
class GatewayConfig:
    bind_address: str = "0.0.0.0"
    secure_port: int = 6443
    cert_dir: str = ".kubechain/pki"
    members: list[list[str]] = field(default_factory=list)
    token_auth_file: str = ""
    authorization_mode: str = "AlwaysAllow"
    #: ``--anonymous-auth`` (kube's default true): no credentials is system:anonymous, else a 401.
    anonymous_auth: bool = True
    #: ``--enable-bootstrap-token-auth`` (kube's default false; kubeadm turns it on).
    enable_bootstrap_token_auth: bool = False
    #: ``--encryption-provider-config``: how Secrets are encrypted at rest, for the token
    #: authenticators that read them ("": stored plain).
    encryption_provider_config: str = ""
    #: ``--service-account-key-file``: public keys of service account tokens ("" accepts none).
    service_account_key_file: str = ""
    service_account_issuer: str = satoken.DEFAULT_ISSUER
    api_audiences: list[str] = field(default_factory=list)
    discovery_refresh: float = 10.0
    #: The shared etcd (APIServices, Services, EndpointSlices); "" serves no APIServices.
    etcd_servers: str = ""
    etcd_prefix: str = "/registry"
    #: ``--etcd-cafile/--etcd-certfile/--etcd-keyfile``: TLS to etcd (empty: plain).
    etcd_tls: EtcdTLS = field(default_factory=EtcdTLS)
    apiservice_recheck: float = 10.0
    #: ``--audit-*``: kube's audit flags (no policy file: no auditing).
    audit: AuditOptions = field(default_factory=AuditOptions)
    #: API Priority and Fairness (kube's flags and defaults): seats = the two inflight limits summed.
    enable_priority_and_fairness: bool = True
    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
    request_timeout: float = 60.0
    #: Each member's gRPC control address(es), in ``members``' order; empty: no control channel.
    member_grpc: list[MemberTargets] = field(default_factory=list)
    #: kube's ``--tracing-config-file`` ("": no tracing).
    tracing_config_file: str = ""


class Gateway:
    """The ASGI app behind the FastAPI shell: auth, then the proxy."""

    def __init__(self, config: GatewayConfig, authenticator: Authenticator, backend_ssl: ssl.SSLContext | None,
                 tracing: Tracing | None = None):
        self.config = config
        self.authenticator = authenticator
        #: Headers every proxied request gets: the user, and with tracing the current span.
        self.header_source = self._user_headers if tracing is None else inject_headers(self._user_headers)
        self.table = RoutingTable(tuple(tuple(m) for m in config.members))
        # Credentials stop at the gateway (kube-apiserver drops Authorization once it has
        # authenticated a request); the backends learn the user from X-Remote-* only.
        #: Each user's X-Remote-* head lines, encoded once (without tracing: with it each request
        #: carries its own traceparent too).
        self._user_lines: dict[tuple[str, tuple[str, ...], str], bytes] = {}
        self.proxy = ReverseProxy(self._pick, ssl_context=backend_ssl, header_source=self.header_source,
                                  drop_headers=("authorization",), rotate=False, max_body_bytes=MAX_BODY_BYTES,
                                  head_source=self._user_head if tracing is None else None)
        self._turn = 0
        #: The members' discovery and health streams (set by ``run`` with ``--member-grpc``).
        self.control: ControlChannel | None = None
        self.openapi_v2 = openapi_merge.OpenAPIV2Cache(
            self._fetch_openapi_v2, self._extra_openapi_v2,
            services=lambda: self.apiservices.openapi if self.apiservices is not None else None)
        #: APIServices: our own group, service-backed routes, their discovery (set by ``run``).
        self.apiservices: APIServiceLayer | None = None
        #: Fault rules (faults.py): none until the admin adds some at faults_http.ADMIN_PATH.
        self.faults = FaultInjector()
        #: ``--authorization-mode``: None is AlwaysAllow (no check at all on the hot path).
        self.authorizer: Authorizer | None = None

    def _pick(self, scope: Scope) -> list[str]:
        """The member's replicas in the order to try them: those serving (per the control
        channel) in turn, then the others as a fallback (the proxy tries the next on failure)."""
        if not self.table.members:
            return []
        index = self.table.member_index(scope["path"])
        urls = self.table.members[index]
        if len(urls) == 1:  # one replica: tried whatever its health says (as below, without the lists)
            return list(urls)
        preferred, rest = self.control.split_serving(index, urls) if self.control is not None else (list(urls), [])
        if not preferred:  # none known to serve (yet): all take turns
            preferred, rest = rest, []
        self._turn += 1
        turn = self._turn % len(preferred) if preferred else 0
        return preferred[turn:] + preferred[:turn] + rest

    def _user_headers(self, scope: Scope) -> list[tuple[str, str]]:
        user = filters.user_of(scope)
        return user.headers() if user is not None else []

    def _user_head(self, scope: Scope) -> bytes:
        """``_user_headers`` as head lines, encoded once per user (a bounded cache)."""
        user = filters.user_of(scope)
        if user is None:
            return b""
        if user.extra:
            return "".join(f"{k}: {v}\r\n" for k, v in user.headers()).encode("latin-1")
        key = (user.name, user.groups, user.uid)
        lines = self._user_lines.get(key)
        if lines is None:
            lines = "".join(f"{k}: {v}\r\n" for k, v in user.headers()).encode("latin-1")
            if len(self._user_lines) >= 4096:
                self._user_lines.clear()
            self._user_lines[key] = lines
        return lines

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The API mux behind the handler chain (filters.py): the user is authenticated and
        authorized by now."""
        if scope["type"] != "http":
            return
        if faults_http.is_admin_path(scope["path"]):
            await faults_http.serve_admin(self.faults, scope, receive, send, scope[filters.USER])
            return
        info = filters.request_info_of(scope)
        if scope["method"] in ("GET", "HEAD") and (len(self.config.members) > 1 or self.control is not None) \
                and scope["path"].rstrip("/") in MERGED_PATHS and await self._merged(scope, send):
            return
        # Request metrics are recorded where kube records them: by the member serving the resource.
        plan = self.faults.plan(info, scope[filters.USER]) if self.faults.rules and info is not None else None
        if plan is not None:
            await faults_http.apply_plan(plan, scope, receive, send, self._forward)
        else:
            await self._forward(scope, receive, send)

    async def _forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.apiservices is None or not await self.apiservices.handle(scope, receive, send):
            await self.proxy(scope, receive, send)

    async def _merged(self, scope: Scope, send: Send) -> bool:
        """Answer ``/api``, ``/apis``, ``/openapi/v2`` or the ``/openapi/v3`` index merged from every
        member (see merged.py, openapi_merge.py); False leaves the request to the proxy."""
        path = scope["path"].rstrip("/")
        accept = next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"accept"), "")
        if path == "/openapi/v2":
            return await self._openapi_v2(scope, send, accept)
        streamed = self._streamed(path, accept)
        if streamed is not None:
            ctype, body = streamed
            if path == "/apis" and self.apiservices is not None:
                body = await self.apiservices.decorate_apis(ctype, body)
            await _send_body(scope, send, ctype, body)
            return True
        if path == "/api":
            return False  # core-api answers it (the legacy list carries its advertised address)
        answers = await merged.fetch_all(self.proxy, self.config.members, path, accept)
        if path == "/apis":
            result = merged.merge_apis(answers)
            if result is None:
                return False
            ctype, body, served = result
            if self.apiservices is not None:
                body = await self.apiservices.decorate_apis(ctype, body)
            by_gv: dict[tuple[str, str], int] = {("", v): i for (g, v), i in self.table.by_group_version.items()
                                                 if not g}
            for index, gvs in enumerate(served):
                for gv in gvs:
                    by_gv.setdefault(gv, index)
            if self.control is None:
                self.table = RoutingTable(self.table.members, by_gv)
        else:
            merged_index = merged.merge_openapi_index(answers)
            if merged_index is None:
                return False
            ctype, body = "application/json", merged_index
            if self.apiservices is not None:
                body = await self.apiservices.decorate_openapi_index(body)
        await _send_body(scope, send, ctype, body)
        return True

    def _streamed(self, path: str, accept: str) -> tuple[str, bytes] | None:
        """``/apis`` (either form) or aggregated ``/api`` from the members' pushed discovery;
        None when it must be fetched (no stream, or a member has not delivered yet)."""
        if self.control is None or path not in ("/api", "/apis"):
            return None
        doc = merged.streamed_aggregated(self.control.latest(), path)
        if doc is None:
            return None
        version = wants_aggregated(accept)
        if version:
            return merged.aggregated_response(doc, version)
        if path == "/api":
            return None
        return "application/json", orjson.dumps(merged.legacy_group_list(doc))

    async def _openapi_v2(self, scope: Scope, send: Send, accept: str) -> bool:
        key: tuple[Any, ...] | None = None
        if self.control is not None:
            latest = self.control.latest()
            if all(d is not None for d in latest):
                key = tuple((d.instance, d.generation) for d in latest if d is not None)
        doc = await self.openapi_v2.get(key)
        if doc is None:
            return False
        etag = f'"{doc.etag}"'.encode()
        if next((v for k, v in scope["headers"] if k.lower() == b"if-none-match"), b"") == etag:
            await send({"type": "http.response.start", "status": 304, "headers": [(b"etag", etag)]})
            await send({"type": "http.response.body", "body": b""})
            return True
        if openapi_merge.wants_protobuf(accept):
            ctype, body = openapi_merge.openapi.OPENAPI_V2_PROTOBUF_CONTENT_TYPE, await doc.protobuf()
        else:
            ctype, body = "application/json", doc.json
        await _send_body(scope, send, ctype, body, [(b"etag", etag)])
        return True

    async def _fetch_openapi_v2(self) -> list[bytes | None]:
        answers = await merged.fetch_all(self.proxy, self.config.members, "/openapi/v2", "application/json")
        return [a[2] if a is not None and a[0] == 200 else None for a in answers]

    async def _extra_openapi_v2(self) -> list[dict[str, Any]]:
        if self.apiservices is None:
            return []
        return [(await self.apiservices.server.openapi.encoded()).v2_doc]

    # -- learning which member serves what ------------------------------------------------
    def on_discovery(self, update: MemberDiscovery) -> None:
        """A member pushed its discovery: rebuild the routing table whole from every member's latest."""
        if self.control is None:
            return
        self.table = RoutingTable(self.table.members, self.control.routes())
        log.debug("discovery of %s (%s) generation %d: %d group-versions routed", update.member, update.address,
                  update.generation, len(self.table.by_group_version))

    async def refresh_routes(self) -> None:
        """Read every member's discovery once (only without a control channel)."""
        by_gv: dict[tuple[str, str], int] = {}
        for index, replicas in enumerate(self.config.members):
            for base in replicas:
                try:
                    gvs = await _served_group_versions(self.proxy, base)
                except client_errors(ValueError):
                    continue
                for gv in gvs:
                    by_gv.setdefault(gv, index)
                break
        self.table = RoutingTable(self.table.members, by_gv)

    async def start(self) -> None:
        if self.control is not None:
            await self.control.start()
        else:
            await self.refresh_routes()

    async def stop(self) -> None:
        if self.control is not None:
            await self.control.stop()
        await self.proxy.close()

    async def members_ready(self) -> bool:
        if self.control is not None:
            return all(self.control.serving(i) for i in range(len(self.control.members)))
        for replicas in self.config.members:
            ok = False
            for base in replicas:
                try:
                    status, _ = await self.proxy.fetch(base, "/readyz", limit_seconds=2)
                    ok = status == 200
                except client_errors():
                    ok = False
                if ok:
                    break
            if not ok:
                return False
        return True


#: Documents the gateway answers itself by merging its members' (see ``Gateway._merged``).
MERGED_PATHS = ("/api", "/apis", "/openapi/v2", "/openapi/v3")


async def _send_body(scope: Scope, send: Send, ctype: str, body: bytes,
                     extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", ctype.encode("latin-1")), (b"content-length", str(len(body)).encode()),
               (b"vary", b"Accept"), *(extra or [])]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})


def request_labels(scope: Scope, info: RequestInfo | None) -> metrics.RequestLabels:
    """A request's labels as kube's request metrics give them, from the gateway's RequestInfo (for
    what the gateway itself refuses, such as flow control's 429s: ``metrics.record_dropped``)."""
    if info is None:
        return metrics.non_resource_labels(scope["path"])
    ctype = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"content-type"), "")
    scope_label = metrics.request_scope(info.name, info.namespace, scope["method"]) \
        if info.is_resource_request else ""
    return (metrics.metric_verb(info, ctype), metrics.dry_run_label(scope.get("query_string", b"")),
            info.api_group, info.api_version, info.resource, info.subresource, scope_label, metrics.COMPONENT)


async def _served_group_versions(proxy: ReverseProxy, base: str) -> list[tuple[str, str]]:
    """Group-versions a member serves itself (not what it delegates), from its discovery."""
    out: list[tuple[str, str]] = []
    status, body = await proxy.fetch(base, "/api")
    if status == 200:
        doc: dict[str, Any] = orjson.loads(body)
        out.extend(("", v) for v in doc.get("versions") or [])
    status, body = await proxy.fetch(base, "/apis")
    if status == 200:
        doc = orjson.loads(body)
        for g in doc.get("groups") or []:
            out.extend((g["name"], v["version"]) for v in g.get("versions") or [])
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="kubechain-aggregator", description=__doc__)
    parser.add_argument("--bind-address", default="0.0.0.0")
    parser.add_argument("--secure-port", type=int, default=6443)
    parser.add_argument("--cert-dir", default=".kubechain/pki",
                        help="where credentials are read, or generated on first start when missing")
    parser.add_argument("--member", action="append", default=[],
                        help="a chain member, in order (core-api first); comma-separate replicas")
    parser.add_argument("--token-auth-file", default="")
    parser.add_argument("--anonymous-auth", type=goflag.parse_bool, nargs="?", const=True, default=True,
                        help="requests without credentials are system:anonymous in system:unauthenticated, "
                             "then authorized like any other (default true, as kube); false: a 401")
    parser.add_argument("--enable-bootstrap-token-auth", type=goflag.parse_bool, nargs="?", const=True, default=False,
                        help="bootstrap tokens (kube-system/bootstrap-token-<id> Secrets) authenticate "
                             "(needs --etcd-servers)")
    parser.add_argument("--encryption-provider-config", default="",
                        help="kube's EncryptionConfiguration the chain stores Secrets with (the token "
                             "authenticators read them)")
    add_identity_flags(parser)  # RBAC and the service account token checks need --etcd-servers
    parser.add_argument("--service-account-key-file", default="",
                        help="PEM public keys that verify service account tokens (needs --etcd-servers: the "
                             "account must still exist)")
    parser.add_argument("--discovery-refresh", type=float, default=10.0)
    parser.add_argument("--shutdown-delay", type=float, default=1.0)
    parser.add_argument("--etcd-servers", default="",
                        help="comma-separated etcd client URLs: APIServices are stored there (none served without)")
    parser.add_argument("--etcd-prefix", default="/registry", help="key prefix of every object in etcd")
    add_etcd_tls_flags(parser)
    parser.add_argument("--apiservice-recheck-interval", type=float, default=10.0,
                        help="seconds between availability checks of service-backed APIServices")
    parser.add_argument("--log-level", default="INFO")
    add_control_flags(parser)
    add_audit_flags(parser)
    add_tracing_flag(parser)
    add_flowcontrol_flags(parser)
    args = parser.parse_args(argv)
    if validate_flags(args):
        parser.error(validate_flags(args))
    try:
        member_grpc = parse_member_targets(args.member_grpc)
    except ValueError as err:
        parser.error(str(err))
    if member_grpc and len(member_grpc) != len(args.member):
        parser.error(f"--member-grpc names {len(member_grpc)} members but --member {len(args.member)}: "
                     "give both for every member, in the same order")
    logging.basicConfig(level=args.log_level, format="%(asctime)s aggregator %(levelname)s %(name)s: %(message)s")
    config = GatewayConfig(args.bind_address, args.secure_port, args.cert_dir,
                           [[u.strip().rstrip("/") for u in m.split(",") if u.strip()] for m in args.member],
                           args.token_auth_file, args.discovery_refresh)
    config.etcd_servers, config.etcd_prefix = args.etcd_servers, args.etcd_prefix
    config.etcd_tls = etcd_tls_from_args(args)
    config.apiservice_recheck = args.apiservice_recheck_interval
    config.member_grpc = member_grpc
    config.audit = AuditOptions.from_args(args)
    config.tracing_config_file = args.tracing_config_file
    check_tracing_file(args.tracing_config_file)
    config.authorization_mode = args.authorization_mode
    config.anonymous_auth = args.anonymous_auth
    config.enable_bootstrap_token_auth = args.enable_bootstrap_token_auth
    config.encryption_provider_config = args.encryption_provider_config
    config.service_account_key_file = args.service_account_key_file
    config.service_account_issuer = args.service_account_issuer
    config.api_audiences = api_audiences(args)
    config.enable_priority_and_fairness = args.enable_priority_and_fairness
    config.max_requests_inflight = args.max_requests_inflight
    config.max_mutating_requests_inflight = args.max_mutating_requests_inflight
    config.request_timeout = args.request_timeout
    run_forever(run(config, args.shutdown_delay))


async def run(config: GatewayConfig, shutdown_delay: float = 1.0) -> None:
    paths = ensure_certificates(config.cert_dir)
    any_tls = any(u.startswith("https") for m in config.members for u in m)
    backend_ssl = client_ssl_context(paths.ca, *paths.pair("front-proxy-client")) if any_tls else None
    tracing = load_tracing(config.tracing_config_file, "aggregator")
    authenticator = Authenticator(load_token_file(config.token_auth_file), anonymous=config.anonymous_auth)
    gateway = Gateway(config, authenticator, backend_ssl, tracing)
    if config.member_grpc:
        tcp = any(not a.startswith("unix:") for m in config.member_grpc for a in m.addresses)
        credentials = await client_credentials(paths.ca, *paths.pair("front-proxy-client")) if tcp else None
        first_member = config.member_grpc[0].name

        def on_accepting(member: str, _address: str) -> None:
            # The APIService controllers' lease and CRDs are read through the chain, from core-api:
            # they start the moment it accepts requests (its bootstrap hooks may still run).
            if member == first_member and gateway.apiservices is not None:
                gateway.apiservices.chain_accepting()

        def on_serving(member: str, address: str, serving: bool) -> None:
            if serving:
                on_accepting(member, address)

        gateway.control = ControlChannel(config.member_grpc, on_discovery=gateway.on_discovery,
                                         on_serving=on_serving, on_accepting=on_accepting, credentials=credentials)
    health = HealthChecks()
    health.add("backends", gateway.members_ready, liveness=False)
    aggregator_hooks: list[PostStartHookStatus] = []
    if config.etcd_servers:
        gateway.apiservices = APIServiceLayer(
            LayerConfig([e.strip() for e in config.etcd_servers.split(",") if e.strip()], config.etcd_prefix,
                        recheck_interval=config.apiservice_recheck, etcd_tls=config.etcd_tls),
            config.members[0] if config.members else [], backend_ssl, paths.pair("front-proxy-client"),
            gateway.header_source, lambda: list(gateway.table.by_group_version),
            wait_for_chain=gateway.control is not None)
        apiservices = gateway.apiservices
        if tracing is not None:
            apiservices.server.etcd.instruments.tracer = tracing.tracer
        # kube-aggregator's aggregator_unavailable_apiservice(_total): counted where the availability
        # controller writes (the leader), the gauge on every replica.
        apiservicemetrics.install(apiservices.informer, lambda: apiservices.availability is not None
                                  and apiservices.availability.running)

        async def autoregister_completion() -> bool:
            # Only once every member's discovery is in: what it serves is what must be registered.
            routed = set(gateway.table.by_group_version.values()) >= set(range(len(config.members)))
            return routed and await apiservices.registration_complete()

        # kube's names for what the aggregator starts (the availability controller checks local and
        # service-backed APIServices alike: kube's two hooks for it), then autoregister-completion.
        health.add("etcd", apiservices.server.health.live["etcd"])
        health.add("etcd-readiness", apiservices.server.health.live["etcd"], liveness=False)
        aggregator_hooks = [health.post_start_hook(name) for name in (
            "start-kube-aggregator-informers", "apiservice-status-local-available-controller",
            "apiservice-status-remote-available-controller", "apiservice-registration-controller",
            "apiservice-discovery-controller", "kube-apiserver-autoregistration")]
        health.add("autoregister-completion", autoregister_completion, liveness=False)
        aggregator_hooks += [health.post_start_hook(name) for name in (
            "apiservice-openapi-controller", "apiservice-openapiv3-controller")]
    rbac = None
    if config.authorization_mode == "RBAC":
        if gateway.apiservices is None:
            raise SystemExit("--authorization-mode=RBAC needs --etcd-servers (roles and bindings are read there)")
        rbac = RBACView(gateway.apiservices.server.etcd, config.etcd_prefix)
        gateway.authorizer = rbac.authorizer()
    accounts = None
    if config.service_account_key_file and gateway.apiservices is not None:
        accounts = ServiceAccountView(gateway.apiservices.server.etcd, config.etcd_prefix)
        gateway.authenticator.service_accounts = ServiceAccountTokens(
            load_public_keys(config.service_account_key_file), [config.service_account_issuer],
            config.api_audiences or [config.service_account_issuer], accounts.uid)
    if config.enable_bootstrap_token_auth and gateway.apiservices is None:
        raise SystemExit("--enable-bootstrap-token-auth needs --etcd-servers (the tokens are Secrets there)")
    secret_view = None
    if gateway.apiservices is not None and (accounts is not None or config.enable_bootstrap_token_auth):
        # Legacy service account tokens (always, as kube-apiserver with --service-account-key-file)
        # and bootstrap tokens are checked against their Secrets.
        secret_view = SecretView(gateway.apiservices.server.etcd, config.etcd_prefix,
                                 config.encryption_provider_config)
        attach_secrets(gateway.authenticator, secret_view, bootstrap=config.enable_bootstrap_token_auth)
    informers = [view for view in (rbac, accounts, secret_view) if view is not None]
    if informers:
        async def informers_synced() -> bool:  # kube's informer-sync readiness check
            return all(view.ready for view in informers)

        health.add("informer-sync", informers_synced, liveness=False)

    flow_control = None
    if config.enable_priority_and_fairness:  # each gateway replica enforces its own limits, as each kube-apiserver
        flow_control = PriorityAndFairness.build(
            gateway.apiservices.server.etcd if gateway.apiservices is not None else None, config.etcd_prefix,
            config.max_requests_inflight + config.max_mutating_requests_inflight, config.request_timeout,
            on_dropped=lambda s: metrics.record_dropped(request_labels(s, filters.request_info_of(s))))
        flow_control.install_health(health)

    # default/kubernetes lists this gateway
    lease = masterlease.for_gateway(config.etcd_servers, config.etcd_prefix, config.bind_address,
                                    config.secure_port, etcd_tls=config.etcd_tls)

    audit = build_audit(config.audit, always_allow=gateway.authorizer is None)

    async def start() -> None:
        if audit is not None:
            await audit.start()
        if gateway.apiservices is not None:
            await gateway.apiservices.start()
            for hook in aggregator_hooks:
                hook.finish()
        if accounts is not None:
            await accounts.start()
        if secret_view is not None:
            await secret_view.start()
        if rbac is not None:
            await rbac.start()
        if flow_control is not None:
            await flow_control.start()
        await gateway.start()
        if lease is not None:
            await lease.start()

    async def stop() -> None:
        if audit is not None:  # requests are done by now: what is queued is written
            await audit.stop()
        if accounts is not None:
            await accounts.stop()
        if secret_view is not None:
            await secret_view.stop()
        if rbac is not None:
            await rbac.stop()
        if flow_control is not None:
            await flow_control.stop()
        if lease is not None:
            await lease.stop()
        await gateway.stop()
        if gateway.apiservices is not None:
            await gateway.apiservices.stop()
        if tracing is not None:
            await asyncio.to_thread(tracing.shutdown)

    shell = build_app("aggregator", gateway, health, on_start=start, on_stop=stop)
    mux = GatewayMetrics(Dispatcher(shell, gateway), lambda: [u for m in config.members for u in m],
                         gateway.proxy.fetch)
    # Resource paths go from the chain straight to the gateway: the shell's dispatch and the
    # metrics of discovery and health (GatewayMetrics) never apply to them.
    app = filters.build_handler_chain(mux, gateway.authenticator, gateway.authorizer, flow_control,
                                      tracing=tracing,
                                      auditor=audit.auditor if audit is not None else None, api=gateway)
    cert, key = paths.pair("apiserver")
    ssl_options = {"ssl_certfile": cert, "ssl_keyfile": key, "ssl_ca_certs": paths.ca,
                   "ssl_cert_reqs": ssl.CERT_OPTIONAL}
    async def end_watches() -> None:
        gateway.proxy.end_streams()
        if gateway.apiservices is not None:
            gateway.apiservices.end_streams()

    await serve(app, health, host=config.bind_address, port=config.secure_port, ssl_options=ssl_options,
                shutdown_delay=shutdown_delay, http_protocol=LeanHttpProtocol, before_exit=end_watches)
