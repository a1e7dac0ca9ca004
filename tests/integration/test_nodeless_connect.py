"""Connect subresources on a cluster without kubelets, against the real chain: ``pods/log``,
``pods/exec``, ``pods/attach``, ``pods/portforward``, ``pods/proxy``, ``nodes/proxy``,
``services/proxy``.

Exact Status bodies over raw HTTP for every place kube 1.33 stops (options, pod, container,
node, node address, kubelet dial, endpoints); ``kubectl logs``/``exec``/``port-forward``/
``get --raw`` with kubectl 1.27 and 1.33; and real proxying where a real server answers (a
pod-backed endpoint and, when the host has a non-loopback address, a pod IP and a node port).
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import socket
import ssl
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from support.objects import status_of
from support.procs import ChainHandle, kubectl_params
from support.reference import DISCOVERY_DIR

pytestmark = pytest.mark.integration

NS = "connect"


KUBECTLS = kubectl_params("1.27", "1.33")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: A documentation-range address (TEST-NET-1) the test puts on a veth interface of this machine: a
#: non-loopback address that is still this machine's own, so proxied traffic never leaves it.
TEST_ADDRESS = "192.0.2.77"
TEST_LINK = "kctest0"


@pytest.fixture(scope="module")
def host_ip() -> Iterator[str]:
    """A non-loopback address of this machine (what a pod IP or node address can be here), or ""."""
    made = subprocess.run(["ip", "link", "add", TEST_LINK, "type", "veth", "peer", "name", f"{TEST_LINK}p"],
                          capture_output=True)
    if made.returncode != 0:
        yield ""
        return
    try:
        subprocess.run(["ip", "addr", "add", f"{TEST_ADDRESS}/32", "dev", TEST_LINK], check=True, capture_output=True)
        subprocess.run(["ip", "link", "set", TEST_LINK, "up"], check=True, capture_output=True)
        yield TEST_ADDRESS
    finally:
        subprocess.run(["ip", "link", "del", TEST_LINK], capture_output=True)


class _Echo(http.server.BaseHTTPRequestHandler):
    """A real upstream: answers with what it received."""

    seen_headers: list[str] = []

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        _Echo.seen_headers = sorted(k.lower() for k in self.headers)
        out = json.dumps({"method": self.command, "path": self.path, "body": body.decode()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Upstream", "echo")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer

    def log_message(self, *_args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def echo() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()


@pytest.fixture(scope="module")
def ns(chain: ChainHandle) -> str:
    chain.kubectl("create", "namespace", NS)
    return NS


def pod(chain: ChainHandle, name: str, containers: tuple[str, ...] = ("c",), node: str = "",
        pod_ip: str = "", ports: tuple[int, ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [
        {"name": c, "image": "busybox:1.36", **({"ports": [{"containerPort": p} for p in ports]} if ports else {})}
        for c in containers]}
    if node:
        spec["nodeName"] = node
    status, created = chain.json("POST", f"/api/v1/namespaces/{NS}/pods",
                                 {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
    assert status == 201, created
    if pod_ip:
        created["status"] = {"phase": "Running", "podIP": pod_ip, "podIPs": [{"ip": pod_ip}]}
        status, created = chain.json("PUT", f"/api/v1/namespaces/{NS}/pods/{name}/status", created)
        assert status == 200, created
    return dict(created)


def node(chain: ChainHandle, name: str, addresses: list[dict[str, str]], kubelet_port: int = 0) -> None:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    status, created = chain.json("POST", "/api/v1/nodes", body)
    assert status == 201, created
    created["status"] = {"addresses": addresses}
    if kubelet_port:
        created["status"]["daemonEndpoints"] = {"kubeletEndpoint": {"Port": kubelet_port}}
    status, updated = chain.json("PUT", f"/api/v1/nodes/{name}/status", created)
    assert status == 200, updated


def get(chain: ChainHandle, path: str, method: str = "GET", body: bytes | None = None
        ) -> tuple[int, dict[str, str], bytes]:
    return chain.request(method, path, raw=body)


def no_redirect(chain: ChainHandle, path: str) -> tuple[int, str]:
    """Status and Location of a GET, redirects not followed."""
    url = urllib.parse.urlsplit(chain.url)
    conn = http.client.HTTPSConnection(url.hostname or "", url.port, context=chain.ssl_context(), timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.status, resp.getheader("Location") or ""
    finally:
        conn.close()


def expect(chain: ChainHandle, path: str, code: int, status: dict[str, Any], method: str = "GET") -> None:
    got, _h, data = get(chain, path, method, b"" if method in ("POST", "PUT") else None)
    assert (got, json.loads(data)) == (code, status)


# --------------------------------------------------------------------------- discovery


def test_discovery_lists_connect_subresources_as_kube(chain: ChainHandle) -> None:
    reference = json.loads((DISCOVERY_DIR / "api__v1.json").read_text())
    names = ("pods/attach", "pods/exec", "pods/log", "pods/portforward", "pods/proxy", "nodes/proxy",
             "services/proxy")
    want = {r["name"]: r for r in reference["resources"] if r["name"] in names}
    _, ours = chain.json("GET", "/api/v1")
    assert {r["name"]: r for r in ours["resources"] if r["name"] in names} == want
    assert want["pods/log"] == {"kind": "Pod", "name": "pods/log", "namespaced": True, "singularName": "",
                                "verbs": ["get"]}


# --------------------------------------------------------------------------- pods/log


def test_log_of_an_unscheduled_pod_is_empty(chain: ChainHandle, ns: str) -> None:
    pod(chain, "pending")
    code, _h, data = get(chain, f"/api/v1/namespaces/{ns}/pods/pending/log")
    assert (code, data) == (204, b"")  # kube: no location, no content


@pytest.mark.parametrize("version", KUBECTLS)
def test_kubectl_logs(chain: ChainHandle, ns: str, version: str) -> None:
    with contextlib.suppress(AssertionError):
        pod(chain, "pending")
    out = chain.kubectl("logs", "-n", ns, "pending", version=version)
    assert (out.returncode, out.stdout) == (0, "")
    missing = chain.kubectl("logs", "-n", ns, "nope", version=version, check=False)
    assert missing.returncode == 1
    assert 'pods "nope" not found' in missing.stderr


def test_log_errors_as_kube(chain: ChainHandle, ns: str) -> None:
    base = f"/api/v1/namespaces/{ns}/pods"
    pod(chain, "two", containers=("a", "b"))
    expect(chain, f"{base}/nope/log", 404, status_of(
        404, 'pods "nope" not found', "NotFound", {"name": "nope", "kind": "pods"}))
    expect(chain, f"{base}/two/log", 400, status_of(
        400, "a container name must be specified for pod two, choose one of: [a b]", "BadRequest"))
    expect(chain, f"{base}/two/log?container=y", 400, status_of(400, "container y is not valid for pod two",
                                                                 "BadRequest"))
    expect(chain, f"{base}/two/log?container=a&tailLines=-1", 422, status_of(
        422, 'PodLogOptions "two" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0',
        "Invalid", {"name": "two", "kind": "PodLogOptions", "causes": [
            {"reason": "FieldValueInvalid", "message": "Invalid value: -1: must be greater than or equal to 0",
             "field": "tailLines"}]}))
    # options are checked before the pod is looked up
    expect(chain, f"{base}/nope/log?limitBytes=0", 422, status_of(
        422, 'PodLogOptions "nope" is invalid: limitBytes: Invalid value: 0: must be greater than 0',
        "Invalid", {"name": "nope", "kind": "PodLogOptions", "causes": [
            {"reason": "FieldValueInvalid", "message": "Invalid value: 0: must be greater than 0",
             "field": "limitBytes"}]}))
    expect(chain, f"{base}/two/log?tailLines=abc", 400, status_of(
        400, 'strconv.ParseInt: parsing "abc": invalid syntax', "BadRequest"))
    code, _h, data = get(chain, f"{base}/two/log?container=a&sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z")
    assert code == 422
    assert "at most one of `sinceTime` or `sinceSeconds` may be specified" in json.loads(data)["message"]
    # pods/log takes GET only; nothing follows it
    expect(chain, f"{base}/two/log", 405, status_of(
        405, "the server does not allow this method on the requested resource", "MethodNotAllowed", {}), "POST")
    expect(chain, f"{base}/two/log/extra", 404, status_of(
        404, "the server could not find the requested resource", "NotFound", {}))


def test_log_of_a_pod_on_a_node_kube_cannot_reach(chain: ChainHandle, ns: str) -> None:
    base = f"/api/v1/namespaces/{ns}/pods"
    pod(chain, "on-ghost", node="ghost")
    expect(chain, f"{base}/on-ghost/log", 404, status_of(
        404, 'nodes "ghost" not found', "NotFound", {"name": "ghost", "kind": "nodes"}))
    node(chain, "no-address", [])
    pod(chain, "on-no-address", node="no-address")
    expect(chain, f"{base}/on-no-address/log", 500, status_of(
        500, "no preferred addresses found; known addresses: []"))
    port = closed_port()
    node(chain, "down", [{"type": "InternalIP", "address": "127.0.0.1"}], kubelet_port=port)
    pod(chain, "on-down", node="down")
    expect(chain, f"{base}/on-down/log?follow=true&tailLines=3", 500, status_of(
        500, f'Get "https://127.0.0.1:{port}/containerLogs/{ns}/on-down/c?follow=true&tailLines=3": '
             f"dial tcp 127.0.0.1:{port}: connect: connection refused"))


class _Kubelet(http.server.BaseHTTPRequestHandler):
    """A kubelet's log endpoint over TLS: ``/containerLogs/<ns>/<pod>/<container>``."""

    def do_GET(self) -> None:
        if not self.path.startswith("/containerLogs/"):
            self.send_error(404)
            return
        out = f"line 1\nline 2 from {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *_args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def kubelet(chain: ChainHandle) -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Kubelet)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*chain.chain.pki.pair("apiserver"))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()


@pytest.mark.parametrize("version", KUBECTLS)
def test_logs_streamed_from_a_kubelet(chain: ChainHandle, ns: str, kubelet: int, version: str) -> None:
    with contextlib.suppress(AssertionError):
        node(chain, "with-kubelet", [{"type": "InternalIP", "address": "127.0.0.1"}], kubelet_port=kubelet)
    with contextlib.suppress(AssertionError):
        pod(chain, "logged", node="with-kubelet")
    code, headers, data = get(chain, f"/api/v1/namespaces/{ns}/pods/logged/log?tailLines=2&timestamps=1")
    assert (code, headers["content-type"]) == (200, "text/plain")
    assert data == f"line 1\nline 2 from /containerLogs/{ns}/logged/c?tailLines=2&timestamps=true\n".encode()
    out = chain.kubectl("logs", "-n", ns, "logged", version=version)
    assert out.stdout == f"line 1\nline 2 from /containerLogs/{ns}/logged/c\n"


# --------------------------------------------------------------------------- exec, attach, portforward


def test_streams_of_an_unscheduled_pod(chain: ChainHandle, ns: str) -> None:
    base = f"/api/v1/namespaces/{ns}/pods"
    with contextlib.suppress(AssertionError):
        pod(chain, "pending")
    for sub, method in (("exec?command=ls", "POST"), ("exec?command=ls", "GET"), ("attach", "POST"),
                        ("portforward?ports=80", "GET")):
        expect(chain, f"{base}/pending/{sub}", 400, status_of(
            400, "pod pending does not have a host assigned", "BadRequest"), method)
    expect(chain, f"{base}/pending/exec?container=y", 400, status_of(
        400, "container y is not valid for pod pending", "BadRequest"), "POST")
    expect(chain, f"{base}/nope/exec", 404, status_of(
        404, 'pods "nope" not found', "NotFound", {"name": "nope", "kind": "pods"}), "POST")
    expect(chain, f"{base}/pending/exec", 405, status_of(
        405, "the server does not allow this method on the requested resource", "MethodNotAllowed", {}), "PUT")


def test_exec_to_a_kubelet_that_does_not_answer(chain: ChainHandle, ns: str) -> None:
    port = closed_port()
    node(chain, "down-exec", [{"type": "InternalIP", "address": "127.0.0.1"}], kubelet_port=port)
    pod(chain, "on-down-exec", node="down-exec")
    expect(chain, f"/api/v1/namespaces/{ns}/pods/on-down-exec/exec?command=ls", 500, status_of(
        500, f"error dialing backend: dial tcp 127.0.0.1:{port}: connect: connection refused"), "POST")


@pytest.mark.parametrize("version", KUBECTLS)
def test_kubectl_exec_and_port_forward(chain: ChainHandle, ns: str, version: str) -> None:
    with contextlib.suppress(AssertionError):
        pod(chain, "pending")
    out = chain.kubectl("exec", "-n", ns, "pending", "--", "ls", version=version, check=False)
    assert out.returncode == 1
    assert "pod pending does not have a host assigned" in out.stderr
    with contextlib.suppress(AssertionError):
        pod(chain, "bound-nowhere", node="ghost")
    out = chain.kubectl("exec", "-n", ns, "bound-nowhere", "--", "ls", version=version, check=False)
    assert out.returncode == 1
    assert 'nodes "ghost" not found' in out.stderr


# --------------------------------------------------------------------------- services/proxy


def service(chain: ChainHandle, name: str, port: int = 80) -> None:
    status, created = chain.json("POST", f"/api/v1/namespaces/{NS}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"ports": [{"name": "web", "port": port, "targetPort": port}]}})
    assert status == 201, created


def endpoints(chain: ChainHandle, name: str, subsets: list[dict[str, Any]]) -> None:
    status, created = chain.json("POST", f"/api/v1/namespaces/{NS}/endpoints", {
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name}, "subsets": subsets})
    assert status == 201, created


def test_service_proxy_without_endpoints(chain: ChainHandle, ns: str) -> None:
    base = f"/api/v1/namespaces/{ns}/services"
    service(chain, "lonely")
    expect(chain, f"{base}/lonely/proxy/", 404, status_of(
        404, 'endpoints "lonely" not found', "NotFound", {"name": "lonely", "kind": "endpoints"}))
    endpoints(chain, "lonely", [])
    for method in ("GET", "POST", "PUT", "DELETE"):
        expect(chain, f"{base}/lonely/proxy/some/path", 503, status_of(
            503, 'no endpoints available for service "lonely"', "ServiceUnavailable"), method)
    expect(chain, f"{base}/lonely:8080/proxy/", 503, status_of(
        503, 'no service port 8080 found for service "lonely"', "ServiceUnavailable"))
    expect(chain, f"{base}/a:b:c:d/proxy/", 400, status_of(400, 'invalid service request "a:b:c:d"', "BadRequest"))
    expect(chain, f"{base}/ftp:lonely:80/proxy/", 400, status_of(
        400, 'invalid service request "ftp:lonely:80"', "BadRequest"))
    expect(chain, f"{base}/missing:80/proxy/", 404, status_of(
        404, 'services "missing" not found', "NotFound", {"name": "missing", "kind": "services"}))


@pytest.mark.parametrize("version", KUBECTLS)
def test_kubectl_get_raw_service_proxy(chain: ChainHandle, ns: str, version: str) -> None:
    with contextlib.suppress(AssertionError):
        service(chain, "lonely")
    out = chain.kubectl("get", "--raw", f"/api/v1/namespaces/{ns}/services/lonely/proxy/", version=version,
                        check=False)
    assert out.returncode == 1
    assert "no endpoints available for service" in out.stderr or 'endpoints "lonely" not found' in out.stderr


def test_service_proxy_reaches_a_pod_backed_endpoint(chain: ChainHandle, ns: str, echo: int) -> None:
    base = f"/api/v1/namespaces/{ns}/services"
    pod(chain, "backend", pod_ip="127.0.0.1")
    service(chain, "echo", port=echo)
    endpoints(chain, "echo", [{"addresses": [{"ip": "127.0.0.1", "targetRef": {
        "kind": "Pod", "namespace": ns, "name": "backend"}}], "ports": [{"name": "web", "port": echo}]}])
    # the name alone picks the endpoints' unnamed port: these are named, so kube finds none
    expect(chain, f"{base}/echo/proxy/", 503, status_of(
        503, 'no endpoints available for service "echo"', "ServiceUnavailable"))
    code, headers, data = get(chain, f"{base}/echo:web/proxy/hello/world?x=1&y=2")
    assert code == 200 and headers["x-upstream"] == "echo"
    assert json.loads(data) == {"method": "GET", "path": "/hello/world?x=1&y=2", "body": ""}
    # the chain's identity headers stay inside the API server
    assert not [h for h in _Echo.seen_headers if h.startswith(("x-remote-", "authorization", "impersonate-"))]
    code, _h, data = get(chain, f"{base}/http:echo:{echo}/proxy/post/", "POST", b"payload")
    assert (code, json.loads(data)) == (200, {"method": "POST", "path": "/post/", "body": "payload"})
    assert no_redirect(chain, f"{base}/echo:web/proxy?a=b") == (301, f"{base}/echo:web/proxy/?a=b")
    code, _h, data = get(chain, f"{base}/echo:web/proxy?a=b")  # followed: the upstream's root
    assert (code, json.loads(data)["path"]) == (200, "/?a=b")
    # an address no pod of the namespace holds is not a usable endpoint
    service(chain, "stray", port=echo)
    endpoints(chain, "stray", [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "web", "port": echo}]}])
    expect(chain, f"{base}/stray:web/proxy/", 503, status_of(
        503, 'no endpoints available for service "stray:web"', "ServiceUnavailable"))
    # the endpoint's server is gone: kube's transport error
    port = closed_port()
    service(chain, "gone", port=port)
    endpoints(chain, "gone", [{"addresses": [{"ip": "127.0.0.1", "targetRef": {
        "kind": "Pod", "namespace": ns, "name": "backend"}}], "ports": [{"name": "web", "port": port}]}])
    expect(chain, f"{base}/gone:web/proxy/", 503, status_of(
        503, f"error trying to reach service: dial tcp 127.0.0.1:{port}: connect: connection refused",
        "ServiceUnavailable"))
    out = chain.kubectl("get", "--raw", f"{base}/echo:{echo}/proxy/raw")
    assert json.loads(out.stdout)["path"] == "/raw"


# --------------------------------------------------------------------------- pods/proxy, nodes/proxy


def test_pod_and_node_proxy_refusals(chain: ChainHandle, ns: str) -> None:
    base = f"/api/v1/namespaces/{ns}/pods"
    with contextlib.suppress(AssertionError):
        pod(chain, "pending")
    expect(chain, f"{base}/pending/proxy/", 400, status_of(400, "address not allowed", "BadRequest"))
    pod(chain, "loopback", pod_ip="127.0.0.1", ports=(8080,))
    expect(chain, f"{base}/loopback/proxy/", 400, status_of(400, "address not allowed", "BadRequest"))
    expect(chain, f"{base}/nope:80/proxy/", 404, status_of(
        404, 'pods "nope" not found', "NotFound", {"name": "nope", "kind": "pods"}))
    expect(chain, f"{base}/x:y:z:w/proxy/", 400, status_of(400, 'invalid pod request "x:y:z:w"', "BadRequest"))
    expect(chain, "/api/v1/nodes/ghost/proxy/", 404, status_of(
        404, 'nodes "ghost" not found', "NotFound", {"name": "ghost", "kind": "nodes"}))
    node(chain, "local", [{"type": "InternalIP", "address": "127.0.0.1"}])
    expect(chain, "/api/v1/nodes/local/proxy/stats", 400, status_of(400, "address not allowed", "BadRequest"))
    expect(chain, "/api/v1/nodes/a:b:c:d/proxy/", 400, status_of(400, 'invalid node request "a:b:c:d"', "BadRequest"))
    # connect subresources live under a namespace only
    expect(chain, "/api/v1/pods/pending/proxy/", 404, status_of(
        404, "the server could not find the requested resource", "NotFound", {}))


def test_pod_and_node_proxy_reach_a_real_server(chain: ChainHandle, ns: str, echo: int, host_ip: str) -> None:
    ip = host_ip
    if not ip:
        pytest.skip("no veth interface could be made (needs root and iproute2) to stand for a pod IP")
    pod(chain, "served", pod_ip=ip, ports=(echo,))
    code, _h, data = get(chain, f"/api/v1/namespaces/{ns}/pods/served/proxy/p?q=1")
    assert (code, json.loads(data)) == (200, {"method": "GET", "path": "/p?q=1", "body": ""})
    code, _h, data = get(chain, f"/api/v1/namespaces/{ns}/pods/http:served:{echo}/proxy/put", "PUT", b"x")
    assert (code, json.loads(data)) == (200, {"method": "PUT", "path": "/put", "body": "x"})
    node(chain, "host", [{"type": "InternalIP", "address": ip}])
    code, _h, data = get(chain, f"/api/v1/nodes/host:{echo}/proxy/metrics")
    assert (code, json.loads(data)) == (200, {"method": "GET", "path": "/metrics", "body": ""})


# --------------------------------------------------------------------------- OpenAPI


def test_openapi_lists_the_connect_operations(chain: ChainHandle) -> None:
    _, v3 = chain.json("GET", "/openapi/v3/api/v1")
    pods = "/api/v1/namespaces/{namespace}/pods/{name}"
    exec_path = v3["paths"][f"{pods}/exec"]
    assert sorted(m for m in exec_path if m != "parameters") == ["get", "post"]
    assert exec_path["post"]["operationId"] == "connectCoreV1PostNamespacedPodExec"
    assert exec_path["post"]["x-kubernetes-action"] == "connect"
    assert exec_path["post"]["x-kubernetes-group-version-kind"] == {"group": "", "kind": "PodExecOptions",
                                                                    "version": "v1"}
    assert [p["name"] for p in exec_path["parameters"]] == [
        "command", "container", "name", "namespace", "stderr", "stdin", "stdout", "tty"]
    assert v3["paths"][f"{pods}/log"]["get"]["operationId"] == "readCoreV1NamespacedPodLog"
    assert "text/plain" in v3["paths"][f"{pods}/log"]["get"]["responses"]["200"]["content"]
    with_path = v3["paths"]["/api/v1/namespaces/{namespace}/services/{name}/proxy/{path}"]
    assert sorted(m for m in with_path if m != "parameters") == [
        "delete", "get", "head", "options", "patch", "post", "put"]
    assert with_path["put"]["operationId"] == "connectCoreV1PutNamespacedServiceProxyWithPath"
    _, v2 = chain.json("GET", "/openapi/v2")
    assert v2["paths"]["/api/v1/nodes/{name}/proxy"]["get"]["operationId"] == "connectCoreV1GetNodeProxy"
    assert v2["paths"][f"{pods}/portforward"]["get"]["produces"] == ["*/*"]
