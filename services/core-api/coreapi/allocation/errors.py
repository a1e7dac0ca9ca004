"""The allocators' failures, worded as kube-apiserver's ipallocator and portallocator word them.

``pkg/registry/core/service/ipallocator`` and ``portallocator`` return these as plain Go errors;
the Service registry turns them into field errors (``spec.clusterIPs``, ``spec.ports[i].nodePort``)
or internal errors, so the text here is what a client reads in ``details.causes``.
"""

from __future__ import annotations


class AllocationError(Exception):
    """An allocation failed; ``str(err)`` is kube's error text."""


class RangeFull(AllocationError):
    def __init__(self) -> None:
        super().__init__("range is full")


class IPAlreadyAllocated(AllocationError):
    def __init__(self) -> None:
        super().__init__("provided IP is already allocated")


class PortAlreadyAllocated(AllocationError):
    def __init__(self) -> None:
        super().__init__("provided port is already allocated")


class MismatchedNetwork(AllocationError):
    """The IP is in no ServiceCIDR (network and IPv4 broadcast addresses included)."""

    def __init__(self) -> None:
        super().__init__("the provided network does not match the current range")


class PortNotInRange(AllocationError):
    def __init__(self, valid: str) -> None:
        super().__init__(f"provided port is not in the valid range. The range of valid ports is {valid}")
