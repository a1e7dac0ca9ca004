"""Services: their strategy and the store hooks that allocate ClusterIPs and NodePorts.

The strategy hooks do what kube's ``svcStrategy`` does beyond defaulting and validation: a new
Service starts with an empty load-balancer status, and an update that changes ``type`` wipes
the allocated fields the new type has no use for. ``install_allocation`` hangs the allocator on
the Service store itself (kube's BeginCreate/BeginUpdate/AfterDelete), so every path that
writes or deletes a Service (HTTP, namespace deletion, garbage collection) allocates and
releases the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from genericapi.registry.store import Store
from genericapi.storage.etcd import EtcdClient

from .allocation import ClusterIPAllocator, NodePortAllocator, PortRange, ServiceAllocator, ServiceIPRange
from .allocation.servicefields import drop_type_dependent_fields

NETWORKING = "networking.k8s.io"


def prepare_for_create(obj: dict[str, Any]) -> None:
    """A new Service's status is an empty load-balancer status (what kube serves)."""
    obj["status"] = {"loadBalancer": {}}


def prepare_for_update(new: dict[str, Any], old: dict[str, Any]) -> None:
    """After the generic status handling: a type change wipes what the new type has no use for."""
    drop_type_dependent_fields(new, old)


def install_allocation(store: Store, allocator: ServiceAllocator) -> None:
    """Allocate on create/update and release on delete, for every write of ``store``."""
    store.begin_create = allocator.begin_create
    store.begin_update = allocator.begin_update
    store.after_delete = allocator.release


def build_allocator(stores: Mapping[tuple[str, str], Store], client: EtcdClient, key_prefix: str,
                    service_cidr: ServiceIPRange, node_ports: PortRange) -> ServiceAllocator:
    """The allocator over this server's ipaddresses/servicecidrs stores and etcd."""
    ips = ClusterIPAllocator(service_cidr, stores[(NETWORKING, "ipaddresses")],
                             stores.get((NETWORKING, "servicecidrs")))
    ports = NodePortAllocator(client, f"{key_prefix.rstrip('/')}/ranges/servicenodeports", node_ports)
    return ServiceAllocator(ips, ports)
