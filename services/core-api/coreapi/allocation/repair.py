"""Start-up repair: every stored Service's ClusterIPs and NodePorts are recorded as allocated.

kube-apiserver runs repair controllers for this (``repairip`` and the node-port repair). Here a
one-shot pass at start-up covers what matters: Services written before allocation existed (an
older data directory) or whose allocation record was lost get their IPAddress objects and bitmap
bits back, so nothing they hold can be handed out twice. It only adds records; it never
releases. Idempotent, safe when several replicas start at once.
"""

from __future__ import annotations

import logging

from genericapi.registry.options import ListOptions
from genericapi.registry.store import Store

from .portallocator import PortOperation
from .service import ServiceAllocator
from .servicefields import cluster_ips, health_check_port, is_headless, needs_cluster_ip, needs_health_check, node_ports

log = logging.getLogger(__name__)


async def repair(services: Store, allocator: ServiceAllocator) -> None:
    listed = await services.list("", ListOptions())
    ports: list[int] = []
    claimed = 0
    for svc, _raw in listed.items:
        if needs_cluster_ip(svc) and not is_headless(svc):
            for ip in cluster_ips(svc):
                claimed += await allocator.ips.claim(ip, svc)
        ports.extend(node_ports(svc))
        if needs_health_check(svc) and health_check_port(svc):
            ports.append(health_check_port(svc))

    def mark(op: PortOperation) -> None:
        for port in ports:
            op.claim(port)

    _, op = await allocator.ports.run(mark)
    if claimed or op.allocated:
        log.info("repaired allocations: %d ClusterIPs, %d node ports", claimed, len(op.allocated))
