"""Service ClusterIP and NodePort allocation, as kube-apiserver 1.33 does it.

* ``ranges``: range math (which addresses/ports, in which order) for both kinds of allocation;
* ``ipallocator``: ClusterIPs as IPAddress objects (one etcd create per address = atomic);
* ``portallocator``: NodePorts in kube's RangeAllocation bitmap, compare-and-swap in etcd;
* ``families``/``servicefields``: the Service field rules around allocation;
* ``service``: the Begin/Finish hooks a Service create or update runs, and the release on delete;
* ``servicecidr``: the ``kubernetes`` ServiceCIDR every cluster has.
"""

from __future__ import annotations

from .ipallocator import ClusterIPAllocator
from .portallocator import NodePortAllocator
from .ranges import DEFAULT_NODE_PORT_RANGE, DEFAULT_SERVICE_CIDR, PortRange, ServiceIPRange
from .service import ServiceAllocator

__all__ = [
    "DEFAULT_NODE_PORT_RANGE",
    "DEFAULT_SERVICE_CIDR",
    "ClusterIPAllocator",
    "NodePortAllocator",
    "PortRange",
    "ServiceAllocator",
    "ServiceIPRange",
]
