"""Where a node's kubelet is reached, as kube-apiserver's ``NodeConnectionInfoGetter`` decides.

``pods/log``, ``pods/exec`` and ``nodes/proxy`` go to a kubelet: the node's first address of
the preferred types (kube-apiserver's ``--kubelet-preferred-address-types`` default: Hostname,
InternalDNS, InternalIP, ExternalDNS, ExternalIP; a Hostname falls back to the
``kubernetes.io/hostname`` label), on the port the node reports in
``status.daemonEndpoints.kubeletEndpoint`` or 10250, over https. Also the Go wording of the
errors a failed dial or lookup produces, which kube passes to clients as is.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from dataclasses import dataclass
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.registry.store import Store

PREFERRED_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")
DEFAULT_KUBELET_PORT = 10250
_VALID_SCHEMES = ("", "http", "https")


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    scheme: str
    host: str
    port: str


def go_addresses(addresses: list[dict[str, Any]]) -> str:
    """``%v`` of a ``[]NodeAddress``: ``[{InternalIP 10.0.0.1} {Hostname n1}]``."""
    return "[" + " ".join(f"{{{a.get('type', '')} {a.get('address', '')}}}" for a in addresses) + "]"


def preferred_address(node: dict[str, Any]) -> str:
    """The node's address kube-apiserver dials (``GetPreferredNodeAddress``); a plain error (500)
    when it has none of the preferred types."""
    addresses = [a for a in (node.get("status") or {}).get("addresses") or [] if isinstance(a, dict)]
    for kind in PREFERRED_ADDRESS_TYPES:
        for addr in addresses:
            if addr.get("type") == kind:
                return str(addr.get("address", ""))
        if kind == "Hostname":
            hostname = ((node.get("metadata") or {}).get("labels") or {}).get("kubernetes.io/hostname")
            if hostname:
                return str(hostname)
    raise apierrors.unknown_error(f"no preferred addresses found; known addresses: {go_addresses(addresses)}")


async def connection_info(nodes: Store, node_name: str) -> ConnectionInfo:
    """How to reach ``node_name``'s kubelet (404 ``nodes "x" not found`` when there is no such node)."""
    node = await nodes.get("", node_name)
    host = preferred_address(node)
    endpoint = (((node.get("status") or {}).get("daemonEndpoints") or {}).get("kubeletEndpoint") or {})
    port = endpoint.get("Port")
    if not isinstance(port, int) or port <= 0:
        port = DEFAULT_KUBELET_PORT
    return ConnectionInfo("https", host, str(port))


def split_scheme_name_port(ident: str) -> tuple[str, str, str] | None:
    """``name``, ``name:port`` or ``scheme:name:port`` (apimachinery's ``SplitSchemeNamePort``)."""
    parts = ident.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        return None
    if not name or scheme not in _VALID_SCHEMES:
        return None
    return scheme, name, port


def join_host_port(host: str, port: str) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_global_unicast(text: str) -> bool:
    """Go's ``IP.IsGlobalUnicast`` (private ranges included): what a pod proxy may reach."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    if ip.version == 4 and ip == ipaddress.IPv4Address("255.255.255.255"):
        return False
    return not (ip.is_unspecified or ip.is_loopback or ip.is_multicast or ip.is_link_local)


def _proxyable_ip(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """apimachinery's ``IsProxyableIP``: no loopback, link-local or interface-local multicast."""
    if ip.is_loopback or ip.is_link_local:
        return False
    return not (ip.version == 6 and ip.is_multicast and (ip.packed[1] & 0x0F) in (1, 2))


async def check_proxyable_hostname(host: str) -> None:
    """``IsProxyableHostname``: every address ``host`` resolves to must be proxyable (400
    ``address not allowed``); a name that does not resolve is a 400 with the lookup error."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        raise apierrors.bad_request(f"lookup {host}: no such host") from None
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if not _proxyable_ip(ip):
            raise apierrors.bad_request("address not allowed")


def dial_error(host_port: str, err: BaseException) -> str:
    """Go's ``net.OpError`` text for a failed TCP dial: ``dial tcp 10.0.0.1:10250: connect:
    connection refused``."""
    if isinstance(err, TimeoutError):
        return f"dial tcp {host_port}: i/o timeout"
    cause: BaseException | None = getattr(err, "os_error", None) or err  # aiohttp wraps the OSError
    while cause is not None and not (isinstance(cause, OSError) and cause.errno):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, OSError) and cause.errno:
        text = os.strerror(cause.errno)
        return f"dial tcp {host_port}: connect: {text[0].lower()}{text[1:]}"
    return f"dial tcp {host_port}: {err}"
