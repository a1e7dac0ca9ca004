"""ServiceResolver: where a ``{namespace, name, port}`` service reference sends traffic.

kube-apiserver resolves the Service behind an APIService, a conversion webhook or an admission
webhook with one of two resolvers (``k8s.io/kube-aggregator/pkg/apiserver`` ``resolvers.go`` and
``k8s.io/apiserver/pkg/util/proxy`` ``ResolveEndpoint`` / ``ResolveCluster``): the cluster-IP
resolver (ExternalName -> that host, else the clusterIP) and, with aggregator routing, the
endpoint resolver (a ready address of the Service's EndpointSlices). kubechain has no kube-proxy,
so a clusterIP is rarely reachable; its resolver (DESIGN.md, "Delegation and routing") combines
them: ExternalName -> that host; else a ready endpoint address; else the clusterIP.

This module is pure logic over plain dicts (Service, EndpointSlices, legacy Endpoints). Lookups
go through a ``ServiceLookup`` (``genericapi.registry.serviceview`` implements it on the shared
etcd). Errors carry kube's messages and the reason the aggregator's availability controller needs.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from . import errors as apierrors

#: EndpointSlices name the Service they belong to with this label.
SERVICE_NAME_LABEL = "kubernetes.io/service-name"

# Reasons (the aggregator uses the first four as APIService ``Available`` reasons).
SERVICE_NOT_FOUND = "ServiceNotFound"
SERVICE_PORT_ERROR = "ServicePortError"
ENDPOINTS_NOT_FOUND = "EndpointsNotFound"
MISSING_ENDPOINTS = "MissingEndpoints"
UNSUPPORTED_TYPE = "UnsupportedServiceType"
HEADLESS = "ClusterIPNone"


class ServiceResolutionError(Exception):
    """A reference that resolves to no address; ``str()`` is kube's resolver error text."""

    def __init__(self, reason: str, message: str, name: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.name = name

    def api_error(self) -> apierrors.APIError:
        """The Status kube's resolver error is (NotFound, ServiceUnavailable, or a plain 500)."""
        if self.reason == SERVICE_NOT_FOUND:
            return apierrors.not_found("", "service", self.name)
        if self.reason in (SERVICE_PORT_ERROR, MISSING_ENDPOINTS, ENDPOINTS_NOT_FOUND):
            return apierrors.service_unavailable(self.message)
        return apierrors.APIError(500, "", self.message)


class ServiceLookup(Protocol):
    """Read access to the cluster's Services and their endpoints (a cache; never blocks)."""

    def service(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def endpoint_slices(self, namespace: str, service_name: str) -> list[dict[str, Any]]: ...

    def endpoints(self, namespace: str, name: str) -> dict[str, Any] | None: ...


def _spec(service: dict[str, Any]) -> dict[str, Any]:
    spec = service.get("spec")
    return spec if isinstance(spec, dict) else {}


def _name(service: dict[str, Any]) -> str:
    return str((service.get("metadata") or {}).get("name", ""))


def service_type(service: dict[str, Any]) -> str:
    """``spec.type`` with kube's default (ClusterIP)."""
    return str(_spec(service).get("type") or "ClusterIP")


def host_port(host: str, port: int) -> str:
    """``net.JoinHostPort``: IPv6 literals in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def not_found(name: str) -> ServiceResolutionError:
    return ServiceResolutionError(SERVICE_NOT_FOUND, f'service "{name}" not found', name)


def find_service_port(service: dict[str, Any], port: int) -> dict[str, Any]:
    """The Service port whose ``port`` is ``port`` (kube's ``findServicePort``)."""
    for sp in _spec(service).get("ports") or []:
        if isinstance(sp, dict) and sp.get("port") == port:
            return sp
    raise ServiceResolutionError(SERVICE_PORT_ERROR,
                                 f'no service port {port} found for service "{_name(service)}"')


def resolve_cluster(service: dict[str, Any], port: int) -> str:
    """kube's cluster-IP resolver: ExternalName -> ``https://<externalName>:<port>``, else the clusterIP."""
    kind, spec = service_type(service), _spec(service)
    if kind == "ClusterIP" and spec.get("clusterIP") == "None":
        raise ServiceResolutionError(HEADLESS, 'cannot route to service with ClusterIP "None"')
    if kind in ("ClusterIP", "LoadBalancer", "NodePort"):
        sp = find_service_port(service, port)
        return "https://" + host_port(str(spec.get("clusterIP") or ""), int(sp["port"]))
    if kind == "ExternalName":
        return "https://" + host_port(str(spec.get("externalName") or ""), port)
    raise ServiceResolutionError(UNSUPPORTED_TYPE, f'unsupported service type "{kind}"')


def _target_number(service_port: dict[str, Any]) -> int | None:
    target = service_port.get("targetPort")
    if isinstance(target, int) and not isinstance(target, bool):
        return target
    if target is None or target == "":
        port = service_port.get("port")
        return port if isinstance(port, int) else None
    return None  # a named targetPort: only the endpoint port's name can match it


def _port_matches(endpoint_port: dict[str, Any], service_port: dict[str, Any]) -> bool:
    """Endpoint ports carry the Service port's name and the target port's number.

    kube matches by name (an unnamed port is ``""``); a hand-written endpoint port without a name
    also matches by number when it equals the Service port's numeric targetPort.
    """
    if not isinstance(endpoint_port.get("port"), int):
        return False
    want = str(service_port.get("name") or "")
    have = endpoint_port.get("name")
    if have is not None and str(have) == want:
        return True
    return have in (None, "") and endpoint_port.get("port") == _target_number(service_port)


def _ready(endpoint: dict[str, Any]) -> bool:
    ready = (endpoint.get("conditions") or {}).get("ready")
    return ready is None or ready is True


def _slice_order(service: dict[str, Any], slices: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Slices of the Service's primary IP family first (kube sorts them so for dual-stack)."""
    families = _spec(service).get("ipFamilies") or []
    if len(slices) <= 1 or not families:
        return list(slices)
    primary = str(families[0])
    return sorted(slices, key=lambda s: s.get("addressType") != primary)


def ready_addresses(service: dict[str, Any], slices: Sequence[dict[str, Any]],
                    endpoints: dict[str, Any] | None, port: int) -> list[str]:
    """Every ``https://<ready address>:<target port>`` for the Service port ``port``.

    EndpointSlices are used when the Service has any; else the legacy Endpoints object (its
    ``addresses``, never ``notReadyAddresses``). Only the first address of a slice endpoint is used.
    """
    sp = find_service_port(service, port)
    urls: list[str] = []
    seen: set[str] = set()

    def add(ip: str, number: int) -> None:
        url = "https://" + host_port(ip, number)
        if url not in seen:
            seen.add(url)
            urls.append(url)

    if slices:
        for sl in _slice_order(service, slices):
            for ep_port in sl.get("ports") or []:
                if not isinstance(ep_port, dict) or not _port_matches(ep_port, sp):
                    continue
                for ep in sl.get("endpoints") or []:
                    addrs = ep.get("addresses") if isinstance(ep, dict) else None
                    if addrs and _ready(ep):
                        add(str(addrs[0]), int(ep_port["port"]))
        return urls
    for subset in (endpoints or {}).get("subsets") or []:
        if not isinstance(subset, dict):
            continue
        for ep_port in subset.get("ports") or []:
            if not isinstance(ep_port, dict) or not _port_matches(ep_port, sp):
                continue
            for addr in subset.get("addresses") or []:
                if isinstance(addr, dict) and addr.get("ip"):
                    add(str(addr["ip"]), int(ep_port["port"]))
    return urls


def resolve_endpoints(service: dict[str, Any], slices: Sequence[dict[str, Any]],
                      endpoints: dict[str, Any] | None, port: int) -> list[str]:
    """kube's endpoint resolver, all candidates: ready endpoint URLs, or its errors."""
    kind = service_type(service)
    if kind not in ("ClusterIP", "LoadBalancer", "NodePort"):
        raise ServiceResolutionError(UNSUPPORTED_TYPE, f'unsupported service type "{kind}"')
    urls = ready_addresses(service, slices, endpoints, port)
    if not urls:
        raise ServiceResolutionError(MISSING_ENDPOINTS, f'no endpoints available for service "{_name(service)}"')
    return urls


def resolve_all(service: dict[str, Any] | None, slices: Sequence[dict[str, Any]],
                endpoints: dict[str, Any] | None, name: str, port: int) -> list[str]:
    """kubechain's rule (DESIGN.md): ExternalName host; else ready endpoints; else the clusterIP."""
    if service is None:
        raise not_found(name)
    kind = service_type(service)
    if kind == "ExternalName":
        return [resolve_cluster(service, port)]
    if kind not in ("ClusterIP", "LoadBalancer", "NodePort"):
        raise ServiceResolutionError(UNSUPPORTED_TYPE, f'unsupported service type "{kind}"')
    urls = ready_addresses(service, slices, endpoints, port)
    if urls:
        return urls
    cluster_ip = str(_spec(service).get("clusterIP") or "")
    if cluster_ip and cluster_ip != "None":
        return [resolve_cluster(service, port)]
    raise ServiceResolutionError(MISSING_ENDPOINTS, f'no endpoints available for service "{_name(service)}"')


@dataclass(frozen=True)
class Availability:
    """An APIService ``Available`` condition for a service reference (status, reason, message)."""

    status: str
    reason: str
    message: str


def availability(service: dict[str, Any] | None, slices: Sequence[dict[str, Any]],
                 namespace: str, name: str, port: int) -> Availability | None:
    """The service checks of kube-aggregator's availability controller, before its discovery probe.

    None when the checks pass (the caller then probes discovery: ``Passed`` or
    ``FailedDiscoveryCheck``). Only ClusterIP Services have their port and EndpointSlices checked.
    """
    if service is None:
        return Availability("False", SERVICE_NOT_FOUND, f'service/{name} in "{namespace}" is not present')
    if service_type(service) != "ClusterIP":
        return None
    port_name = None
    for sp in _spec(service).get("ports") or []:
        if isinstance(sp, dict) and sp.get("port") == port:
            port_name = str(sp.get("name") or "")
            break
    if port_name is None:
        return Availability("False", SERVICE_PORT_ERROR,
                            f'service/{name} in "{namespace}" is not listening on port {port}')
    if not slices:
        return Availability("False", ENDPOINTS_NOT_FOUND,
                            f'cannot find endpointslices for service/{name} in "{namespace}"')
    for sl in slices:
        if not any(isinstance(ep, dict) and _ready(ep) for ep in sl.get("endpoints") or []):
            continue
        for p in sl.get("ports") or []:
            if isinstance(p, dict) and p.get("name") is not None and str(p["name"]) == port_name \
                    and isinstance(p.get("port"), int):
                return None
    return Availability("False", MISSING_ENDPOINTS,
                        f'endpointslices for service/{name} in "{namespace}" have no addresses '
                        f'with port name "{port_name}"')


Picker = Callable[[str, list[str]], str]


def random_picker(rng: random.Random | None = None) -> Picker:
    choose = (rng or random.Random()).choice
    return lambda _key, urls: choose(urls)


def round_robin_picker() -> Picker:
    counters: dict[str, itertools.count[int]] = {}

    def pick(key: str, urls: list[str]) -> str:
        counter = counters.setdefault(key, itertools.count())
        return urls[next(counter) % len(urls)]
    return pick


class ServiceResolver:
    """Resolves service references against a ``ServiceLookup``, balancing across ready endpoints."""

    def __init__(self, lookup: ServiceLookup, picker: Picker | None = None) -> None:
        self.lookup = lookup
        self._pick = picker or random_picker()

    def resolve_all(self, namespace: str, name: str, port: int) -> list[str]:
        service = self.lookup.service(namespace, name)
        if service is None:
            raise not_found(name)
        slices = self.lookup.endpoint_slices(namespace, name)
        endpoints = None if slices else self.lookup.endpoints(namespace, name)
        return resolve_all(service, slices, endpoints, name, port)

    def resolve(self, namespace: str, name: str, port: int) -> str:
        """One base URL (``https://host:port``) for the reference; raises ServiceResolutionError."""
        urls = self.resolve_all(namespace, name, port)
        return urls[0] if len(urls) == 1 else self._pick(f"{namespace}/{name}:{port}", urls)

    def availability(self, namespace: str, name: str, port: int) -> Availability | None:
        service = self.lookup.service(namespace, name)
        return availability(service, self.lookup.endpoint_slices(namespace, name) if service else [],
                            namespace, name, port)


class StaticLookup:
    """A ``ServiceLookup`` over given objects (tests, one-off resolutions)."""

    def __init__(self, services: Sequence[dict[str, Any]] = (), endpoint_slices: Sequence[dict[str, Any]] = (),
                 endpoints: Sequence[dict[str, Any]] = ()) -> None:
        self._services = {_ns_name(s): s for s in services}
        self._slices = list(endpoint_slices)
        self._endpoints = {_ns_name(e): e for e in endpoints}

    def service(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._services.get((namespace, name))

    def endpoint_slices(self, namespace: str, service_name: str) -> list[dict[str, Any]]:
        return [s for s in self._slices if _ns_name(s)[0] == namespace
                and ((s.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL) == service_name]

    def endpoints(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._endpoints.get((namespace, name))


def _ns_name(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
