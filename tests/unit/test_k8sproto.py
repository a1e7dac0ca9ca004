"""Kubernetes protobuf request bodies decode to the JSON kube-apiserver would store.

Messages are built with the runtime classes of the same descriptor set, framed as kubectl frames
them, decoded and compared with hand-written Go JSON. The kubectl tests capture what a real
kubectl sends (a tiny HTTP server on 127.0.0.1 answers legacy discovery and records the POST body;
no API server is involved) and compare the decoded body with kubectl's own Go JSON of the same
object (``--dry-run=client -o json``). Everything is skipped when no kubectl binary exists.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
from genericapi.apimachinery import decoding, k8sproto, k8sproto_descriptors
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.k8sproto_convert import go_duration, gogo_value_field

# --- kubectl capture -----------------------------------------------------------------------------

#: group/version -> (resource, kind, namespaced)
DISCOVERY: dict[str, list[tuple[str, str, bool]]] = {
    "v1": [("configmaps", "ConfigMap", True), ("secrets", "Secret", True), ("services", "Service", True),
           ("pods", "Pod", True), ("resourcequotas", "ResourceQuota", True),
           ("serviceaccounts", "ServiceAccount", True), ("namespaces", "Namespace", False)],
    "apps/v1": [("deployments", "Deployment", True)],
    "batch/v1": [("jobs", "Job", True), ("cronjobs", "CronJob", True)],
    "rbac.authorization.k8s.io/v1": [("roles", "Role", True), ("rolebindings", "RoleBinding", True),
                                     ("clusterroles", "ClusterRole", False)],
    "policy/v1": [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    "networking.k8s.io/v1": [("ingresses", "Ingress", True)],
    "scheduling.k8s.io/v1": [("priorityclasses", "PriorityClass", False)],
}


def kubectl_binary() -> Path | None:
    """The newest versioned kubectl beside the one on PATH, else that one."""
    on_path = shutil.which("kubectl")
    if on_path is None:
        return None
    kubectl = Path(on_path).resolve()
    for minor in range(40, 26, -1):
        candidate = kubectl.parent / f"kubectl.1.{minor}"
        if candidate.is_file():
            return candidate
    return kubectl


def _resource_list(group_version: str) -> dict[str, Any]:
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [{"name": name, "singularName": kind.lower(), "namespaced": namespaced,
                           "kind": kind, "verbs": ["create", "get", "list", "delete"]}
                          for name, kind, namespaced in DISCOVERY[group_version]]}


def _group_list() -> dict[str, Any]:
    groups = []
    for group_version in DISCOVERY:
        if "/" not in group_version:
            continue
        name, version = group_version.split("/")
        entry = {"groupVersion": group_version, "version": version}
        groups.append({"name": name, "versions": [entry], "preferredVersion": entry})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


class _Handler(BaseHTTPRequestHandler):
    server: CaptureServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, body: dict[str, Any]) -> None:
        payload = orjson.dumps(body)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/api":
            self._send(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        elif path == "/apis":
            self._send(200, _group_list())
        elif path == "/api/v1":
            self._send(200, _resource_list("v1"))
        elif path.startswith("/apis/") and path[len("/apis/"):] in DISCOVERY:
            self._send(200, _resource_list(path[len("/apis/"):]))
        else:
            self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                             "reason": "NotFound", "code": 404})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.server.captured.append((self.headers.get("Content-Type", ""), self.rfile.read(length)))
        self._send(500, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                         "reason": "InternalError", "message": "captured", "code": 500})


class CaptureServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.captured: list[tuple[str, bytes]] = []


class KubectlCapture:
    """Runs kubectl against the capture server (server dry run) and as a client dry run."""

    def __init__(self, kubectl: Path, workdir: Path) -> None:
        self.kubectl = kubectl
        self.workdir = workdir
        self.server = CaptureServer()
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        port = self.server.server_address[1]
        self.kubeconfig = workdir / "kubeconfig"
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
            "users: [{name: u, user: {}}]\n"
            "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
            "current-context: x\n")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _run(self, args: list[str], flags: list[str]) -> subprocess.CompletedProcess[bytes]:
        # flags go before a "--" that starts a container command
        split = args.index("--") if "--" in args else len(args)
        return subprocess.run(
            [str(self.kubectl), "--kubeconfig", str(self.kubeconfig), "--cache-dir",
             str(self.workdir / "cache"), *args[:split], *flags, *args[split:]],
            capture_output=True, timeout=60, check=False, cwd=self.workdir)

    def sent_body(self, args: list[str]) -> tuple[str, bytes]:
        """(Content-Type, body) of the POST that ``kubectl <args> --dry-run=server`` sends."""
        self.server.captured.clear()
        result = self._run(args, ["--dry-run=server", "--validate=false"])
        if not self.server.captured:
            raise AssertionError(f"kubectl sent no POST: {result.stderr.decode(errors='replace')}")
        return self.server.captured[-1]

    def client_json(self, args: list[str]) -> dict[str, Any]:
        """The Go JSON of the same object (``--dry-run=client -o json``), zero timestamps dropped."""
        result = self._run(args, ["--dry-run=client", "-o", "json"])
        if result.returncode != 0:
            raise AssertionError(result.stderr.decode(errors="replace"))
        obj = orjson.loads(result.stdout)
        _drop_null_timestamps(obj)
        return obj  # type: ignore[no-any-return]


def _drop_null_timestamps(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("creationTimestamp", 0) is None:
            del node["creationTimestamp"]
        for value in node.values():
            _drop_null_timestamps(value)
    elif isinstance(node, list):
        for value in node:
            _drop_null_timestamps(value)


# --- fixtures ------------------------------------------------------------------------------------

NO_DESCRIPTORS = ("no Kubernetes binary (kubectl) found to extract protobuf descriptors from: "
                  "protobuf request bodies are unsupported here")


@pytest.fixture(scope="module")
def registry() -> k8sproto.ProtoRegistry:
    current = k8sproto.registry()
    if current is None:
        pytest.skip(NO_DESCRIPTORS)
    return current


def new(registry: k8sproto.ProtoRegistry, name: str) -> Any:
    return registry.message_class(name)()


def roundtrip(message: Any, api_version: str, kind: str) -> dict[str, Any]:
    return k8sproto.decode_protobuf_body(k8sproto.encode_protobuf_body(message, api_version, kind))


# --- typed objects -------------------------------------------------------------------------------

def test_configmap_with_data_and_binary_data(registry: k8sproto.ProtoRegistry) -> None:
    cm = new(registry, "k8s.io.api.core.v1.ConfigMap")
    cm.metadata.name = "settings"
    cm.metadata.namespace = "default"
    cm.data["a"] = "b"
    cm.data["empty"] = ""
    cm.binaryData["blob"] = b"\xff\x00\x01"
    assert roundtrip(cm, "v1", "ConfigMap") == {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "default"},
        "data": {"a": "b", "empty": ""},
        "binaryData": {"blob": "/wAB"},
    }


def test_secret_bytes_are_base64_and_pointer_bool_kept(registry: k8sproto.ProtoRegistry) -> None:
    secret = new(registry, "k8s.io.api.core.v1.Secret")
    secret.metadata.name = "creds"
    secret.data["password"] = b"s3cr3t"
    secret.type = "Opaque"
    secret.immutable = False  # *bool: set to false is written
    assert roundtrip(secret, "v1", "Secret") == {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
        "immutable": False, "data": {"password": "czNjcjN0"}, "type": "Opaque",
    }


def _deployment(registry: k8sproto.ProtoRegistry, replicas: int | None) -> Any:
    deployment = new(registry, "k8s.io.api.apps.v1.Deployment")
    deployment.metadata.name = "web"
    deployment.metadata.labels["app"] = "web"
    deployment.metadata.creationTimestamp.seconds = 1704164645
    deployment.metadata.creationTimestamp.nanos = 5
    if replicas is not None:
        deployment.spec.replicas = replicas
    deployment.spec.minReadySeconds = 0  # plain int32 with omitempty: never written when zero
    deployment.spec.selector.matchLabels["app"] = "web"
    deployment.spec.template.metadata.labels["app"] = "web"
    container = deployment.spec.template.spec.containers.add()
    container.name = "nginx"
    container.image = "nginx:1.25"
    container.args.extend(["-g", "daemon off;"])
    port = container.ports.add()
    port.name = "http"
    port.containerPort = 80
    port.protocol = "TCP"
    container.resources.limits["cpu"].string = "500m"
    container.resources.requests["memory"].string = "64Mi"
    probe = container.readinessProbe
    probe.handler.httpGet.path = "/"
    probe.handler.httpGet.port.type = 1
    probe.handler.httpGet.port.strVal = "http"
    probe.periodSeconds = 10
    return deployment


def _expected_deployment(replicas: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {} if replicas is None else {"replicas": replicas}
    spec.update({
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{
                "name": "nginx", "image": "nginx:1.25", "args": ["-g", "daemon off;"],
                "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "64Mi"}},
                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 10},
            }]},
        },
        "strategy": {},
    })
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "creationTimestamp": "2024-01-02T03:04:05Z", "labels": {"app": "web"}},
        "spec": spec,
        "status": {},
    }


@pytest.mark.parametrize("replicas", [0, 3, None])
def test_deployment(registry: k8sproto.ProtoRegistry, replicas: int | None) -> None:
    assert roundtrip(_deployment(registry, replicas), "apps/v1", "Deployment") == \
        _expected_deployment(replicas)


def test_deployment_keeps_go_field_order(registry: k8sproto.ProtoRegistry) -> None:
    decoded = roundtrip(_deployment(registry, 1), "apps/v1", "Deployment")
    assert list(decoded) == ["apiVersion", "kind", "metadata", "spec", "status"]
    container = decoded["spec"]["template"]["spec"]["containers"][0]
    assert list(container) == ["name", "image", "args", "ports", "resources", "readinessProbe"]


def test_service_target_ports_int_named_and_zero(registry: k8sproto.ProtoRegistry) -> None:
    service = new(registry, "k8s.io.api.core.v1.Service")
    service.metadata.name = "svc"
    for name, target in (("a", 8080), ("b", "http"), ("c", None)):
        port = service.spec.ports.add()
        port.name = name
        port.port = 0 if target is None else 80  # ServicePort.port is required: zero is written
        if isinstance(target, int):
            port.targetPort.intVal = target
        elif isinstance(target, str):
            port.targetPort.type = 1
            port.targetPort.strVal = target
    decoded = roundtrip(service, "v1", "Service")
    assert decoded["spec"]["ports"] == [
        {"name": "a", "port": 80, "targetPort": 8080},
        {"name": "b", "port": 80, "targetPort": "http"},
        {"name": "c", "port": 0},
    ]
    assert decoded["status"] == {"loadBalancer": {}}


def test_required_zero_values_are_written_and_absent_value_structs_are_empty(
        registry: k8sproto.ProtoRegistry) -> None:
    pod = new(registry, "k8s.io.api.core.v1.Pod")
    container = pod.spec.containers.add()
    container.name = ""  # required string: Go writes ""
    container.ports.add().containerPort = 0  # required int32
    container.stdin = False  # plain bool with omitempty
    decoded = roundtrip(pod, "v1", "Pod")
    assert decoded == {
        "apiVersion": "v1", "kind": "Pod", "metadata": {},
        "spec": {"containers": [{"name": "", "ports": [{"containerPort": 0}], "resources": {}}]},
        "status": {},
    }


def test_times_durations_and_micro_times(registry: k8sproto.ProtoRegistry) -> None:
    event = new(registry, "k8s.io.api.events.v1.Event")
    event.metadata.name = "e"
    event.metadata.deletionTimestamp.seconds = 0  # *Time at the Unix epoch: written
    event.eventTime.seconds = 1704164645
    event.eventTime.nanos = 123456789
    event.deprecatedFirstTimestamp.SetInParent()  # zero Time: Go writes null, we omit it
    decoded = roundtrip(event, "events.k8s.io/v1", "Event")
    assert decoded["metadata"] == {"name": "e", "deletionTimestamp": "1970-01-01T00:00:00Z"}
    assert decoded["eventTime"] == "2024-01-02T03:04:05.123456Z"
    assert "deprecatedFirstTimestamp" not in decoded

    lease = new(registry, "k8s.io.api.coordination.v1.Lease")
    lease.spec.leaseDurationSeconds = 15
    lease.spec.renewTime.seconds = 1704164645
    lease.spec.renewTime.nanos = 1000
    assert roundtrip(lease, "coordination.k8s.io/v1", "Lease")["spec"] == {
        "leaseDurationSeconds": 15, "renewTime": "2024-01-02T03:04:05.000001Z"}


@pytest.mark.parametrize(("nanoseconds", "text"), [
    (0, "0s"), (1, "1ns"), (1500, "1.5µs"), (100_000_000, "100ms"), (1_500_000_000, "1.5s"),
    (90_000_000_000, "1m30s"), (60_000_000_000, "1m0s"), (3_600_000_000_000, "1h0m0s"),
    (-5_000_000_000, "-5s"), (3_723_000_000_001, "1h2m3.000000001s"),
])
def test_go_duration(nanoseconds: int, text: str) -> None:
    assert go_duration(nanoseconds) == text


def test_duration_field(registry: k8sproto.ProtoRegistry) -> None:
    options = new(registry, "k8s.io.apimachinery.pkg.apis.meta.v1.ListOptions")
    options.timeoutSeconds = 30
    entry = new(registry, "k8s.io.api.flowcontrol.v1.QueuingConfiguration")
    entry.queues = 64
    # no built-in kind has a Duration we can reach easily except through a plain message
    duration = new(registry, "k8s.io.apimachinery.pkg.apis.meta.v1.Duration")
    duration.duration = 90_000_000_000
    assert registry.to_dict(options) == {"timeoutSeconds": 30}
    assert registry.to_dict(entry) == {"queues": 64}
    assert registry._converter._message_value(duration.DESCRIPTOR)(duration) == "1m30s"


def test_raw_extension_and_fields_v1_are_parsed_json(registry: k8sproto.ProtoRegistry) -> None:
    revision = new(registry, "k8s.io.api.apps.v1.ControllerRevision")
    revision.metadata.name = "rev"
    entry = revision.metadata.managedFields.add()
    entry.manager = "kubectl"
    entry.operation = "Update"
    entry.fieldsType = "FieldsV1"
    entry.fieldsV1.Raw = b'{"f:data":{}}'
    revision.data.raw = b'{"spec":{"replicas":2}}'
    revision.revision = 4
    assert roundtrip(revision, "apps/v1", "ControllerRevision") == {
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "rev", "managedFields": [
            {"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {}}}]},
        "data": {"spec": {"replicas": 2}}, "revision": 4,
    }


def test_raw_extension_holding_protobuf_is_decoded(registry: k8sproto.ProtoRegistry) -> None:
    cm = new(registry, "k8s.io.api.core.v1.ConfigMap")
    cm.data["k"] = "v"
    revision = new(registry, "k8s.io.api.apps.v1.ControllerRevision")
    revision.data.raw = k8sproto.encode_protobuf_body(cm, "v1", "ConfigMap")
    assert roundtrip(revision, "apps/v1", "ControllerRevision")["data"] == {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {"k": "v"}}


def test_extra_values_are_lists(registry: k8sproto.ProtoRegistry) -> None:
    review = new(registry, "k8s.io.api.authorization.v1.SubjectAccessReview")
    review.spec.user = "alice"
    review.spec.groups.append("devs")
    review.spec.extra["scopes"].items.extend(["a", "b"])
    review.spec.resourceAttributes.verb = "get"
    review.spec.resourceAttributes.resource = "pods"
    decoded = roundtrip(review, "authorization.k8s.io/v1", "SubjectAccessReview")
    assert decoded["spec"] == {
        "resourceAttributes": {"verb": "get", "resource": "pods"},
        "user": "alice", "groups": ["devs"], "extra": {"scopes": ["a", "b"]},
    }
    assert decoded["status"] == {"allowed": False}  # required bool


@pytest.mark.parametrize("api_version", ["meta.k8s.io/v1", "v1", "apps/v1"])
def test_delete_options_under_any_group(registry: k8sproto.ProtoRegistry, api_version: str) -> None:
    options = new(registry, "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions")
    options.gracePeriodSeconds = 0  # *int64 zero is meaningful ("delete now")
    options.propagationPolicy = "Foreground"
    options.dryRun.append("All")
    assert roundtrip(options, api_version, "DeleteOptions") == {
        "apiVersion": api_version, "kind": "DeleteOptions",
        "gracePeriodSeconds": 0, "propagationPolicy": "Foreground", "dryRun": ["All"],
    }


def test_scale_and_rbac_groups(registry: k8sproto.ProtoRegistry) -> None:
    scale = new(registry, "k8s.io.api.autoscaling.v1.Scale")
    scale.metadata.name = "web"
    scale.spec.replicas = 5
    assert roundtrip(scale, "autoscaling/v1", "Scale") == {
        "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"},
        "spec": {"replicas": 5}, "status": {"replicas": 0}}
    role = new(registry, "k8s.io.api.rbac.v1.Role")
    rule = role.rules.add()
    rule.verbs.append("get")
    rule.apiGroups.append("")
    rule.resources.append("pods")
    assert roundtrip(role, "rbac.authorization.k8s.io/v1", "Role")["rules"] == [
        {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]


def test_message_names_for_groups() -> None:
    names = k8sproto.candidate_message_names
    assert names("", "v1", "Pod") == ["k8s.io.api.core.v1.Pod"]
    assert names("rbac.authorization.k8s.io", "v1", "Role") == ["k8s.io.api.rbac.v1.Role"]
    assert names("flowcontrol.apiserver.k8s.io", "v1", "FlowSchema") == [
        "k8s.io.api.flowcontrol.v1.FlowSchema"]
    assert names("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration") == [
        "k8s.io.api.admissionregistration.v1.ValidatingWebhookConfiguration"]
    assert names("internal.apiserver.k8s.io", "v1alpha1", "StorageVersion") == [
        "k8s.io.api.apiserverinternal.v1alpha1.StorageVersion"]
    assert names("meta.k8s.io", "v1", "Status") == [
        "k8s.io.apimachinery.pkg.apis.meta.v1.Status", "k8s.io.apimachinery.pkg.apis.meta.v1.Status"]
    assert names("apps", "v1", "DeleteOptions")[-1] == "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions"


# --- bad input -----------------------------------------------------------------------------------

def _unknown(registry: k8sproto.ProtoRegistry, api_version: str, kind: str, raw: bytes) -> bytes:
    unknown = new(registry, k8sproto.UNKNOWN_MESSAGE)
    unknown.typeMeta.apiVersion = api_version
    unknown.typeMeta.kind = kind
    unknown.raw = raw
    return k8sproto.MAGIC + unknown.SerializeToString()


@pytest.mark.parametrize(("body", "message"), [
    (b"", "empty data"),
    (b'{"kind":"ConfigMap"}', "provided data does not appear to be a protobuf message, "
                              "expected prefix [107 56 115 0]"),
    (b"k8s", "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"),
    (b"k8s\x00", "empty body"),
    (b"k8s\x00\x0a\x05\x0a", "unable to decode protobuf body"),
    (b"k8s\x00\xff\xff\xff", "unable to decode protobuf body"),
])
def test_malformed_frames(registry: k8sproto.ProtoRegistry, body: bytes, message: str) -> None:
    with pytest.raises(APIError) as caught:
        k8sproto.decode_protobuf_body(body)
    assert caught.value.code == 400
    assert caught.value.reason == "BadRequest"
    assert caught.value.message.startswith(message)


def test_truncated_object(registry: k8sproto.ProtoRegistry) -> None:
    cm = new(registry, "k8s.io.api.core.v1.ConfigMap")
    cm.data["key"] = "value"
    body = _unknown(registry, "v1", "ConfigMap", cm.SerializeToString()[:-2])
    with pytest.raises(APIError) as caught:
        k8sproto.decode_protobuf_body(body)
    assert caught.value.code == 400
    assert "v1, Kind=ConfigMap" in caught.value.message


def test_unknown_kind_and_missing_type_meta(registry: k8sproto.ProtoRegistry) -> None:
    with pytest.raises(APIError) as caught:
        k8sproto.decode_protobuf_body(_unknown(registry, "example.com/v1", "Widget", b""))
    assert caught.value.code == 400
    assert caught.value.message.startswith('no kind "Widget" is registered for version "example.com/v1"')
    with pytest.raises(APIError) as caught:
        k8sproto.decode_protobuf_body(_unknown(registry, "v1", "", b""))
    assert caught.value.message == (
        "Object 'Kind' is missing in 'runtime.TypeMeta{APIVersion:\"v1\", Kind:\"\"}'")
    with pytest.raises(APIError) as caught:
        k8sproto.decode_protobuf_body(_unknown(registry, "", "ConfigMap", b""))
    assert caught.value.message.startswith("Object 'apiVersion' is missing")


def test_defaults_fill_missing_type_meta(registry: k8sproto.ProtoRegistry) -> None:
    body = _unknown(registry, "", "", b"")
    assert k8sproto.decode_protobuf_body(body, default_gvk=("apps", "v1", "Deployment")) == {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}, "spec": {
            "template": {"metadata": {}, "spec": {}}, "strategy": {}}, "status": {}}


def test_invalid_raw_extension_json(registry: k8sproto.ProtoRegistry) -> None:
    revision = new(registry, "k8s.io.api.apps.v1.ControllerRevision")
    revision.data.raw = b"{not json"
    with pytest.raises(APIError) as caught:
        roundtrip(revision, "apps/v1", "ControllerRevision")
    assert caught.value.code == 400


def test_without_descriptors_protobuf_is_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(k8sproto, "_registry", None)
    monkeypatch.setattr(k8sproto, "_attempted", True)
    assert not k8sproto.protobuf_available()
    with pytest.raises(APIError) as caught:
        k8sproto.decode_protobuf_body(b"k8s\x00")
    assert caught.value.code == 415
    assert caught.value.reason == "UnsupportedMediaType"


# --- descriptor extraction -----------------------------------------------------------------------

def test_gogo_value_field_option() -> None:
    assert gogo_value_field(b"\xc8\xde\x1f\x00\xe2\xde\x1f\x04Name")
    assert not gogo_value_field(b"\xe2\xde\x1f\x08Replicas")
    assert not gogo_value_field(b"\xc8\xde\x1f\x01")
    assert not gogo_value_field(b"")
    assert not gogo_value_field(b"\xe2\xde\x1f\x30trunc")  # length past the end


def test_descriptor_set_is_written_ordered_and_reused(tmp_path: Path) -> None:
    binary = k8sproto_descriptors.find_source_binary()
    if binary is None:
        pytest.skip(NO_DESCRIPTORS)
    path = k8sproto_descriptors.ensure_descriptor_set(tmp_path, binary)
    assert path == tmp_path / "k8s_descriptors.pb"
    files = k8sproto_descriptors.load_descriptor_set(path).file
    names = [f.name for f in files]
    assert len(names) == len(set(names)) > 40
    assert "k8s.io/api/core/v1/generated.proto" in names
    seen: set[str] = set()
    for proto in files:
        assert set(proto.dependency) <= seen, proto.name
        seen.add(proto.name)
    written = path.stat().st_mtime_ns
    assert k8sproto_descriptors.ensure_descriptor_set(tmp_path, binary) == path
    assert path.stat().st_mtime_ns == written


def test_no_binary_means_no_descriptor_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(k8sproto_descriptors.SOURCE_BINARY_ENV, str(tmp_path / "missing"))
    assert k8sproto_descriptors.find_source_binary() is None
    assert k8sproto_descriptors.ensure_descriptor_set(tmp_path) is None
    not_kubernetes = tmp_path / "plain"
    not_kubernetes.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xffgarbage" * 3)
    assert k8sproto_descriptors.ensure_descriptor_set(tmp_path, not_kubernetes) is None


# --- performance ---------------------------------------------------------------------------------

def _fastest_batch(decode: Any, rounds: int = 60, batches: int = 5) -> float:
    """CPU seconds of this process per call in the fastest of ``batches`` batches (CPU, not wall
    time, and the fastest batch: other work on the machine does not count)."""
    best = float("inf")
    for _ in range(batches):
        started = time.process_time()
        for _ in range(rounds):
            decode()
        best = min(best, (time.process_time() - started) / rounds)
    return best


def test_decoding_a_deployment_costs_a_few_json_decodes(registry: k8sproto.ProtoRegistry) -> None:
    """kubectl's protobuf bodies must not cost much more than the JSON path every other client takes:
    the same Deployment decoded from protobuf and from JSON (duplicate detection on, as for a
    request), measured in one run as a ratio (about 2-3x on this machine; a per-field Python walk
    gone wrong is 10x and more), never an absolute time."""
    body = k8sproto.encode_protobuf_body(_deployment(registry, 3), "apps/v1", "Deployment")
    as_json = decoding.encode_json(k8sproto.decode_protobuf_body(body))
    for _ in range(20):
        k8sproto.decode_protobuf_body(body)
        decoding.decode_body(as_json, "application/json", detect_duplicates=True)
    protobuf = _fastest_batch(lambda: k8sproto.decode_protobuf_body(body))
    json_path = _fastest_batch(lambda: decoding.decode_body(as_json, "application/json", detect_duplicates=True))
    assert protobuf / json_path < 6, f"{protobuf * 1e6:.0f} µs per protobuf decode, {json_path * 1e6:.0f} µs per JSON"


# --- real kubectl --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kubectl(registry: k8sproto.ProtoRegistry, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[KubectlCapture]:
    binary = kubectl_binary()
    if binary is None:
        pytest.skip("no kubectl binary on PATH: cannot capture what kubectl sends")
    capture = KubectlCapture(binary, tmp_path_factory.mktemp("kubectl"))
    yield capture
    capture.close()


KUBECTL_COMMANDS = [
    ["create", "configmap", "cm", "--from-literal=a=b", "--from-file=bin=binary.dat"],
    ["create", "secret", "generic", "s", "--from-literal=k=v"],
    ["create", "secret", "docker-registry", "reg", "--docker-server=r.example", "--docker-username=u",
     "--docker-password=p"],
    ["create", "deployment", "web", "--image=nginx:1.25", "--replicas=3", "--port=80"],
    ["create", "deployment", "zero", "--image=nginx:1.25", "--replicas=0"],
    ["create", "service", "clusterip", "svc", "--tcp=80:http"],
    ["create", "service", "nodeport", "np", "--tcp=80:8080"],
    ["create", "job", "j", "--image=busybox", "--", "echo", "hi"],
    ["create", "cronjob", "cj", "--image=busybox", "--schedule=*/1 * * * *", "--", "echo", "hi"],
    ["create", "role", "r", "--verb=get", "--resource=pods"],
    ["create", "clusterrole", "cr", "--verb=get", "--non-resource-url=/healthz"],
    ["create", "rolebinding", "rb", "--role=r", "--user=alice", "--serviceaccount=default:sa"],
    ["create", "poddisruptionbudget", "pdb", "--selector=app=x", "--min-available=50%"],
    ["create", "ingress", "ing", "--rule=foo.example/bar=svc:80"],
    ["create", "priorityclass", "pc", "--value=1000", "--description=high"],
    ["create", "quota", "q", "--hard=cpu=1,memory=1G,pods=2"],
    ["create", "serviceaccount", "sa"],
    ["create", "namespace", "ns"],
]


@pytest.mark.parametrize("args", KUBECTL_COMMANDS, ids=lambda args: "-".join(args[:3]))
def test_real_kubectl_body_matches_its_json(kubectl: KubectlCapture, args: list[str]) -> None:
    (kubectl.workdir / "binary.dat").write_bytes(b"\xff\xfe\x00bin")
    content_type, body = kubectl.sent_body(args)
    assert content_type == k8sproto.CONTENT_TYPE
    assert k8sproto.decode_protobuf_body(body) == kubectl.client_json(args)
