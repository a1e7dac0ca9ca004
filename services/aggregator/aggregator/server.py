"""The aggregator: the gateway every client talks to (``createAggregatorServer``, first in the chain).

It terminates TLS, authenticates the client, and forwards requests over pooled connections to
the delegation chain with the user in ``X-Remote-*`` headers (client-sent ones stripped).
Health, ``/version`` and ``/metrics`` are answered here; APIService objects, discovery merging
and the gRPC control channel grow here in later issues.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import ssl
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from genericapi.apimachinery import errors as apierrors
from genericapi.server import metrics
from genericapi.server.apiserver import client_ssl_context
from genericapi.server.app import Dispatcher, build_app, run_forever, serve
from genericapi.server.certs import ensure_certificates
from genericapi.server.health import HealthChecks
from genericapi.server.proxy import ReverseProxy
from genericapi.server.tls import ClientCertProtocol
from starlette.types import Message, Receive, Scope, Send

from . import merged
from .apiservices.layer import APIServiceLayer, LayerConfig
from .auth import Authenticator, load_token_file
from .routing import RoutingTable

log = logging.getLogger(__name__)

#: Paths anyone may read without credentials, as kube-apiserver's system:public-info-viewer.
PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")


@dataclass
class GatewayConfig:
    bind_address: str = "0.0.0.0"
    secure_port: int = 6443
    cert_dir: str = ".kubechain/pki"
    members: list[list[str]] = field(default_factory=list)
    token_auth_file: str = ""
    discovery_refresh: float = 10.0
    #: The shared etcd (APIServices, Services, EndpointSlices); "" serves no APIServices.
    etcd_servers: str = ""
    etcd_prefix: str = "/registry"
    apiservice_recheck: float = 10.0


class Gateway:
    """The ASGI app behind the FastAPI shell: auth, then the proxy."""

    def __init__(self, config: GatewayConfig, authenticator: Authenticator, backend_ssl: ssl.SSLContext | None):
        self.config = config
        self.authenticator = authenticator
        self.table = RoutingTable(tuple(tuple(m) for m in config.members))
        # Credentials stop at the gateway (kube-apiserver drops Authorization once it has
        # authenticated a request); the backends learn the user from X-Remote-* only.
        self.proxy = ReverseProxy(self._pick, ssl_context=backend_ssl, header_source=self._user_headers,
                                  drop_headers=("authorization",))
        self._refresh_task: asyncio.Task[None] | None = None
        #: APIServices: our own group, service-backed routes, their discovery (set by ``run``).
        self.apiservices: APIServiceLayer | None = None

    def _pick(self, scope: Scope) -> list[str]:
        return self.table.upstreams(scope["path"])

    def _user_headers(self, scope: Scope) -> list[tuple[str, str]]:
        user = scope.get("kubechain.user")
        return user.headers() if user is not None else []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        user = self.authenticator.authenticate(scope)
        if user is None:
            body = apierrors.unauthorized().body()
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        scope["kubechain.user"] = user
        if scope["method"] in ("GET", "HEAD") and len(self.config.members) > 1 \
                and scope["path"].rstrip("/") in ("/apis", "/openapi/v3") and await self._merged(scope, send):
            return
        labels = request_labels(scope)
        code = 0

        async def counting_send(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
            await send(message)

        started = time.perf_counter()
        try:
            if self.apiservices is None or not await self.apiservices.handle(scope, receive, counting_send):
                await self.proxy(scope, receive, counting_send)
        finally:
            if labels[0] != "WATCH":
                metrics.LATENCY.labels(*labels).observe(time.perf_counter() - started)
            metrics.REQUESTS.labels(*labels, str(code)).inc()

    async def _merged(self, scope: Scope, send: Send) -> bool:
        """Answer ``/apis`` or the ``/openapi/v3`` index merged from every member (see merged.py)."""
        path = scope["path"].rstrip("/")
        accept = next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"accept"), "")
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
            self.table = RoutingTable(self.table.members, by_gv)
        else:
            merged_index = merged.merge_openapi_index(answers)
            if merged_index is None:
                return False
            ctype, body = "application/json", merged_index
            if self.apiservices is not None:
                body = await self.apiservices.decorate_openapi_index(body)
        headers = [(b"content-type", ctype.encode("latin-1")), (b"content-length", str(len(body)).encode()),
                   (b"vary", b"Accept")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})
        return True

    # -- learning which member serves what ------------------------------------------------
    async def refresh_routes(self) -> None:
        by_gv: dict[tuple[str, str], int] = {}
        for index, replicas in enumerate(self.config.members):
            for base in replicas:
                try:
                    gvs = await _served_group_versions(self.proxy, base)
                except (aiohttp.ClientError, TimeoutError, ValueError, OSError):
                    continue
                for gv in gvs:
                    by_gv.setdefault(gv, index)
                break
        self.table = RoutingTable(self.table.members, by_gv)

    async def _refresh_loop(self) -> None:
        while True:
            try:
                await self.refresh_routes()
            except Exception:
                log.exception("refreshing routes failed")
            await asyncio.sleep(self.config.discovery_refresh)

    async def start(self) -> None:
        await self.refresh_routes()
        self._refresh_task = asyncio.create_task(self._refresh_loop())

    async def stop(self) -> None:
        if self._refresh_task is not None:
            self._refresh_task.cancel()
        await self.proxy.close()

    async def members_ready(self) -> bool:
        for replicas in self.config.members:
            ok = False
            for base in replicas:
                try:
                    status, _ = await self.proxy.fetch(base, "/readyz", limit_seconds=2)
                    ok = status == 200
                except (aiohttp.ClientError, TimeoutError, OSError):
                    ok = False
                if ok:
                    break
            if not ok:
                return False
        return True


def request_labels(scope: Scope) -> tuple[str, str, str, str, str]:
    """(verb, group, version, resource, subresource) of an API path, for request metrics."""
    parts = [p for p in scope["path"].split("/") if p]
    group = version = resource = sub = ""
    rest: list[str] = []
    if parts[:1] == ["api"] and len(parts) > 1:
        version, rest = parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) > 2:
        group, version, rest = parts[1], parts[2], parts[3:]
    watch = False
    if rest[:1] == ["watch"]:
        watch, rest = True, rest[1:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    if rest:
        resource = rest[0]
        sub = rest[2] if len(rest) > 2 else ""
    query = scope.get("query_string", b"")
    watch = watch or b"watch=1" in query or b"watch=true" in query
    return metrics.verb_of(scope["method"], len(rest) > 1, watch), group, version, resource, sub


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
    parser.add_argument("--discovery-refresh", type=float, default=10.0)
    parser.add_argument("--shutdown-delay", type=float, default=1.0)
    parser.add_argument("--etcd-servers", default="",
                        help="comma-separated etcd client URLs: APIServices are stored there (none served without)")
    parser.add_argument("--etcd-prefix", default="/registry", help="key prefix of every object in etcd")
    parser.add_argument("--apiservice-recheck-interval", type=float, default=10.0,
                        help="seconds between availability checks of service-backed APIServices")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s aggregator %(levelname)s %(name)s: %(message)s")
    config = GatewayConfig(args.bind_address, args.secure_port, args.cert_dir,
                           [[u.strip().rstrip("/") for u in m.split(",") if u.strip()] for m in args.member],
                           args.token_auth_file, args.discovery_refresh)
    config.etcd_servers, config.etcd_prefix = args.etcd_servers, args.etcd_prefix
    config.apiservice_recheck = args.apiservice_recheck_interval
    run_forever(run(config, args.shutdown_delay))


async def run(config: GatewayConfig, shutdown_delay: float = 1.0) -> None:
    paths = ensure_certificates(config.cert_dir)
    any_tls = any(u.startswith("https") for m in config.members for u in m)
    backend_ssl = client_ssl_context(paths.ca, *paths.pair("front-proxy-client")) if any_tls else None
    gateway = Gateway(config, Authenticator(load_token_file(config.token_auth_file)), backend_ssl)
    health = HealthChecks()
    health.add("backends", gateway.members_ready, liveness=False)
    if config.etcd_servers:
        gateway.apiservices = APIServiceLayer(
            LayerConfig([e.strip() for e in config.etcd_servers.split(",") if e.strip()], config.etcd_prefix,
                        recheck_interval=config.apiservice_recheck),
            config.members[0] if config.members else [], backend_ssl, paths.pair("front-proxy-client"),
            gateway._user_headers, lambda: list(gateway.table.by_group_version))

    async def start() -> None:
        if gateway.apiservices is not None:
            await gateway.apiservices.start()
        await gateway.start()

    async def stop() -> None:
        await gateway.stop()
        if gateway.apiservices is not None:
            await gateway.apiservices.stop()

    app = Dispatcher(build_app("aggregator", gateway, health, on_start=start, on_stop=stop), gateway)
    cert, key = paths.pair("apiserver")
    ssl_options = {"ssl_certfile": cert, "ssl_keyfile": key, "ssl_ca_certs": paths.ca,
                   "ssl_cert_reqs": ssl.CERT_OPTIONAL}
    async def end_watches() -> None:
        gateway.proxy.end_streams()
        if gateway.apiservices is not None:
            gateway.apiservices.end_streams()

    await serve(app, health, host=config.bind_address, port=config.secure_port, ssl_options=ssl_options,
                shutdown_delay=shutdown_delay, http_protocol=ClientCertProtocol, before_exit=end_watches)
