"""The webhook backend: ``--audit-webhook-config-file`` (a kubeconfig), events POSTed as an
``audit.k8s.io/v1`` EventList in batches, as kube's buffered webhook backend sends them.

Batching follows kube's defaults and flags (``--audit-webhook-batch-*``): a batch goes when it holds
``max_size`` events (400) or ``max_wait`` (30 s) has passed since the last one, at most ``qps``
batches a second with bursts of ``burst`` when throttling is on, each batch sent by its own task.
A failed send is retried as kube's webhook client retries (connection errors, 429 and 5xx; 5 tries,
waits from ``--audit-webhook-initial-backoff`` growing by 1.5 with 20% jitter, from the project's
backoff helper); a batch that still fails is counted in ``apiserver_audit_error_total{plugin="webhook"}``.
Events arrive from the sink's writer thread and are handed to the event loop in one call per batch.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import ssl
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from genericapi.apimachinery import deepjson
from genericapi.backoff import Backoff
from genericapi.httpclient import client_errors, new_session

from .sink import plugin_error

if TYPE_CHECKING:
    import aiohttp  # loaded by the session ``start`` makes (genericapi.httpclient)

log = logging.getLogger(__name__)

#: kube's webhook batch defaults (k8s.io/apiserver/pkg/server/options/audit.go).
DEFAULT_MAX_SIZE = 400
DEFAULT_MAX_WAIT = 30.0
DEFAULT_THROTTLE_QPS = 10.0
DEFAULT_THROTTLE_BURST = 15
DEFAULT_INITIAL_BACKOFF = 10.0
#: kube's DefaultRetryBackoffWithInitialDelay: 5 steps, factor 1.5, jitter 0.2.
RETRY_STEPS = 5
#: How long a shutdown waits for batches in flight.
SHUTDOWN_WAIT = 5.0


class WebhookConfigError(ValueError):
    """A kubeconfig the webhook backend cannot use."""


@dataclass
class WebhookTarget:
    """Where and how to POST, from the kubeconfig's current context."""

    server: str
    ssl_context: ssl.SSLContext | None
    token: str = ""


def load_kubeconfig(path: str) -> WebhookTarget:
    """The current context's cluster and user (certificate authority, client certificate, token)."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise WebhookConfigError(f"invalid configuration: {err}") from err
    if not isinstance(doc, dict):
        raise WebhookConfigError(f"invalid configuration: {path} is not a kubeconfig")
    base = Path(path).parent

    def named(section: str, name: str, key: str) -> dict[str, Any]:
        for entry in doc.get(section) or []:
            if isinstance(entry, dict) and (not name or entry.get("name") == name):
                value = entry.get(key)
                return value if isinstance(value, dict) else {}
        return {}

    context = named("contexts", doc.get("current-context") or "", "context")
    cluster = named("clusters", context.get("cluster", ""), "cluster")
    user = named("users", context.get("user", ""), "user")
    server = cluster.get("server") or ""
    if not server:
        raise WebhookConfigError("invalid configuration: no configuration has been provided, "
                                 "try setting KUBERNETES_MASTER environment variable")
    ctx: ssl.SSLContext | None = None
    if server.startswith("https"):
        ctx = ssl.create_default_context()
        if cluster.get("insecure-skip-tls-verify"):
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        ca = _pem(cluster, "certificate-authority", base)
        if ca:
            ctx.load_verify_locations(cadata=ca.decode())
        cert, key = _pem(user, "client-certificate", base), _pem(user, "client-key", base)
        if cert and key:
            with tempfile.TemporaryDirectory() as tmp:  # ssl loads a chain only from files
                cert_file, key_file = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
                cert_file.write_bytes(cert)
                key_file.write_bytes(key)
                ctx.load_cert_chain(cert_file, key_file)
    token = user.get("token") or ""
    if not token and user.get("tokenFile"):
        token = _resolve(base, user["tokenFile"]).read_text().strip()
    return WebhookTarget(server, ctx, token)


def _resolve(base: Path, name: str) -> Path:
    p = Path(name)
    return p if p.is_absolute() else base / p


def _pem(section: dict[str, Any], key: str, base: Path) -> bytes:
    data = section.get(key + "-data")
    if data:
        return base64.b64decode(data)
    name = section.get(key)
    return _resolve(base, name).read_bytes() if name else b""


class _Throttle:
    """A token bucket (client-go's flowcontrol.NewTokenBucketRateLimiter): ``qps``, bursts of ``burst``."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps, self.burst = qps, max(1, burst)
        self.tokens = float(self.burst)
        self.last = time.monotonic()

    async def accept(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.qps)
        self.last = now
        if self.tokens < 1:
            await asyncio.sleep((1 - self.tokens) / self.qps)
            self.tokens, self.last = 1.0, time.monotonic()
        self.tokens -= 1


class WebhookBackend:
    """Batches events on the event loop and POSTs them as EventLists."""

    name = "webhook"

    def __init__(self, target: WebhookTarget, *, max_size: int = DEFAULT_MAX_SIZE, max_wait: float = DEFAULT_MAX_WAIT,
                 throttle: bool = True, qps: float = DEFAULT_THROTTLE_QPS, burst: int = DEFAULT_THROTTLE_BURST,
                 initial_backoff: float = DEFAULT_INITIAL_BACKOFF) -> None:
        self.target = target
        self.max_size, self.max_wait = max(1, max_size), max_wait
        self.throttle = _Throttle(qps, burst) if throttle and qps > 0 else None
        self.initial_backoff = initial_backoff
        self._pending: list[dict[str, Any]] = []
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        self._session: aiohttp.ClientSession | None = None
        self._closing = False

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._session = new_session(ssl_context=self.target.ssl_context, limit=100, total_timeout=30)
        self._task = asyncio.create_task(self._batches(), name="audit-webhook")

    def write(self, docs: Sequence[dict[str, Any]]) -> None:
        """From the writer thread: hand the events to the loop (one wake-up per batch)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            plugin_error(self.name, "audit webhook backend is not running", len(docs))
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self._accept, list(docs))

    def _accept(self, docs: list[dict[str, Any]]) -> None:
        self._pending.extend(docs)
        if len(self._pending) >= self.max_size:
            self._wake.set()

    async def _batches(self) -> None:
        while not self._closing:
            if len(self._pending) < self.max_size:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.max_wait)
            await self._flush_once()

    async def _flush_once(self) -> None:
        if not self._pending:
            return
        batch, self._pending = self._pending[:self.max_size], self._pending[self.max_size:]
        if self.throttle is not None:
            await self.throttle.accept()
        task = asyncio.create_task(self._send(batch))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send(self, items: list[dict[str, Any]]) -> None:
        body = deepjson.dumps({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "metadata": {}, "items": items})
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.target.token:
            headers["Authorization"] = f"Bearer {self.target.token}"
        backoff = Backoff(self.initial_backoff, cap=3600.0, factor=1.5, jitter=0.2)
        err: object = None
        for attempt in range(RETRY_STEPS):
            assert self._session is not None
            try:
                async with self._session.post(self.target.server, data=body, headers=headers) as resp:
                    text = await resp.read()
                    if 200 <= resp.status < 300:
                        return
                    err = f"the server responded with the status code {resp.status}: {text[:200]!r}"
                    retry = resp.status == 429 or resp.status >= 500
            except client_errors() as e:
                err, retry = e, True
            if not retry or attempt == RETRY_STEPS - 1 or self._closing:
                break
            await asyncio.sleep(backoff.next())
        plugin_error(self.name, err, len(items))

    async def stop(self) -> None:
        """Send what is pending, wait a little for batches in flight, close."""
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        while self._pending:
            batch, self._pending = self._pending[:self.max_size], self._pending[self.max_size:]
            task = asyncio.create_task(self._send(batch))
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)
        if self._sends:
            await asyncio.wait(set(self._sends), timeout=SHUTDOWN_WAIT)
        if self._session is not None:
            await self._session.close()

    def close(self) -> None:
        """The writer thread is done with us (``stop`` does the closing on the loop)."""
