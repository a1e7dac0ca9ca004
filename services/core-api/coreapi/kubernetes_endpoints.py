"""The ``default/kubernetes`` Endpoints and EndpointSlice, kept as kube-apiserver's "lease"
endpoint reconciler keeps them (``pkg/controlplane/reconcilers/lease.go`` and its
``EndpointsAdapter``).

Every gateway keeps a master lease (``genericapi.apimachinery.masterleases``); every core-api
replica, like every kube-apiserver, reconciles on a timer (10 s): the Endpoints get one address
per live lease on port ``https`` (label ``endpointslice.kubernetes.io/skip-mirror: "true"``, so
the mirroring controller leaves it alone) and the EndpointSlice ``kubernetes`` (label
``kubernetes.io/service-name``) is made from its first subset, as the adapter does. With no
lease alive nothing is erased (kube refuses to). A watch on the leases makes a gateway's
start, stop or expiry show at once rather than at the next pass. Writes are skipped when nothing changed, and a
lost race with another replica (409) waits for the next pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from typing import Any

from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.masterleases import RENEW_INTERVAL_SECONDS, leases_prefix, parse_lease
from genericapi.controllers.tasks import cancel_and_wait
from genericapi.registry.fieldtracking import Writer
from genericapi.registry.options import DeleteOptions
from genericapi.registry.store import Store
from genericapi.server.apiserver import GenericAPIServer
from genericapi.storage.errors import StorageError
from genericapi.storage.etcd import EtcdClient, prefix_end

log = logging.getLogger(__name__)

SERVICE_NAME = "kubernetes"
NAMESPACE = "default"
SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
_WRITER = Writer("kube-apiserver")


def endpoint_subsets(addresses: list[tuple[str, int]], primary_port: int = 0) -> list[dict[str, Any]]:
    """Subsets for these (ip, port) pairs: one per port, addresses in lexicographic order
    (``RepackSubsets`` of kube's single-port subset when every server shares the port). The
    Service's targetPort (``primary_port``) comes first: the EndpointSlice shows that subset."""
    by_port: dict[int, set[str]] = {}
    for ip, port in addresses:
        by_port.setdefault(port, set()).add(ip)
    return [{"addresses": [{"ip": ip} for ip in sorted(ips)],
             "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}
            for port, ips in sorted(by_port.items(), key=lambda item: (item[0] != primary_port, item[0]))]


def _address_type(ips: list[str]) -> str:
    if ips and all(ipaddress.ip_address(ip).version == 6 for ip in ips):
        return "IPv6"
    return "IPv4"


def endpoint_slice(subsets: list[dict[str, Any]]) -> dict[str, Any]:
    """``endpointSliceFromEndpoints``: the first subset's ports and ready addresses."""
    first = subsets[0] if subsets else {}
    ips = [a["ip"] for a in first.get("addresses") or []]
    out: dict[str, Any] = {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE, "labels": {SERVICE_NAME_LABEL: SERVICE_NAME}},
        "addressType": _address_type(ips),
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
    }
    if first.get("ports"):
        out["ports"] = [dict(p) for p in first["ports"]]
    return out


class KubernetesEndpoints:
    """Reconciles ``default/kubernetes`` from the master leases, every ``interval`` seconds."""

    def __init__(self, etcd: EtcdClient, etcd_prefix: str, endpoints: Store, slices: Store | None,
                 interval: float = RENEW_INTERVAL_SECONDS, primary_port: int = 0) -> None:
        self.primary_port = primary_port
        self.etcd, self.prefix = etcd, leases_prefix(etcd_prefix).encode()
        self.endpoints, self.slices, self.interval = endpoints, slices, interval
        self._task: asyncio.Task[None] | None = None

    async def live_addresses(self) -> list[tuple[str, int]]:
        kvs, _rev, _more = await self.etcd.range(self.prefix, prefix_end(self.prefix))
        return [lease for kv in kvs if (lease := parse_lease(kv.value)) is not None]

    async def reconcile(self) -> None:
        addresses = await self.live_addresses()
        if not addresses:
            log.warning("no API server addresses in the master leases: leaving default/kubernetes endpoints")
            return
        subsets = endpoint_subsets(addresses, self.primary_port)
        await self._endpoints(subsets)
        if self.slices is not None:
            await self._slice(endpoint_slice(subsets))

    async def _endpoints(self, subsets: list[dict[str, Any]]) -> None:
        try:
            current = await self.endpoints.get(NAMESPACE, SERVICE_NAME)
        except APIError as err:
            if err.code != 404:
                raise
            await self.endpoints.create(NAMESPACE, {
                "apiVersion": "v1", "kind": "Endpoints",
                "metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE, "labels": {SKIP_MIRROR: "true"}},
                "subsets": subsets}, writer=_WRITER)
            return
        labels = current.setdefault("metadata", {}).get("labels") or {}
        if current.get("subsets") == subsets and labels.get(SKIP_MIRROR) == "true":
            return
        current["metadata"]["labels"] = {**labels, SKIP_MIRROR: "true"}
        current["subsets"] = subsets
        await self.endpoints.update(NAMESPACE, SERVICE_NAME, current, writer=_WRITER)

    async def _slice(self, wanted: dict[str, Any]) -> None:
        assert self.slices is not None
        try:
            current = await self.slices.get(NAMESPACE, SERVICE_NAME)
        except APIError as err:
            if err.code != 404:
                raise
            await self.slices.create(NAMESPACE, wanted, writer=_WRITER)
            return
        if current.get("addressType") != wanted["addressType"]:
            # addressType is immutable: kube deletes and recreates the slice.
            await self.slices.delete(NAMESPACE, SERVICE_NAME, DeleteOptions())
            await self.slices.create(NAMESPACE, wanted, writer=_WRITER)
            return
        same = all(current.get(k) == wanted.get(k) for k in ("endpoints", "ports")) and \
            (current.get("metadata") or {}).get("labels") == wanted["metadata"]["labels"]
        if same:
            return
        wanted["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await self.slices.update(NAMESPACE, SERVICE_NAME, wanted, writer=_WRITER)

    async def _pass(self) -> None:
        try:
            await self.reconcile()
        except (APIError, StorageError) as err:  # a replica's race, etcd briefly away: next pass
            log.info("reconciling default/kubernetes endpoints: %s", err)

    async def run(self) -> None:
        """A pass every ``interval``, and at once when a lease is written, removed or expires."""
        changed = asyncio.Event()
        watcher = asyncio.create_task(self._watch(changed), name="master-leases-watch")
        try:
            while True:
                await self._pass()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), self.interval)
                changed.clear()
        finally:
            await cancel_and_wait(watcher)

    async def _watch(self, changed: asyncio.Event) -> None:
        while True:
            try:
                revision = await self.etcd.current_revision()
                async for _batch in self.etcd.watch(self.prefix, revision + 1):
                    changed.set()
            except StorageError as err:
                log.debug("watching master leases: %s", err)
            await asyncio.sleep(1.0)

    async def start(self, _server: GenericAPIServer) -> None:
        self._task = asyncio.create_task(self.run(), name="kubernetes-endpoints")

    async def stop(self, _server: GenericAPIServer) -> None:
        if self._task is not None:
            with contextlib.suppress(Exception):
                await cancel_and_wait(self._task)
            self._task = None


def install(server: GenericAPIServer, primary_port: int, interval: float = RENEW_INTERVAL_SECONDS
            ) -> KubernetesEndpoints:
    """Reconcile once the stores run and the kubernetes Service is bootstrapped (post-start
    hooks run in order: install after the bootstrap hook); stop first on shutdown."""
    by = server.by_resource
    reconciler = KubernetesEndpoints(server.etcd, server.config.etcd_prefix, by[("", "endpoints")],
                                     by.get(("discovery.k8s.io", "endpointslices")), interval, primary_port)
    server.post_start.append(reconciler.start)
    server.pre_shutdown.append(reconciler.stop)
    return reconciler
