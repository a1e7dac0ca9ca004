"""Allocation around a Service write: kube-apiserver's ``alloc.go`` Begin/Finish pattern.

``begin_create`` and ``begin_update`` run after defaulting and before validation (kube's
BeginCreate/BeginUpdate): they fill ``clusterIP``/``clusterIPs``, ``ipFamilies``,
``ipFamilyPolicy``, the ports' ``nodePort`` and ``healthCheckNodePort``, and return a finish
callback. The store calls it with True once the Service is written (deferred releases happen
then) or False when anything failed later (validation, name conflict, lost race): everything
allocated is given back, so a failed request leaks nothing. Dry runs allocate nothing.
``release`` gives back what a deleted Service held.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.errors import APIError
from genericapi.storage.errors import StorageError

from .errors import AllocationError
from .families import init_ip_families
from .ipallocator import ClusterIPAllocator
from .portallocator import NodePortAllocator, PortOperation
from .servicefields import (
    cluster_ips,
    go_string_slice,
    health_check_port,
    is_headless,
    needs_cluster_ip,
    needs_health_check,
    needs_node_port,
    node_ports,
    normalize_cluster_ips,
    patch_allocated_values,
    ports_of,
    service_type,
    should_allocate_node_ports,
    spec,
)

log = logging.getLogger(__name__)

Finish = Callable[[bool], Awaitable[None]]
_Ports = tuple[list[dict[str, Any]], int]


def _name(svc: dict[str, Any]) -> str:
    return str((svc.get("metadata") or {}).get("name") or "")


def _port_invalid(svc: dict[str, Any], index: int, value: int, err: AllocationError) -> APIError:
    return apierrors.invalid_object("", "Service", _name(svc), [
        apierrors.invalid(f"spec.ports[{index}].nodePort", value, str(err))])


def _requested_node_port(port: Any, ports: list[dict[str, Any]]) -> int:
    """The first nodePort asked for on a port with this number (TCP and UDP of one port share)."""
    for p in ports:
        if p.get("port") == port and p.get("nodePort"):
            return int(p["nodePort"])
    return 0


class ServiceAllocator:
    """ClusterIPs and NodePorts of Services, allocated and released around their writes."""

    def __init__(self, ips: ClusterIPAllocator, ports: NodePortAllocator) -> None:
        self.ips = ips
        self.ports = ports

    # -- create ---------------------------------------------------------------------------
    async def begin_create(self, svc: dict[str, Any], dry_run: bool) -> Finish:
        normalize_cluster_ips(svc, None)
        init_ip_families(svc, None, self.ips.family)
        allocated = await self._alloc_cluster_ips(svc, dry_run)
        try:
            op = await self._run_ports(svc, lambda op: self._plan_create_ports(svc, op), dry_run)
        except BaseException:
            await self._release_ips(allocated)
            raise
        return self._finisher(dry_run, allocated, [], op)

    def _plan_create_ports(self, svc: dict[str, Any], op: PortOperation) -> _Ports:
        ports = copy.deepcopy(ports_of(svc))
        health = health_check_port(svc)
        if needs_node_port(svc):
            self._init_node_ports(svc, ports, op)
        if needs_health_check(svc):
            health = self._alloc_health_check(health, op)
        return ports, health

    def _init_node_ports(self, svc: dict[str, Any], ports: list[dict[str, Any]], op: PortOperation) -> None:
        by_port: dict[Any, int] = {}
        allocate_new = should_allocate_node_ports(svc)
        for i, port in enumerate(ports):
            wanted = int(port.get("nodePort") or 0)
            if not wanted and not allocate_new:
                continue  # respect requests, allocate nothing new
            done = by_port.get(port.get("port"), 0)
            if not done:
                requested = _requested_node_port(port.get("port"), ports)
                if requested:
                    try:
                        op.allocate(requested)
                    except AllocationError as err:
                        raise _port_invalid(svc, i, requested, err) from None
                    port["nodePort"] = by_port[port.get("port")] = requested
                else:
                    port["nodePort"] = by_port[port.get("port")] = self._next_port(op)
            elif wanted != done:
                if not wanted:
                    port["nodePort"] = done
                else:
                    try:
                        op.allocate(wanted)
                    except AllocationError as err:
                        raise _port_invalid(svc, i, wanted, err) from None

    @staticmethod
    def _next_port(op: PortOperation) -> int:
        try:
            return op.allocate_next()
        except AllocationError as err:
            raise apierrors.internal_error(f"failed to allocate a nodePort: {err}") from None

    @staticmethod
    def _alloc_health_check(requested: int, op: PortOperation) -> int:
        if requested:
            try:
                op.allocate(requested)
            except AllocationError as err:
                raise apierrors.internal_error(
                    f"failed to allocate requested HealthCheck NodePort {requested}: {err}") from None
            return requested
        try:
            return op.allocate_next()
        except AllocationError as err:
            raise apierrors.internal_error(f"failed to allocate a HealthCheck NodePort 0: {err}") from None

    # -- update ---------------------------------------------------------------------------
    async def begin_update(self, new: dict[str, Any], old: dict[str, Any], dry_run: bool) -> Finish:
        patch_allocated_values(new, old)
        normalize_cluster_ips(new, old)
        init_ip_families(new, old, self.ips.family)
        allocated: list[str] = []
        to_release: list[str] = []
        if not needs_cluster_ip(old) and needs_cluster_ip(new):
            allocated = await self._alloc_cluster_ips(new, dry_run)
        elif needs_cluster_ip(old) and not is_headless(old) and not needs_cluster_ip(new):
            to_release = cluster_ips(old)
        try:
            op = await self._run_ports(new, lambda op: self._plan_update_ports(new, old, op), dry_run)
        except BaseException:
            await self._release_ips(allocated)
            raise
        return self._finisher(dry_run, allocated, to_release, op)

    def _plan_update_ports(self, new: dict[str, Any], old: dict[str, Any], op: PortOperation) -> _Ports:
        ports = copy.deepcopy(ports_of(new))
        health = health_check_port(new)
        if needs_node_port(old) and service_type(new) in ("ExternalName", "ClusterIP"):
            for port in node_ports(old):
                op.release_deferred(port)
        if needs_node_port(new):
            self._update_node_ports(new, old, ports, op)
        if not needs_health_check(old) and needs_health_check(new):
            health = self._alloc_health_check(health, op)
        elif needs_health_check(old) and not needs_health_check(new):
            op.release_deferred(health_check_port(old))
        return ports, health

    def _update_node_ports(self, new: dict[str, Any], old: dict[str, Any], ports: list[dict[str, Any]],
                           op: PortOperation) -> None:
        old_ports = node_ports(old)
        claimed: set[int] = set()
        seen: list[tuple[Any, int]] = []
        allocate_new = should_allocate_node_ports(new)
        for i, port in enumerate(ports):
            wanted = int(port.get("nodePort") or 0)
            if not wanted and not allocate_new:
                continue
            if wanted:
                if wanted not in old_ports and wanted not in claimed:
                    try:
                        op.allocate(wanted)
                    except AllocationError as err:
                        raise _port_invalid(new, i, wanted, err) from None
                    claimed.add(wanted)
            else:
                wanted = port["nodePort"] = self._next_port(op)
            key = (port.get("protocol") or "TCP", wanted)
            if key in seen:
                raise apierrors.internal_error(f"duplicate nodePort: {{{key[0]} {key[1]}}}")
            seen.append(key)
        still_used = {int(p.get("nodePort") or 0) for p in ports}
        for number in old_ports:
            if number not in still_used:
                op.release_deferred(number)

    # -- delete ---------------------------------------------------------------------------
    async def release(self, svc: dict[str, Any]) -> None:
        """Give back everything a deleted Service held (kube's releaseAllocatedResources)."""
        if needs_cluster_ip(svc) and not is_headless(svc):
            await self._release_ips(cluster_ips(svc))
        ports = node_ports(svc)
        if needs_health_check(svc) and health_check_port(svc) > 0:
            ports.append(health_check_port(svc))
        await self._release_ports(ports)

    # -- helpers --------------------------------------------------------------------------
    async def _alloc_cluster_ips(self, svc: dict[str, Any], dry_run: bool) -> list[str]:
        """Fill clusterIPs for each family; what was really allocated (for a revert)."""
        if not needs_cluster_ip(svc) or is_headless(svc):
            return []
        s = spec(svc)
        ips = cluster_ips(svc)
        families = list(s.get("ipFamilies") or [self.ips.family])
        while len(ips) < len(families):
            ips.append("")
        allocated: list[str] = []
        try:
            for i, family in enumerate(families):
                if family != self.ips.family:
                    continue  # a headless-like second family; never reached on one family
                ips[i] = await self._alloc_one(svc, ips, ips[i], dry_run)
                if not dry_run:
                    allocated.append(ips[i])
        except BaseException:
            await self._release_ips(allocated)
            raise
        s["clusterIPs"] = ips
        s["clusterIP"] = ips[0]
        return allocated

    async def _alloc_one(self, svc: dict[str, Any], ips: list[str], wanted: str, dry_run: bool) -> str:
        try:
            if not wanted:
                if dry_run:
                    return self.ips.dry_run_next()
                try:
                    return await self.ips.allocate_next(svc)
                except AllocationError as err:
                    raise apierrors.internal_error(f"failed to allocate a serviceIP: {err}") from None
            if dry_run:
                self.ips.check(wanted)
                return wanted
            return await self.ips.allocate(wanted, svc)
        except AllocationError as err:
            raise apierrors.invalid_object("", "Service", _name(svc), [apierrors.invalid(
                "spec.clusterIPs", go_string_slice(ips), f"failed to allocate IP {wanted}: {err}")]) from None
        except StorageError as err:
            raise apierrors.internal_error(str(err)) from None

    async def _run_ports(self, svc: dict[str, Any], plan: Callable[[PortOperation], _Ports],
                         dry_run: bool) -> PortOperation:
        try:
            (ports, health), op = await self.ports.run(plan, dry_run)
        except StorageError as err:
            raise apierrors.internal_error(str(err)) from None
        s = spec(svc)
        if s.get("ports") is not None:
            s["ports"] = ports
        if health and health != health_check_port(svc):
            s["healthCheckNodePort"] = health
        return op

    def _finisher(self, dry_run: bool, allocated: list[str], to_release: list[str], op: PortOperation) -> Finish:
        async def finish(success: bool) -> None:
            if dry_run:
                return
            if success:
                await self._release_ips(to_release)
                await self._release_ports(op.deferred)
            else:
                await self._release_ips(allocated)
                await self._release_ports(op.allocated)

        return finish

    async def _release_ips(self, ips: list[str]) -> None:
        for ip in ips:
            if ip and ip != "None":
                try:
                    await self.ips.release(ip)
                except (StorageError, APIError) as err:
                    log.warning("releasing ClusterIP %s failed: %s", ip, err)

    async def _release_ports(self, ports: list[int]) -> None:
        try:
            await self.ports.release(ports)
        except StorageError as err:
            log.warning("releasing node ports %s failed: %s", ports, err)
