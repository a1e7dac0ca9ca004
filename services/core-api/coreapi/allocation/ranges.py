"""Range math of the Service allocators: which addresses and ports a range hands out, and in
which order a dynamic allocation tries them.

Both follow kube-apiserver (KEP-3070): a range is split at an offset; dynamic allocations start
at a random point of the upper part and fall back to the lower part, so the lower part stays
free for addresses and ports that users ask for by value. For IPs the network address and the
IPv4 broadcast address are never handed out.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Iterator
from dataclasses import dataclass

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddr = ipaddress.IPv4Address | ipaddress.IPv6Address

#: kube-apiserver's --service-cluster-ip-range default (pkg/kubeapiserver/options).
DEFAULT_SERVICE_CIDR = "10.0.0.0/24"
#: kube-apiserver's --service-node-port-range default.
DEFAULT_NODE_PORT_RANGE = "30000-32767"
#: With the bitmap allocator still dual-written (1.33), a range has at most 2^20 addresses.
_MAX_HOST_BITS = 20


def family_of(ip: IPAddr | IPNetwork) -> str:
    return "IPv4" if ip.version == 4 else "IPv6"


def parse_ip(text: str) -> IPAddr | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _subrange_offset(size: int, lower: int, upper: int, step: int) -> int:
    """kube's calculateRangeOffset: min(max(lower, size/step), upper), 0 for tiny ranges."""
    if size <= lower:
        return 0
    return max(lower, min(size // step, upper))


def _scan(first: int, count: int, rng: random.Random) -> Iterator[int]:
    """Every value of [first, first+count) once, starting at a random one and wrapping."""
    if count <= 0:
        return
    start = rng.randrange(count)
    for i in range(count):
        yield first + (start + i) % count


@dataclass(frozen=True)
class ServiceIPRange:
    """One ServiceCIDR prefix and the addresses its allocator may hand out."""

    network: IPNetwork

    @classmethod
    def parse(cls, text: str) -> ServiceIPRange:
        """A range from flag or ServiceCIDR text; ValueError with the reason when it is unusable."""
        try:
            net = ipaddress.ip_network(text.strip(), strict=False)
        except ValueError as err:
            raise ValueError(f"invalid CIDR {text!r}: {err}") from None
        if net.max_prefixlen - net.prefixlen > _MAX_HOST_BITS:
            raise ValueError(f"specified --service-cluster-ip-range is too large; for {net.max_prefixlen}-bit "
                             f"addresses, the mask must be >= {net.max_prefixlen - _MAX_HOST_BITS}")
        if net.num_addresses < (4 if net.version == 4 else 2):
            raise ValueError(f"specified --service-cluster-ip-range {text} has no usable addresses")
        return cls(net)

    @property
    def family(self) -> str:
        return family_of(self.network)

    @property
    def first(self) -> int:
        """The first usable address (the network address is never used)."""
        return int(self.network.network_address) + 1

    @property
    def last(self) -> int:
        """The last usable address: IPv4 keeps its broadcast address out, IPv6 has none."""
        end = int(self.network.broadcast_address)
        return end - 1 if self.network.version == 4 else end

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    @property
    def offset(self) -> int:
        """How many addresses at the bottom are kept for static (requested) allocation."""
        return _subrange_offset(self.network.num_addresses, 16, 256, 16)

    def address(self, value: int) -> str:
        return str(ipaddress.ip_address(value) if self.network.version == 4 else ipaddress.IPv6Address(value))

    def indexed(self, index: int) -> str:
        """The address ``index`` past the network address (kube's GetIndexedIP)."""
        return self.address(int(self.network.network_address) + index)

    def contains(self, ip: IPAddr) -> bool:
        """Whether ``ip`` is an address this range hands out."""
        return ip.version == self.network.version and self.first <= int(ip) <= self.last

    def candidates(self, rng: random.Random) -> Iterator[str]:
        """Addresses in the order a dynamic allocation tries them: upper part, then lower part."""
        split = self.first + self.offset
        for value in _scan(split, self.last - split + 1, rng):
            yield self.address(value)
        for value in _scan(self.first, self.offset, rng):
            yield self.address(value)

    def __str__(self) -> str:
        return str(self.network)


@dataclass(frozen=True)
class PortRange:
    """``--service-node-port-range``: ``base-last`` or ``base+size`` (kube's net.PortRange)."""

    base: int
    size: int

    @classmethod
    def parse(cls, text: str) -> PortRange:
        value = text.strip()
        try:
            if "+" in value:
                low, count = value.split("+", 1)
                base, size = int(low), int(count) + 1
            elif "-" in value:
                low, high = value.split("-", 1)
                base, size = int(low), int(high) - int(low) + 1
            else:
                base, size = int(value), 1
        except ValueError:
            raise ValueError(f"unable to parse port range: {text}") from None
        if not (0 <= base <= 65535) or size < 1 or base + size - 1 > 65535:
            raise ValueError(f"unable to parse port range: {text}")
        return cls(base, size)

    @property
    def last(self) -> int:
        return self.base + self.size - 1

    @property
    def offset(self) -> int:
        """How many ports at the bottom are kept for static (requested) allocation."""
        return _subrange_offset(self.size, 16, 128, 32)

    def contains(self, port: int) -> bool:
        return self.base <= port <= self.last

    def candidates(self, rng: random.Random) -> Iterator[int]:
        """Ports in the order a dynamic allocation tries them: upper part, then lower part."""
        split = self.base + self.offset
        yield from _scan(split, self.last - split + 1, rng)
        yield from _scan(self.base, self.offset, rng)

    def __str__(self) -> str:
        return f"{self.base}-{self.last}"
