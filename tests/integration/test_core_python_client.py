# The client's models declare every field Optional; these tests read the fields the server must fill
# (a None there fails the test anyway), so the Optional checks are off for this file.
# mypy: disable-error-code="union-attr,index,arg-type,operator"
"""Issue 3 through the official ``kubernetes`` Python client: defaults visible in what it reads
back, ClusterIPs and NodePorts allocated (and kube's 422 for taken ones), namespace deletion
(403 in a terminating namespace), garbage collection with ``V1DeleteOptions(propagation_policy=...)``
and validation errors as ``ApiException`` carrying kube's Status body."""

from __future__ import annotations

import ipaddress
import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from support.procs import ChainHandle
from support.waiting import eventually

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api(chain: ChainHandle) -> client.ApiClient:
    return config.new_client_from_config(config_file=chain.kubeconfig)


@pytest.fixture(scope="module")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="module")
def ns(core: client.CoreV1Api) -> Iterator[str]:
    name = f"pyc-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    try:
        core.delete_namespace(name)
    except ApiException:
        pass


def missing(read: Callable[[], Any]) -> bool:
    try:
        read()
    except ApiException as err:
        if err.status == 404:
            return True
        raise
    return False


def status_body(err: ApiException) -> dict[str, Any]:
    body = json.loads(err.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    return body  # type: ignore[no-any-return]


def container(name: str = "web", image: str = "nginx:1.25") -> client.V1Container:
    return client.V1Container(name=name, image=image)


def pod_template(labels: dict[str, str], *containers: client.V1Container) -> client.V1PodTemplateSpec:
    return client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels=labels),
                                    spec=client.V1PodSpec(containers=list(containers) or [container()]))


# -- defaulting ---------------------------------------------------------------------------------------
def test_defaults_visible_to_the_client(api: client.ApiClient, core: client.CoreV1Api, ns: str) -> None:
    apps, batch = client.AppsV1Api(api), client.BatchV1Api(api)
    labels = {"app": "defaults"}
    dep = apps.create_namespaced_deployment(ns, client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(selector=client.V1LabelSelector(match_labels=labels), template=pod_template(
            labels, container("web", "nginx:1.25"), container("side", "busybox"),
            client.V1Container(name="ports", image="redis:latest",
                               ports=[client.V1ContainerPort(container_port=6379)])))))
    spec = dep.spec
    assert spec.replicas == 1 and spec.revision_history_limit == 10 and spec.progress_deadline_seconds == 600
    assert spec.strategy.type == "RollingUpdate"
    assert (spec.strategy.rolling_update.max_surge, spec.strategy.rolling_update.max_unavailable) == ("25%", "25%")
    pod_spec = spec.template.spec
    assert (pod_spec.restart_policy, pod_spec.dns_policy, pod_spec.scheduler_name) == \
        ("Always", "ClusterFirst", "default-scheduler")
    assert pod_spec.termination_grace_period_seconds == 30
    assert pod_spec.security_context == client.V1PodSecurityContext()
    pulls = [(c.name, c.image_pull_policy) for c in pod_spec.containers]
    assert pulls == [("web", "IfNotPresent"), ("side", "Always"), ("ports", "Always")]
    first = pod_spec.containers[0]
    assert (first.termination_message_path, first.termination_message_policy) == \
        ("/dev/termination-log", "File")
    assert pod_spec.containers[2].ports[0].protocol == "TCP"

    pod = core.create_namespaced_pod(ns, client.V1Pod(metadata=client.V1ObjectMeta(name="lone"),
                                                      spec=client.V1PodSpec(containers=[container()])))
    assert pod.status.phase == "Pending" and pod.status.qos_class == "BestEffort"
    assert pod.spec.enable_service_links is True

    job = batch.create_namespaced_job(ns, client.V1Job(metadata=client.V1ObjectMeta(name="once"), spec=client.V1JobSpec(
        template=client.V1PodTemplateSpec(spec=client.V1PodSpec(restart_policy="Never", containers=[container()])))))
    js = job.spec
    assert (js.completions, js.parallelism, js.backoff_limit, js.completion_mode, js.suspend) == \
        (1, 1, 6, "NonIndexed", False)
    assert js.selector.match_labels == {"batch.kubernetes.io/controller-uid": job.metadata.uid}

    created = core.read_namespace(ns)
    assert created.spec.finalizers == ["kubernetes"] and created.status.phase == "Active"
    # What the client reads back round-trips: replacing with it changes nothing.
    again = apps.replace_namespaced_deployment("web", ns, dep)
    assert again.metadata.resource_version == dep.metadata.resource_version
    assert again.metadata.generation == 1


# -- Service allocation -------------------------------------------------------------------------------
def test_cluster_ip_and_node_port_allocated(core: client.CoreV1Api, ns: str) -> None:
    def svc(name: str, kind: str = "ClusterIP", **spec: Any) -> client.V1Service:
        port = client.V1ServicePort(port=80, node_port=spec.pop("node_port", None))
        return client.V1Service(metadata=client.V1ObjectMeta(name=name),
                                spec=client.V1ServiceSpec(type=kind, ports=[port], selector={"app": "x"}, **spec))

    plain = core.create_namespaced_service(ns, svc("plain"))
    assert ipaddress.ip_address(plain.spec.cluster_ip) in ipaddress.ip_network("10.0.0.0/24")
    assert plain.spec.cluster_ips == [plain.spec.cluster_ip]
    assert (plain.spec.ip_families, plain.spec.ip_family_policy) == (["IPv4"], "SingleStack")
    assert (plain.spec.session_affinity, plain.spec.internal_traffic_policy) == ("None", "Cluster")
    assert plain.spec.ports[0].protocol == "TCP" and plain.spec.ports[0].target_port == 80
    assert plain.spec.ports[0].node_port is None

    np = core.create_namespaced_service(ns, svc("np", "NodePort"))
    node_port = np.spec.ports[0].node_port
    assert 30000 <= node_port <= 32767 and np.spec.external_traffic_policy == "Cluster"
    assert np.spec.cluster_ip != plain.spec.cluster_ip
    headless = core.create_namespaced_service(ns, svc("headless", cluster_ip="None"))
    assert headless.spec.cluster_ips == ["None"]

    with pytest.raises(ApiException) as err:
        core.create_namespaced_service(ns, svc("dup-ip", cluster_ip=plain.spec.cluster_ip))
    assert err.value.status == 422
    body = status_body(err.value)
    assert body["reason"] == "Invalid" and body["code"] == 422
    assert body["details"] == {"name": "dup-ip", "kind": "Service", "causes": [{
        "reason": "FieldValueInvalid", "field": "spec.clusterIPs",
        "message": f'Invalid value: []string{{"{plain.spec.cluster_ip}"}}: failed to allocate IP '
                   f"{plain.spec.cluster_ip}: provided IP is already allocated"}]}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_service(ns, svc("dup-port", "NodePort", node_port=node_port))
    assert status_body(err.value)["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec.ports[0].nodePort",
        "message": f"Invalid value: {node_port}: provided port is already allocated"}]
    with pytest.raises(ApiException) as err:
        core.create_namespaced_service(ns, svc("far-port", "NodePort", node_port=40000))
    assert err.value.status == 422
    assert status_body(err.value)["message"] == (
        'Service "far-port" is invalid: spec.ports[0].nodePort: Invalid value: 40000: provided port is not in the '
        "valid range. The range of valid ports is 30000-32767")
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_service("plain", ns, {"spec": {"clusterIP": "10.0.0.250",
                                                             "clusterIPs": ["10.0.0.250"]}})
    assert err.value.status == 422
    assert "spec.clusterIPs[0]: Invalid value: []string{\"10.0.0.250\"}: may not change once set" in \
        status_body(err.value)["message"]

    # Deleting gives the address and the port back: they can be asked for by name again.
    core.delete_namespaced_service("np", ns)
    again = core.create_namespaced_service(ns, svc("np2", "NodePort", node_port=node_port,
                                                   cluster_ip=np.spec.cluster_ip))
    assert (again.spec.cluster_ip, again.spec.ports[0].node_port) == (np.spec.cluster_ip, node_port)


# -- namespace deletion ---------------------------------------------------------------------------------
def test_namespace_deletion(api: client.ApiClient, core: client.CoreV1Api) -> None:
    name = f"pyc-del-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    core.create_namespaced_config_map(name, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"), data={"k": "v"}))
    core.create_namespaced_config_map(name, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="held", finalizers=["example.com/hold"])))
    core.create_namespaced_secret(name, client.V1Secret(metadata=client.V1ObjectMeta(name="s"),
                                                        string_data={"p": "q"}))
    core.create_namespaced_service(name, client.V1Service(
        metadata=client.V1ObjectMeta(name="svc"), spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)])))
    client.AppsV1Api(api).create_namespaced_deployment(name, client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(selector=client.V1LabelSelector(match_labels={"a": "b"}),
                                     template=pod_template({"a": "b"}))))
    eventually(lambda: not missing(lambda: core.read_namespaced_service_account("default", name)),
               what="default ServiceAccount")

    deleted = core.delete_namespace(name)  # the client hands back the JSON object (a Namespace here)
    assert deleted["kind"] == "Namespace" and deleted["metadata"]["deletionTimestamp"]
    assert deleted["status"]["phase"] == "Terminating"
    terminating = eventually(lambda: (n := core.read_namespace(name)).status.phase == "Terminating" and n)
    assert terminating.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(name, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="late")))
    assert err.value.status == 403
    body = status_body(err.value)
    assert body["reason"] == "Forbidden"
    assert body["message"] == (f'configmaps "late" is forbidden: unable to create new content in namespace {name} '
                               "because it is being terminated")
    assert body["details"] == {"name": "late", "kind": "configmaps", "causes": [{
        "reason": "NamespaceTerminating", "field": "metadata.namespace",
        "message": f"namespace {name} is being terminated"}]}

    def held_alone() -> bool:
        conds = {c.type: c for c in core.read_namespace(name).status.conditions or []}
        remaining = conds.get("NamespaceFinalizersRemaining")
        return remaining is not None and remaining.status == "True"

    eventually(held_alone, what="finalizer condition")
    conds = {c.type: c for c in core.read_namespace(name).status.conditions}
    assert conds["NamespaceFinalizersRemaining"].message == \
        "Some finalizers are remaining: example.com/hold in 1 resource instances"
    assert conds["NamespaceContentRemaining"].message == \
        "Some resources are remaining: configmaps. has 1 resource instances"
    assert [c.metadata.name for c in core.list_namespaced_config_map(name).items] == ["held"]
    core.patch_namespaced_config_map("held", name, {"metadata": {"finalizers": None}})
    eventually(lambda: missing(lambda: core.read_namespace(name)), what="namespace gone")
    assert core.list_namespaced_config_map(name).items == []
    assert core.list_namespaced_service(name).items == []


# -- garbage collection -----------------------------------------------------------------------------------
def _owner_and_dependents(core: client.CoreV1Api, ns: str, tag: str) -> tuple[Any, list[str]]:
    owner = core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"{tag}-owner")))
    ref = client.V1OwnerReference(api_version="v1", kind="ConfigMap", name=owner.metadata.name,
                                  uid=owner.metadata.uid, block_owner_deletion=True)
    core.create_namespaced_config_map(ns, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=f"{tag}-cm", owner_references=[ref])))
    core.create_namespaced_secret(ns, client.V1Secret(
        metadata=client.V1ObjectMeta(name=f"{tag}-secret", owner_references=[ref])))
    return owner, [f"{tag}-cm", f"{tag}-secret"]


def test_gc_background(core: client.CoreV1Api, ns: str) -> None:
    owner, _deps = _owner_and_dependents(core, ns, "bg")
    core.delete_namespaced_config_map(owner.metadata.name, ns, body=client.V1DeleteOptions(
        propagation_policy="Background"))
    assert missing(lambda: core.read_namespaced_config_map("bg-owner", ns))  # the owner goes at once
    eventually(lambda: missing(lambda: core.read_namespaced_config_map("bg-cm", ns))
               and missing(lambda: core.read_namespaced_secret("bg-secret", ns)), what="dependents collected")


def test_gc_foreground(core: client.CoreV1Api, ns: str) -> None:
    owner, _deps = _owner_and_dependents(core, ns, "fg")
    core.patch_namespaced_secret("fg-secret", ns, {"metadata": {"finalizers": ["example.com/hold"]}})
    out = core.delete_namespaced_config_map(owner.metadata.name, ns,
                                            body=client.V1DeleteOptions(propagation_policy="Foreground"))
    assert out["metadata"]["finalizers"] == ["foregroundDeletion"] and out["metadata"]["deletionTimestamp"]
    eventually(lambda: core.read_namespaced_secret("fg-secret", ns).metadata.deletion_timestamp,
               what="dependent deleted first")
    eventually(lambda: missing(lambda: core.read_namespaced_config_map("fg-cm", ns)), what="other dependent")
    time.sleep(0.5)
    waiting = core.read_namespaced_config_map("fg-owner", ns)  # a blocking dependent remains
    assert waiting.metadata.finalizers == ["foregroundDeletion"]
    core.patch_namespaced_secret("fg-secret", ns, {"metadata": {"finalizers": None}})
    eventually(lambda: missing(lambda: core.read_namespaced_config_map("fg-owner", ns)), what="owner released")


def test_gc_orphan(core: client.CoreV1Api, ns: str) -> None:
    owner, deps = _owner_and_dependents(core, ns, "orph")
    # The query-parameter form of the same option.
    core.delete_namespaced_config_map(owner.metadata.name, ns, propagation_policy="Orphan")
    eventually(lambda: missing(lambda: core.read_namespaced_config_map("orph-owner", ns)), what="owner gone")
    time.sleep(0.5)
    cm = core.read_namespaced_config_map("orph-cm", ns)
    secret = core.read_namespaced_secret("orph-secret", ns)
    assert cm.metadata.owner_references is None and secret.metadata.owner_references is None
    assert deps == [cm.metadata.name, secret.metadata.name]


def test_bad_propagation_policy(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="badprop")))
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_config_map("badprop", ns, body=client.V1DeleteOptions(propagation_policy="Sideways"))
    assert err.value.status == 422
    body = status_body(err.value)
    assert body["details"]["causes"][0]["field"] == "propagationPolicy"
    assert not missing(lambda: core.read_namespaced_config_map("badprop", ns))


# -- validation ---------------------------------------------------------------------------------------------
def test_validation_errors_are_kube_status_bodies(api: client.ApiClient, core: client.CoreV1Api, ns: str) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, client.V1Pod(metadata=client.V1ObjectMeta(name="twins"), spec=client.V1PodSpec(
            containers=[container("a"), container("a"), container("Bad_Name")])))
    assert (err.value.status, err.value.reason) == (422, "Unprocessable Entity")
    body = status_body(err.value)
    assert body["reason"] == "Invalid" and body["details"]["name"] == "twins" and body["details"]["kind"] == "Pod"
    causes = {(c["field"], c["reason"]) for c in body["details"]["causes"]}
    assert ("spec.containers[1].name", "FieldValueDuplicate") in causes
    assert ("spec.containers[2].name", "FieldValueInvalid") in causes
    assert body["message"].startswith('Pod "twins" is invalid: [')

    with pytest.raises(ApiException) as err:
        core.create_namespaced_secret(ns, client.V1Secret(metadata=client.V1ObjectMeta(name="tls"),
                                                          type="kubernetes.io/tls", string_data={"tls.crt": "x"}))
    assert status_body(err.value)["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "data[tls.key]"}]

    apps = client.AppsV1Api(api)
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment(ns, client.V1Deployment(
            metadata=client.V1ObjectMeta(name="mismatch"),
            spec=client.V1DeploymentSpec(selector=client.V1LabelSelector(match_labels={"app": "a"}),
                                         template=pod_template({"app": "b"}))))
    assert status_body(err.value)["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec.template.metadata.labels",
        "message": 'Invalid value: map[string]string{"app":"b"}: `selector` does not match template `labels`'}]

    cm = core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="frozen"),
                                                                  data={"k": "v"}, immutable=True))
    cm.data = {"k": "changed"}
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("frozen", ns, cm)
    assert status_body(err.value)["details"]["causes"] == [{
        "reason": "FieldValueForbidden", "field": "data",
        "message": "Forbidden: field is immutable when `immutable` is set"}]
    assert core.read_namespaced_config_map("frozen", ns).data == {"k": "v"}
