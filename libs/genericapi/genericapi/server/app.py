"""The application shell of every service: Starlette for lifespan and admin routes, with the
Kubernetes API router (plain ASGI) mounted for everything else, and graceful shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any

import orjson
import uvicorn
import uvloop
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from . import gctuning
from .corking import CorkedHttpToolsProtocol
from .health import HealthChecks, respond
from .version import version_info

log = logging.getLogger(__name__)

Hook = Callable[[], Awaitable[None]]


def build_app(name: str, api: ASGIApp, health: HealthChecks, *, on_start: Hook | None = None,
              on_stop: Hook | None = None, registry: CollectorRegistry | None = None,
              extra: Callable[[Starlette], None] | None = None) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        if on_start is not None:
            await on_start()
        gctuning.tune_after_start()
        try:
            yield
        finally:
            if on_stop is not None:
                await on_stop()

    app = Starlette(lifespan=lifespan)
    app.add_route("/healthz", health.healthz, methods=["GET"], include_in_schema=False)
    app.add_route("/livez", health.livez, methods=["GET"], include_in_schema=False)
    app.add_route("/readyz", health.readyz, methods=["GET"], include_in_schema=False)
    for sub in ("healthz", "livez", "readyz"):  # one check: /readyz/poststarthook/rbac/bootstrap-roles
        app.add_route(f"/{sub}/{{check:path}}", _single_check(health, sub), methods=["GET"], include_in_schema=False)

    async def version(_request: Request) -> Response:
        return Response(orjson.dumps(version_info(), option=orjson.OPT_INDENT_2),
                        media_type="application/json")

    async def metrics(_request: Request) -> Response:
        from prometheus_client import REGISTRY
        return Response(generate_latest(registry or REGISTRY), media_type=CONTENT_TYPE_LATEST)

    # kube-apiserver serves both (go-restful's route "/" under "/version"); kr8s asks for "/version/".
    app.add_route("/version", version, methods=["GET"], include_in_schema=False)
    app.add_route("/version/", version, methods=["GET"], include_in_schema=False)
    app.add_route("/metrics", metrics, methods=["GET"], include_in_schema=False)
    if extra is not None:
        extra(app)
    app.mount("/", api)
    return app


#: Paths the Starlette shell answers; every other request goes straight to the API app.
ADMIN_PREFIXES = ("/healthz", "/livez", "/readyz", "/version", "/metrics", "/openapi")


class Dispatcher:
    """Sends Kubernetes API requests straight to the API app, bypassing the shell's middleware
    stack; admin paths and the lifespan go to the Starlette shell (FastAPI was the shell until
    issue 15: its import, with pydantic's models, cost each cold start ~0.45 s of CPU for routes
    that need none of it)."""

    def __init__(self, shell: Starlette, api: ASGIApp) -> None:
        self.shell = shell
        self.api = api

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith(ADMIN_PREFIXES):
            await self.api(scope, receive, send)
            return
        await self.shell(scope, receive, send)


def _single_check(health: HealthChecks, kind: str) -> Callable[[Request], Awaitable[Response]]:
    async def one(request: Request) -> Response:
        answer = await health.single(kind, request.path_params["check"])
        if answer is None:
            return Response("404 page not found\n", status_code=404, media_type="text/plain")
        return respond(*answer)
    return one


def run_forever(main: Coroutine[Any, Any, None]) -> None:
    """Run a service on uvloop (uvicorn's ``loop=`` only applies to loops uvicorn creates)."""
    uvloop.run(main)


def dump_tasks() -> None:
    """SIGUSR1: log where every asyncio task is waiting (Go's SIGQUIT goroutine dump, for a
    process that has stopped making progress without an error)."""
    out = io.StringIO()
    tasks = asyncio.all_tasks()
    out.write(f"{len(tasks)} asyncio task(s):\n")
    for task in sorted(tasks, key=lambda t: t.get_name()):
        task.print_stack(limit=12, file=out)
    log.warning("%s", out.getvalue())


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: ``serve`` orders the shutdown itself; ``after_startup``
    runs once the socket is bound (uvicorn runs the lifespan's start-up first, then binds)."""

    def __init__(self, config: uvicorn.Config, after_startup: Hook | None = None) -> None:
        super().__init__(config)
        self._after_startup = after_startup

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self._after_startup is not None and not self.should_exit:
            await self._after_startup()


async def serve(app: ASGIApp, health: HealthChecks, *, host: str, port: int,
                ssl_options: dict[str, Any] | None = None, shutdown_delay: float = 1.0,
                http_protocol: Any = CorkedHttpToolsProtocol,
                before_exit: Hook | None = None, graceful_timeout: float = 10.0,
                after_startup: Hook | None = None, stop: asyncio.Event | None = None) -> None:
    """Run until SIGTERM/SIGINT: readyz turns false, a short delay, then stop accepting,
    let in-flight requests finish (bounded), end watches, exit (kube-apiserver's order).
    ``after_startup`` runs once the socket accepts connections (the lifespan's start-up ran
    before); setting ``stop`` begins the same graceful stop as SIGTERM (a server run in-process)."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                            loop="none", http=http_protocol, ws="none", timeout_graceful_shutdown=int(graceful_timeout),
                            access_log=False, timeout_keep_alive=60, server_header=False,
                            # No ProxyHeadersMiddleware: the peer address stays the peer's (audit's
                            # sourceIPs read X-Forwarded-For themselves, as kube's do), one less layer.
                            proxy_headers=False, **(ssl_options or {}))
    server = _Server(config, after_startup)
    loop = asyncio.get_running_loop()
    stopping = stop if stop is not None else asyncio.Event()

    def on_signal() -> None:
        if not server.started:
            # Still starting (waiting for etcd, running post-start hooks): nothing is served or in
            # flight yet, and uvicorn would only look at the request once start-up ended.
            log.warning("stopping before start-up finished")
            os._exit(0)
        if stopping.is_set():
            server.force_exit = True
        stopping.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    loop.add_signal_handler(signal.SIGUSR1, dump_tasks)

    async def stopper() -> None:
        await stopping.wait()
        health.shutting_down = True
        await asyncio.sleep(shutdown_delay)
        if before_exit is not None:
            await before_exit()
        server.should_exit = True

    task = asyncio.create_task(stopper())
    try:
        await server.serve()
    finally:
        task.cancel()
