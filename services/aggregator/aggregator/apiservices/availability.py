"""The availability controller: the ``Available`` condition of every APIService, level-triggered.

As kube-aggregator's local and remote availability controllers: a local APIService is always
available (``Local``); a service-backed one is checked against the Service and its
EndpointSlices (``ServiceNotFound``, ``ServicePortError``, ``EndpointsNotFound``,
``MissingEndpoints``; the shared ``serviceresolver.availability``), then by GETting its discovery
document on the backend (``/apis/<group>/<version>``) as ``system:kube-aggregator`` with the proxy
client certificate: 5 attempts at once, 5 s each, one success is enough (``Passed``), else
``FailedDiscoveryCheck`` with the last error. APIServices are rechecked when they change, when
their Service or its endpoints change, every ``interval`` seconds, and when a proxied request
came back 503. Only the leader runs it; the status is written only when it changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import random
import ssl
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from genericapi.apimachinery.serviceresolver import ServiceResolutionError, ServiceResolver
from genericapi.controllers import Controller, Informer, ResourceClient
from genericapi.httpclient import new_session
from genericapi.registry.meta import now_rfc3339

from .types import AVAILABLE, name_of, service_ref, set_condition, spec

if TYPE_CHECKING:
    import aiohttp  # loaded by the first probe's session (genericapi.httpclient), not at start-up

log = logging.getLogger(__name__)

ATTEMPTS = 5
PROBE_TIMEOUT = 5.0
#: The identity the discovery check asserts (kube-aggregator's, in system:masters).
PROBE_HEADERS = {"X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters"}


class Prober(Protocol):
    async def __call__(self, url: str) -> str | None:
        """None when ``url`` answered 2xx/3xx, else the error text kube reports."""
        ...


@dataclass(frozen=True)
class Check:
    status: str
    reason: str
    message: str

    def condition(self, now: str) -> dict[str, Any]:
        return {"type": AVAILABLE, "status": self.status, "lastTransitionTime": now, "reason": self.reason,
                "message": self.message}


def discovery_path(obj: dict[str, Any]) -> str:
    s = spec(obj)
    if name_of(obj) == "v1.":
        return f"/api/{s.get('version', '')}"
    return f"/apis/{s.get('group', '')}/{s.get('version', '')}"


def go_error(url: str, err: BaseException) -> str:
    """A client error as Go's ``http.Client`` words it (``Get "<url>": dial tcp ...``)."""
    import aiohttp  # loaded already: the error came from a probe's session

    parts = urlsplit(url)
    address = parts.netloc
    if isinstance(err, TimeoutError | asyncio.TimeoutError):
        return f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
    if isinstance(err, aiohttp.ClientConnectorCertificateError | ssl.SSLError):
        return f'Get "{url}": tls: {err}'
    if isinstance(err, aiohttp.ClientConnectorError):
        cause = err.os_error
        if isinstance(cause, ConnectionRefusedError):
            return f'Get "{url}": dial tcp {address}: connect: connection refused'
        return f'Get "{url}": dial tcp {address}: {cause.strerror or cause}'
    return f'Get "{url}": {err}'


class HTTPProber:
    """GETs a discovery URL with the proxy client certificate and no server verification."""

    def __init__(self, ctx: ssl.SSLContext) -> None:
        self._ctx = ctx
        self._session: aiohttp.ClientSession | None = None

    async def __call__(self, url: str) -> str | None:
        if self._session is None or self._session.closed:
            self._session = new_session(ssl_context=self._ctx, force_close=True)
        import aiohttp  # loaded by new_session

        try:
            async with self._session.get(url, headers=PROBE_HEADERS, allow_redirects=False,
                                         timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT)) as resp:
                if not 200 <= resp.status < 300:
                    return f"bad status from {url}: {resp.status}"
                return None
        except (aiohttp.ClientError, TimeoutError, OSError, ssl.SSLError) as err:
            return f"failing or missing response from {url}: {go_error(url, err)}"

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


async def check(obj: dict[str, Any], resolver: ServiceResolver, probe: Prober, synced: bool = True) -> Check:
    """The ``Available`` condition ``obj`` should have now."""
    ref = service_ref(obj)
    if ref is None:
        return Check("True", "Local", "Local APIServices are always available")
    if not synced:
        return Check("Unknown", "ServiceAccessError",
                     f'service/{ref.name} in "{ref.namespace}" cannot be checked due to: '
                     "the Service cache is not synced yet")
    failed = resolver.availability(ref.namespace, ref.name, ref.port)
    if failed is not None:
        return Check(failed.status, failed.reason, failed.message)
    path = discovery_path(obj)

    async def attempt() -> str | None:
        try:
            urls = resolver.resolve_all(ref.namespace, ref.name, ref.port)
        except ServiceResolutionError as err:
            return err.message
        return await probe(random.choice(urls) + path)

    last: str | None = "no attempt made"
    for next_done in asyncio.as_completed([attempt() for _ in range(ATTEMPTS)]):
        last = await next_done
        if last is None:
            break
    if last is not None:
        return Check("False", "FailedDiscoveryCheck", last)
    return Check("True", "Passed", "all checks passed")


class AvailabilityController(Controller):
    name = "apiservice-availability"

    def __init__(self, client: ResourceClient, apiservices: Informer, resolver: ServiceResolver,
                 probe: Prober, view_synced: Any = None, interval: float = 10.0) -> None:
        super().__init__()
        self.client = client
        self.apiservices = apiservices
        self.resolver = resolver
        self.probe = probe
        self.interval = interval
        self._view_synced = view_synced
        self._running = False
        apiservices.add_handler(lambda _t, obj, _p: self._enqueue(name_of(obj)))

    @property
    def running(self) -> bool:
        """True while this replica leads and has synced: it writes the Available conditions."""
        return self._running

    def _enqueue(self, name: str) -> None:
        if self._running and name:
            self.queue.add(name)

    def recheck(self, name: str) -> None:
        """Check ``name`` now (a proxied request to it failed); ignored unless this replica leads."""
        self._enqueue(name)

    def service_changed(self, _resource: str, namespace: str, service: str) -> None:
        """A Service or one of its endpoints changed: recheck the APIServices backed by it."""
        for obj in self.apiservices.items():
            ref = service_ref(obj)
            if ref is not None and (not service or (ref.namespace, ref.name) == (namespace, service)):
                self._enqueue(name_of(obj))

    async def on_synced(self) -> None:
        await self.apiservices.wait_synced()
        self._running = True
        for obj in self.apiservices.items():
            self._enqueue(name_of(obj))

    async def run(self, workers: int = 2) -> None:
        resync = asyncio.create_task(self._resync())
        try:
            await super().run(workers)
        finally:
            self._running = False
            resync.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await resync

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            for obj in self.apiservices.items():
                if service_ref(obj) is not None:
                    self._enqueue(name_of(obj))

    async def reconcile(self, key: Hashable) -> None:
        name = str(key)
        current = self.apiservices.get("", name)
        if current is None:
            return
        synced = bool(self._view_synced()) if callable(self._view_synced) else True
        result = await check(current, self.resolver, self.probe, synced)
        updated = copy.deepcopy(current)
        set_condition(updated, result.condition(now_rfc3339()))
        if updated.get("status") == current.get("status"):
            return
        old = next((c for c in (current.get("status") or {}).get("conditions") or []
                    if isinstance(c, dict) and c.get("type") == AVAILABLE), {})
        if old.get("status") != result.status:
            log.info("APIService %s: Available %s -> %s (%s: %s)", name, old.get("status", "Unknown"),
                     result.status, result.reason, result.message)
        await self.client.update("", name, updated, subresource="status")
