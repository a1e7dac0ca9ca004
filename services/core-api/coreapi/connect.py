"""The connect subresources of pods, nodes and services, resolved as kube-apiserver resolves them.

A node-less cluster has no kubelet and usually no endpoint behind these, so most requests end
in the error kube 1.33 gives at the same point (``pkg/registry/core/pod/strategy.go``'s
``LogLocation``/``streamLocation``/``ResourceLocation``, the node and service ``ResourceLocation``):

* ``pods/log``: options checked (400/422), the pod (404), the container (400 ``container y is
  not valid for pod p``); a pod without ``spec.nodeName`` has no location, which kube answers
  with an empty 204; otherwise the node (404), its address (500) and a GET to its kubelet.
* ``pods/exec|attach``: the same, but no node is a 400 ``pod p does not have a host assigned``;
  ``pods/portforward`` skips the container. With a node, the kubelet is dialled; a refused dial
  is kube's ``error dialing backend: ...``. Upgraded streams are never proxied (see report).
* ``*/proxy``: the target (pod IP, a ready endpoint backed by a pod, a node address) or kube's
  400/404/503, then a real HTTP proxy (``upstream``); an empty path redirects to ``.../proxy/``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.registry import connect as registry_connect
from genericapi.registry.connect import ConnectRequest, ConnectResponse, ConnectSpec
from genericapi.registry.store import Store
from genericapi.server.apiserver import GenericAPIServer

from .connect_options import first, pod_log_options
from .kubeletconn import (
    ConnectionInfo,
    check_proxyable_hostname,
    connection_info,
    dial_error,
    is_global_unicast,
    join_host_port,
    split_scheme_name_port,
)
from .upstream import CONNECT_TIMEOUT, Upstream


def _containers(pod: dict[str, Any]) -> list[str]:
    """Every container name kube's ``VisitContainers`` sees: init, regular, ephemeral."""
    spec = pod.get("spec") or {}
    names: list[str] = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        names += [str(c.get("name", "")) for c in spec.get(key) or [] if isinstance(c, dict)]
    return names


def validate_container(container: str, pod: dict[str, Any]) -> str:
    """kube's ``validateContainer``: the named container, or the only one."""
    name = str((pod.get("metadata") or {}).get("name", ""))
    if not container:
        regular = [c for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
        if len(regular) == 1:
            return str(regular[0].get("name", ""))
        if not regular:
            raise apierrors.bad_request(f"a container name must be specified for pod {name}")
        raise apierrors.bad_request(f"a container name must be specified for pod {name}, "
                                    f"choose one of: [{' '.join(_containers(pod))}]")
    if container not in _containers(pod):
        raise apierrors.bad_request(f"container {container} is not valid for pod {name}")
    return container


def _join_path(base: str, sub: str) -> str:
    """``JoinPreservingTrailingSlash`` then the request's own trailing slash."""
    path = (base.rstrip("/") + "/" + sub.lstrip("/")) if sub else base
    return path if path.startswith("/") or not path else "/" + path


class Connectors:
    """The connectors of one core-api, over its pod, node, service and endpoints stores."""

    def __init__(self, pods: Store, nodes: Store, services: Store, endpoints: Store,
                 upstream: Upstream | None = None) -> None:
        self.pods, self.nodes, self.services, self.endpoints = pods, nodes, services, endpoints
        self.upstream = upstream or Upstream()

    # pods/log ----------------------------------------------------------------------------------
    async def pod_log(self, req: ConnectRequest) -> ConnectResponse:
        opts = pod_log_options(req.name, req.query)
        pod = await self.pods.get(req.namespace, req.name)
        container = validate_container(opts.container, pod)
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        if not node_name:
            return ConnectResponse(204)  # no location: kube writes no content
        info = await connection_info(self.nodes, node_name)
        host_port = join_host_port(info.host, info.port)
        query = opts.kubelet_query()
        url = f"{info.scheme}://{host_port}/containerLogs/{req.namespace}/{req.name}/{container}"
        return await self.upstream.get_stream(url + (f"?{query}" if query else ""), host_port, "text/plain")

    # pods/exec, attach, portforward ------------------------------------------------------------
    async def _stream_target(self, req: ConnectRequest, container_too: bool) -> ConnectionInfo:
        pod = await self.pods.get(req.namespace, req.name)
        if container_too:
            validate_container(first(req.query, "container") or "", pod)
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        if not node_name:
            raise apierrors.bad_request(f"pod {req.name} does not have a host assigned")
        return await connection_info(self.nodes, node_name)

    async def _dial_kubelet(self, info: ConnectionInfo) -> ConnectResponse:
        host_port = join_host_port(info.host, info.port)
        try:
            _reader, writer = await asyncio.wait_for(
                asyncio.open_connection(info.host, int(info.port)), CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as err:
            raise apierrors.unknown_error(f"error dialing backend: {dial_error(host_port, err)}") from None
        writer.close()
        raise apierrors.unknown_error(
            f"error dialing backend: streaming to the kubelet at {host_port} is not supported by kubechain")

    async def pod_exec(self, req: ConnectRequest) -> ConnectResponse:
        return await self._dial_kubelet(await self._stream_target(req, True))

    async def pod_portforward(self, req: ConnectRequest) -> ConnectResponse:
        return await self._dial_kubelet(await self._stream_target(req, False))

    # */proxy -----------------------------------------------------------------------------------
    async def _proxy_to(self, req: ConnectRequest, scheme: str, host_port: str) -> ConnectResponse:
        path = _join_path("", req.path)
        if req.path.endswith("/") and not path.endswith("/"):
            path += "/"
        if not path:
            # kube's hack for issue 4958: an empty path redirects to the same URL with a slash.
            location = req.request_path + "/" + (f"?{req.raw_query}" if req.raw_query else "")
            return ConnectResponse(301, [("Location", location)])
        url = f"{scheme or 'http'}://{host_port}{path}" + (f"?{req.raw_query}" if req.raw_query else "")
        return await self.upstream.proxy(req.method, url, host_port, req.headers, req.body)

    async def pod_proxy(self, req: ConnectRequest) -> ConnectResponse:
        parsed = split_scheme_name_port(req.name)
        if parsed is None:
            raise apierrors.bad_request(f'invalid pod request "{req.name}"')
        scheme, name, port = parsed
        pod = await self.pods.get(req.namespace, name)
        if not port:
            for container in (pod.get("spec") or {}).get("containers") or []:
                ports = container.get("ports") or []
                if ports:
                    port = str(ports[0].get("containerPort", ""))
                    break
        ips = (pod.get("status") or {}).get("podIPs") or []
        pod_ip = str(ips[0].get("ip", "")) if ips and isinstance(ips[0], dict) else ""
        if not is_global_unicast(pod_ip):
            raise apierrors.bad_request("address not allowed")
        host = join_host_port(pod_ip, port) if port else (f"[{pod_ip}]" if ":" in pod_ip else pod_ip)
        return await self._proxy_to(req, scheme, host)

    async def node_proxy(self, req: ConnectRequest) -> ConnectResponse:
        parsed = split_scheme_name_port(req.name)
        if parsed is None:
            raise apierrors.bad_request(f'invalid node request "{req.name}"')
        scheme, name, port = parsed
        info = await connection_info(self.nodes, name)
        await check_proxyable_hostname(info.host)
        if not port or port == info.port:
            return await self._proxy_to(req, info.scheme, join_host_port(info.host, info.port))
        return await self._proxy_to(req, scheme, join_host_port(info.host, port))

    async def service_proxy(self, req: ConnectRequest) -> ConnectResponse:
        scheme, host_port = await self.service_location(req.namespace, req.name)
        return await self._proxy_to(req, scheme, host_port)

    async def service_location(self, namespace: str, ident: str) -> tuple[str, str]:
        """kube's service ``ResourceLocation``: a ready endpoint address backed by a pod."""
        parsed = split_scheme_name_port(ident)
        if parsed is None:
            raise apierrors.bad_request(f'invalid service request "{ident}"')
        scheme, name, port = parsed
        if port.isdigit():
            svc = await self.services.get(namespace, name)
            named = next((p for p in (svc.get("spec") or {}).get("ports") or []
                          if str(p.get("port")) == str(int(port))), None)
            if named is None:
                raise apierrors.service_unavailable(f'no service port {int(port)} found for service "{name}"')
            port = str(named.get("name") or "")
        eps = await self.endpoints.get(namespace, name)
        subsets = [s for s in eps.get("subsets") or [] if isinstance(s, dict)]
        if not subsets:
            raise apierrors.service_unavailable(f'no endpoints available for service "{name}"')
        for subset in subsets:
            addresses = subset.get("addresses") or []
            for ep_port in subset.get("ports") or []:
                if str(ep_port.get("name") or "") != port:
                    continue
                for addr in addresses:
                    if await self._backed_by_pod(namespace, addr):
                        return scheme, join_host_port(str(addr.get("ip", "")), str(ep_port.get("port", "")))
        raise apierrors.service_unavailable(f'no endpoints available for service "{ident}"')

    async def _backed_by_pod(self, namespace: str, addr: dict[str, Any]) -> bool:
        """kube's ``isValidAddress``: the address is the IP of the pod its targetRef names."""
        ref = addr.get("targetRef") or {}
        if not ref or ref.get("namespace") != namespace:
            return False
        try:
            pod = await self.pods.get(namespace, str(ref.get("name", "")))
        except apierrors.APIError:
            return False
        return any(p.get("ip") == addr.get("ip") for p in (pod.get("status") or {}).get("podIPs") or [])


def install(server: GenericAPIServer) -> Connectors:
    """Serve the connect subresources on the server's pod, node and service stores."""
    by = server.by_resource
    conns = Connectors(by[("", "pods")], by[("", "nodes")], by[("", "services")], by[("", "endpoints")])
    pods = by[("", "pods")]
    registry_connect.install(pods, "log", ConnectSpec(conns.pod_log, registry_connect.GET_ONLY))
    for sub in ("exec", "attach"):
        registry_connect.install(pods, sub, ConnectSpec(conns.pod_exec, registry_connect.STREAM_METHODS))
    registry_connect.install(pods, "portforward",
                             ConnectSpec(conns.pod_portforward, registry_connect.STREAM_METHODS))
    proxy = registry_connect.PROXY_METHODS
    registry_connect.install(pods, "proxy", ConnectSpec(conns.pod_proxy, proxy, subpath=True))
    registry_connect.install(by[("", "nodes")], "proxy", ConnectSpec(conns.node_proxy, proxy, subpath=True))
    registry_connect.install(by[("", "services")], "proxy", ConnectSpec(conns.service_proxy, proxy, subpath=True))

    async def close(_s: GenericAPIServer) -> None:
        await conns.upstream.close()

    server.pre_shutdown.append(close)
    return conns
