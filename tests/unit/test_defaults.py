"""Defaulting of built-in kinds (coreapi.defaults), checked against what kube-apiserver 1.33 returns."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from coreapi import catalog
from coreapi.defaults import apply, defaulter_for
from coreapi.defaults.images import parse_tag, pull_policy
from coreapi.defaults.pod_status import initial_status, qos_class
from coreapi.strategies import strategy_for
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.schemas import SchemaCatalog

INFOS: dict[tuple[str, str, str], ResourceInfo] = {(i.group, i.version, i.kind): i for i in catalog.BUILTIN_RESOURCES}


def info(group: str, kind: str, version: str = "v1") -> ResourceInfo:
    return INFOS[(group, version, kind)]


def defaulted(group: str, kind: str, obj: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    out = copy.deepcopy(obj)
    apply(info(group, kind, version), out)
    again = copy.deepcopy(out)
    apply(info(group, kind, version), again)
    assert again == out, "defaulting must be idempotent"
    return out


def container(**extra: Any) -> dict[str, Any]:
    return {"name": "c", "image": "nginx:1.25", **extra}


def template(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": list(containers) or [container()], **spec}}


POD_SPEC_DEFAULTS = {
    "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
    "securityContext": {}, "terminationGracePeriodSeconds": 30,
}
CONTAINER_DEFAULTS = {
    "imagePullPolicy": "IfNotPresent", "resources": {}, "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
}


# -- images ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("image", "policy"), [
    ("nginx", "Always"),
    ("nginx:latest", "Always"),
    ("docker.io/library/nginx:latest", "Always"),
    ("localhost:5000/team/app", "Always"),
    ("nginx:1.25", "IfNotPresent"),
    ("registry.example.com:5000/a/b:v1", "IfNotPresent"),
    ("nginx@sha256:" + "a" * 64, "IfNotPresent"),
    ("nginx:latest@sha256:" + "a" * 64, "Always"),
    ("nginx@sha256:abc", "IfNotPresent"),  # bad digest: unparsable, so no tag
    ("Nginx", "IfNotPresent"),  # upper case repository: unparsable
    ("nginx:Latest", "IfNotPresent"),
    ("", "IfNotPresent"),
    ("a" * 64, "IfNotPresent"),
    (42, "IfNotPresent"),
])
def test_pull_policy_follows_the_tag(image: Any, policy: str) -> None:
    assert pull_policy(image) == policy


def test_parse_tag_reports_tag_and_digest() -> None:
    assert parse_tag("quay.io/x/y:2") == ("2", "")
    assert parse_tag("y") == ("latest", "")
    assert parse_tag("y@sha256:" + "b" * 64) == ("", "sha256:" + "b" * 64)
    assert parse_tag("y::2") is None


# -- Deployment --------------------------------------------------------------------------------
def test_deployment_as_kubectl_create_sends_it() -> None:
    sent = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "x", "creationTimestamp": None, "labels": {"app": "x"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}}, "strategy": {},
                 "template": {"metadata": {"creationTimestamp": None, "labels": {"app": "x"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {}}]}}},
        "status": {},
    }
    out = defaulted("apps", "Deployment", sent)
    assert out["spec"] == {
        "progressDeadlineSeconds": 600, "replicas": 1, "revisionHistoryLimit": 10,
        "selector": {"matchLabels": {"app": "x"}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
        "template": {
            "metadata": {"creationTimestamp": None, "labels": {"app": "x"}},
            "spec": {**POD_SPEC_DEFAULTS, "containers": [
                {"name": "nginx", "image": "nginx", **CONTAINER_DEFAULTS, "imagePullPolicy": "Always"}]},
        },
    }
    assert out["status"] == {}


def test_deployment_keeps_what_the_client_set() -> None:
    spec = {"replicas": 0, "revisionHistoryLimit": 0, "progressDeadlineSeconds": 60,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": template(container(imagePullPolicy="Never"), restartPolicy="OnFailure",
                                 terminationGracePeriodSeconds=0, securityContext={"runAsUser": 1})}
    out = defaulted("apps", "Deployment", {"spec": spec})["spec"]
    assert out["replicas"] == 0 and out["revisionHistoryLimit"] == 0 and out["progressDeadlineSeconds"] == 60
    assert out["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    pod = out["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure" and pod["terminationGracePeriodSeconds"] == 0
    assert pod["securityContext"] == {"runAsUser": 1}
    assert pod["containers"][0]["imagePullPolicy"] == "Never"
    assert "enableServiceLinks" not in pod  # a Pod-only default


def test_deployment_recreate_gets_no_rolling_update() -> None:
    out = defaulted("apps", "Deployment", {"spec": {"strategy": {"type": "Recreate"}, "template": template()}})
    assert out["spec"]["strategy"] == {"type": "Recreate"}


# -- containers and volumes --------------------------------------------------------------------
def test_container_level_defaults() -> None:
    probe = {"httpGet": {"port": 80}}
    c = container(
        ports=[{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}],
        env=[{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
             {"name": "B", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
             {"name": "C", "value": "x"}],
        livenessProbe=probe, readinessProbe={"grpc": {"port": 9}, "periodSeconds": 5},
        startupProbe={"tcpSocket": {"port": 1}, "timeoutSeconds": 0},
        lifecycle={"preStop": {"httpGet": {"port": 8080, "path": "/stop"}}, "postStart": {"exec": {"command": ["x"]}}},
        resources={"limits": {"cpu": "0.5", "memory": "1024Mi"}, "requests": {"cpu": 0.25}},
    )
    spec = defaulted("apps", "ReplicaSet", {"spec": {"template": template(c)}})["spec"]["template"]["spec"]
    out = spec["containers"][0]
    assert [p["protocol"] for p in out["ports"]] == ["TCP", "UDP"]
    assert out["env"][0]["valueFrom"]["fieldRef"] == {"apiVersion": "v1", "fieldPath": "metadata.name"}
    assert out["env"][1]["valueFrom"]["resourceFieldRef"] == {"resource": "limits.cpu", "divisor": "0"}
    assert out["env"][2] == {"name": "C", "value": "x"}
    probe_defaults = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
    assert out["livenessProbe"] == {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, **probe_defaults}
    assert out["readinessProbe"] == {"grpc": {"port": 9, "service": ""}, **probe_defaults, "periodSeconds": 5}
    assert out["startupProbe"]["timeoutSeconds"] == 1
    assert out["lifecycle"]["preStop"]["httpGet"] == {"port": 8080, "path": "/stop", "scheme": "HTTP"}
    assert out["lifecycle"]["postStart"] == {"exec": {"command": ["x"]}}
    # quantities come back canonical, and a template gets no requests copied from limits
    assert out["resources"] == {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "250m"}}


def test_init_and_ephemeral_containers_are_defaulted_too() -> None:
    pod = {"spec": {"containers": [container()], "initContainers": [container(name="i", image="busybox")],
                    "ephemeralContainers": [container(name="e", image="busybox:latest", ports=[{"containerPort": 1}])]}}
    spec = defaulted("", "Pod", pod)["spec"]
    assert spec["initContainers"][0]["imagePullPolicy"] == "Always"
    assert spec["initContainers"][0]["terminationMessagePolicy"] == "File"
    assert spec["ephemeralContainers"][0]["imagePullPolicy"] == "Always"
    assert spec["ephemeralContainers"][0]["ports"] == [{"containerPort": 1, "protocol": "TCP"}]


def test_volume_defaults() -> None:
    volumes = [
        {"name": "bare"},
        {"name": "cm", "configMap": {"name": "c"}},
        {"name": "sec", "secret": {"secretName": "s", "defaultMode": 256}},
        {"name": "host", "hostPath": {"path": "/x"}},
        {"name": "down", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
        {"name": "proj", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}},
                                                    {"downwardAPI": {"items": [{"path": "l", "fieldRef": {
                                                        "fieldPath": "metadata.labels"}}]}}]}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "1024Mi"}},
        {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
        {"name": "disk", "azureDisk": {"diskName": "d", "diskURI": "u"}},
    ]
    out = {v["name"]: v for v in defaulted("", "PodTemplate", {"template": template(volumes=volumes)})
           ["template"]["spec"]["volumes"]}
    assert out["bare"] == {"name": "bare", "emptyDir": {}}
    assert out["cm"]["configMap"] == {"name": "c", "defaultMode": 420}
    assert out["sec"]["secret"]["defaultMode"] == 256
    assert out["host"]["hostPath"] == {"path": "/x", "type": ""}
    assert out["down"]["downwardAPI"]["defaultMode"] == 420
    assert out["down"]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"
    projected = out["proj"]["projected"]
    assert projected["defaultMode"] == 420
    assert projected["sources"][0]["serviceAccountToken"]["expirationSeconds"] == 3600
    assert projected["sources"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"
    assert out["tmp"]["emptyDir"] == {"sizeLimit": "1Gi"}
    claim = out["eph"]["ephemeral"]["volumeClaimTemplate"]
    assert claim["metadata"] == {"creationTimestamp": None}
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem", "resources": {}}
    assert out["disk"]["azureDisk"] == {"diskName": "d", "diskURI": "u", "cachingMode": "ReadWrite",
                                        "fsType": "ext4", "readOnly": False, "kind": "Shared"}


def test_service_account_alias_is_kept_in_sync() -> None:
    spec = defaulted("", "Pod", {"spec": {"containers": [container()], "serviceAccount": "old"}})["spec"]
    assert spec["serviceAccountName"] == "old" and spec["serviceAccount"] == "old"
    spec = defaulted("", "Pod", {"spec": {"containers": [container()], "serviceAccountName": "new",
                                          "serviceAccount": "old"}})["spec"]
    assert spec["serviceAccountName"] == "new" and spec["serviceAccount"] == "new"


# -- Pod ---------------------------------------------------------------------------------------
def test_pod_only_defaults() -> None:
    pod = {"spec": {"hostNetwork": True, "containers": [
        container(ports=[{"containerPort": 80}, {"containerPort": 81, "hostPort": 9}],
                  resources={"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m"}})]}}
    spec = defaulted("", "Pod", pod)["spec"]
    assert spec["enableServiceLinks"] is True
    assert [p["hostPort"] for p in spec["containers"][0]["ports"]] == [80, 9]
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "100m", "memory": "1Gi"}
    assert {k: spec[k] for k in POD_SPEC_DEFAULTS} == POD_SPEC_DEFAULTS


@pytest.mark.parametrize(("resources", "qos"), [
    ([{}], "BestEffort"),
    ([{"requests": {"cpu": "0"}}], "BestEffort"),
    ([{"requests": {"cpu": "100m"}}], "Burstable"),
    ([{"limits": {"cpu": "1", "memory": "1Gi"}}], "Guaranteed"),  # requests come from limits
    ([{"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1024Mi"}}], "Guaranteed"),
    ([{"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}], "Burstable"),
    ([{"limits": {"cpu": "1", "memory": "1Gi"}}, {}], "Burstable"),
    ([{"limits": {"cpu": "1"}}], "Burstable"),
    ([{"requests": {"nvidia.com/gpu": "1"}}], "BestEffort"),
    ([{"requests": {"cpu": "bogus"}}], "BestEffort"),
])
def test_qos_class(resources: list[dict[str, Any]], qos: str) -> None:
    pod = {"spec": {"containers": [container(name=f"c{i}", resources=r) for i, r in enumerate(resources)]}}
    apply(info("", "Pod"), pod)
    assert qos_class(pod) == qos


def test_pod_status_on_create() -> None:
    strategy = strategy_for(info("", "Pod"), SchemaCatalog.load())
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [container()]}, "status": {"phase": "Running"}}
    strategy.prepare_for_create(pod)
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    gated = {"spec": {"containers": [container()], "schedulingGates": [{"name": "g"}]}}
    status = initial_status(gated, "2025-01-01T00:00:00Z")
    assert status["conditions"] == [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                     "message": "Scheduling is blocked due to non-empty scheduling gates",
                                     "lastProbeTime": None, "lastTransitionTime": "2025-01-01T00:00:00Z"}]


# -- other workloads ------------------------------------------------------------------------------
def test_replica_set_and_replication_controller() -> None:
    rs = defaulted("apps", "ReplicaSet", {"spec": {"template": template()}})
    assert rs["spec"]["replicas"] == 1 and rs["status"] == {"replicas": 0}
    rc = defaulted("", "ReplicationController", {"metadata": {"name": "r"}, "spec": {"template": template()}})
    assert rc["spec"]["replicas"] == 1 and rc["spec"]["selector"] == {"app": "a"}
    assert rc["metadata"]["labels"] == {"app": "a"}
    assert rc["spec"]["template"]["spec"]["dnsPolicy"] == "ClusterFirst"


def test_stateful_set() -> None:
    sts = defaulted("apps", "StatefulSet", {"spec": {"template": template(), "volumeClaimTemplates": [
        {"metadata": {"name": "www"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                               "resources": {"requests": {"storage": "1Gi"}}}}]}})
    spec = sts["spec"]
    assert spec["replicas"] == 1 and spec["revisionHistoryLimit"] == 10
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert spec["volumeClaimTemplates"] == [{
        "metadata": {"name": "www", "creationTimestamp": None},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                 "volumeMode": "Filesystem"},
        "status": {"phase": "Pending"}}]
    assert sts["status"] == {"replicas": 0, "availableReplicas": 0}
    # an explicit RollingUpdate without parameters stays without them; OnDelete gets none
    explicit = defaulted("apps", "StatefulSet", {"spec": {"updateStrategy": {"type": "RollingUpdate"}}})
    assert explicit["spec"]["updateStrategy"] == {"type": "RollingUpdate"}
    on_delete = defaulted("apps", "StatefulSet", {"spec": {"updateStrategy": {"type": "OnDelete"}}})
    assert on_delete["spec"]["updateStrategy"] == {"type": "OnDelete"}


def test_daemon_set() -> None:
    spec = defaulted("apps", "DaemonSet", {"spec": {"template": template()}})["spec"]
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert spec["revisionHistoryLimit"] == 10
    assert "terminationMessagePath" in spec["template"]["spec"]["containers"][0]


def test_job() -> None:
    job = defaulted("batch", "Job", {"metadata": {"name": "j"}, "spec": {"template": template(restartPolicy="Never")}})
    spec = job["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert spec["completionMode"] == "NonIndexed" and spec["suspend"] is False
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    assert job["metadata"]["labels"] == {"app": "a"}  # labels default to the template's
    parallel = defaulted("batch", "Job", {"spec": {"parallelism": 3, "backoffLimitPerIndex": 1,
                                                   "podFailurePolicy": {"rules": [
                                                       {"action": "Ignore",
                                                        "onPodConditions": [{"type": "DisruptionTarget"}]}]}}})
    spec = parallel["spec"]
    assert "completions" not in spec and spec["parallelism"] == 3
    assert spec["backoffLimit"] == 2**31 - 1
    assert spec["podReplacementPolicy"] == "Failed"
    assert spec["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"] == "True"


def test_cron_job_defaults_its_template_but_not_the_job_spec() -> None:
    cron = defaulted("batch", "CronJob", {"spec": {"schedule": "* * * * *", "jobTemplate": {
        "spec": {"template": template(restartPolicy="OnFailure")}}}})
    spec = cron["spec"]
    assert spec["concurrencyPolicy"] == "Allow" and spec["suspend"] is False
    assert spec["successfulJobsHistoryLimit"] == 3 and spec["failedJobsHistoryLimit"] == 1
    assert spec["jobTemplate"]["metadata"] == {"creationTimestamp": None}
    assert "backoffLimit" not in spec["jobTemplate"]["spec"]
    pod = spec["jobTemplate"]["spec"]["template"]
    assert pod["metadata"]["creationTimestamp"] is None and pod["spec"]["dnsPolicy"] == "ClusterFirst"


# -- services ---------------------------------------------------------------------------------------
def test_service_cluster_ip() -> None:
    svc = defaulted("", "Service", {"spec": {"selector": {"app": "a"}, "ports": [
        {"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}, {"port": 81, "targetPort": 0}]}})
    spec = svc["spec"]
    assert spec["type"] == "ClusterIP" and spec["sessionAffinity"] == "None"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert "externalTrafficPolicy" not in spec and "allocateLoadBalancerNodePorts" not in spec
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80},
                             {"port": 53, "protocol": "UDP", "targetPort": "dns"},
                             {"port": 81, "protocol": "TCP", "targetPort": 81}]
    assert svc["status"] == {"loadBalancer": {}}
    assert "clusterIP" not in spec and "ipFamilies" not in spec  # allocation is not defaulting


def test_service_types() -> None:
    lb = defaulted("", "Service", {"spec": {"type": "LoadBalancer", "ports": [{"port": 1}]}})["spec"]
    assert lb["externalTrafficPolicy"] == "Cluster" and lb["allocateLoadBalancerNodePorts"] is True
    node_port = defaulted("", "Service", {"spec": {"type": "NodePort"}})["spec"]
    assert node_port["externalTrafficPolicy"] == "Cluster" and "allocateLoadBalancerNodePorts" not in node_port
    external = defaulted("", "Service", {"spec": {"type": "ExternalName", "externalName": "x.example"}})["spec"]
    assert "internalTrafficPolicy" not in external and "externalTrafficPolicy" not in external
    with_ips = defaulted("", "Service", {"spec": {"externalIPs": ["1.2.3.4"]}})["spec"]
    assert with_ips["externalTrafficPolicy"] == "Cluster"


def test_service_session_affinity() -> None:
    client_ip = defaulted("", "Service", {"spec": {"sessionAffinity": "ClientIP"}})["spec"]
    assert client_ip["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    kept = defaulted("", "Service", {"spec": {"sessionAffinity": "ClientIP",
                                              "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 5}}}})
    assert kept["spec"]["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 5}}
    dropped = defaulted("", "Service", {"spec": {"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 5}}}})
    assert "sessionAffinityConfig" not in dropped["spec"]


def test_endpoints_and_slices() -> None:
    ep = defaulted("", "Endpoints", {"subsets": [{"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}]})
    assert [p["protocol"] for p in ep["subsets"][0]["ports"]] == ["TCP", "UDP"]
    slice_ = defaulted("discovery.k8s.io", "EndpointSlice", {"addressType": "IPv4", "ports": [{"port": 80}]})
    assert slice_["ports"] == [{"port": 80, "name": "", "protocol": "TCP"}]


# -- other core kinds -----------------------------------------------------------------------------
def test_core_kinds() -> None:
    assert defaulted("", "Secret", {"data": {}})["type"] == "Opaque"
    assert defaulted("", "Secret", {"type": "kubernetes.io/tls"})["type"] == "kubernetes.io/tls"
    assert defaulted("", "ConfigMap", {"data": {"a": "b"}}) == {"data": {"a": "b"}}
    pvc = defaulted("", "PersistentVolumeClaim", {"spec": {"resources": {"requests": {"storage": "1024Mi"}}}})
    assert pvc["spec"] == {"volumeMode": "Filesystem", "resources": {"requests": {"storage": "1Gi"}}}
    assert pvc["status"] == {"phase": "Pending"}
    pv = defaulted("", "PersistentVolume", {"spec": {"capacity": {"storage": "1Gi"}, "hostPath": {"path": "/d"}}})
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain" and pv["spec"]["volumeMode"] == "Filesystem"
    assert pv["spec"]["hostPath"]["type"] == "" and pv["status"] == {"phase": "Pending"}
    ns = defaulted("", "Namespace", {"metadata": {"name": "team"}})
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team"}
    assert ns["status"] == {"phase": "Active"}
    limits = defaulted("", "LimitRange", {"spec": {"limits": [
        {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "1Mi"}},
        {"type": "Pod", "max": {"cpu": "4"}}]}})["spec"]["limits"]
    assert limits[0]["default"] == {"cpu": "2"}
    assert limits[0]["defaultRequest"] == {"cpu": "2", "memory": "1Mi"}
    assert "default" not in limits[1]


def test_node_status_shape() -> None:
    node = defaulted("", "Node", {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4", "pods": "110"}}})
    status = node["status"]
    assert status["allocatable"] == {"cpu": "4", "pods": "110"}
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}
    assert status["nodeInfo"]["kubeletVersion"] == "" and len(status["nodeInfo"]) == 10
    kept = defaulted("", "Node", {"status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "3"},
                                              "nodeInfo": {"kubeletVersion": "v1.33.0"}}})["status"]
    assert kept["allocatable"] == {"cpu": "3"} and kept["nodeInfo"]["kubeletVersion"] == "v1.33.0"


# -- other groups --------------------------------------------------------------------------------
def test_group_kinds() -> None:
    policy = defaulted("networking.k8s.io", "NetworkPolicy", {"spec": {
        "ingress": [{"ports": [{"port": 80}]}], "egress": [{}]}})["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"] and policy["podSelector"] == {}
    assert policy["ingress"][0]["ports"] == [{"port": 80, "protocol": "TCP"}]
    assert defaulted("networking.k8s.io", "NetworkPolicy", {"spec": {}})["spec"]["policyTypes"] == ["Ingress"]
    binding = defaulted("rbac.authorization.k8s.io", "RoleBinding", {
        "roleRef": {"kind": "Role", "name": "r"},
        "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s", "namespace": "d"}]})
    assert binding["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"
    assert binding["subjects"][0]["apiGroup"] == "rbac.authorization.k8s.io"
    assert "apiGroup" not in binding["subjects"][1]
    sc = defaulted("storage.k8s.io", "StorageClass", {"provisioner": "p"})
    assert sc["reclaimPolicy"] == "Delete" and sc["volumeBindingMode"] == "Immediate"
    assert defaulted("scheduling.k8s.io", "PriorityClass", {"value": 1})["preemptionPolicy"] == "PreemptLowerPriority"
    csr = defaulted("certificates.k8s.io", "CertificateSigningRequest", {"status": {"conditions": [
        {"type": "Approved"}, {"type": "Failed", "status": "False"}]}})
    assert [c["status"] for c in csr["status"]["conditions"]] == ["True", "False"]
    hpa = defaulted("autoscaling", "HorizontalPodAutoscaler", {"spec": {"maxReplicas": 3, "behavior": {
        "scaleDown": {"stabilizationWindowSeconds": 60}}}}, version="v2")["spec"]
    assert hpa["minReplicas"] == 1
    assert hpa["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    assert hpa["behavior"]["scaleDown"] == {"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
                                            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}
    assert hpa["behavior"]["scaleUp"]["stabilizationWindowSeconds"] == 0
    hook = defaulted("admissionregistration.k8s.io", "MutatingWebhookConfiguration", {"webhooks": [
        {"name": "w", "clientConfig": {"service": {"name": "s", "namespace": "n"}}, "rules": [{"operations": ["*"]}]}]})
    w = hook["webhooks"][0]
    assert (w["failurePolicy"], w["matchPolicy"], w["timeoutSeconds"], w["reinvocationPolicy"]) == \
        ("Fail", "Equivalent", 10, "Never")
    assert w["clientConfig"]["service"]["port"] == 443 and w["rules"][0]["scope"] == "*"


def test_kinds_without_defaults_are_untouched() -> None:
    cm = info("", "ConfigMap")
    assert defaulter_for(cm) is None
    obj = {"metadata": {"name": "x"}, "data": {"a": "1"}}
    apply(cm, obj)
    assert obj == {"metadata": {"name": "x"}, "data": {"a": "1"}}


# -- bad input never crashes --------------------------------------------------------------------------
_JUNK: list[Any] = [None, 1, "x", True, [], {}, [1, "a", None], {"a": [None]}, 1.5]


def _mutations(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(obj, dict):
        for key, value in obj.items():
            out += _mutations(value, (*path, key))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            out += _mutations(value, (*path, index))
    return out


def _replace(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copied = copy.deepcopy(obj)
    target = copied
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return copied


_RICH_POD_SPEC = {
    "hostNetwork": True, "serviceAccount": "s",
    "volumes": [{"name": "v", "configMap": {"name": "c"}, "projected": {"sources": [{"downwardAPI": {"items": [
        {"path": "p", "fieldRef": {}, "resourceFieldRef": {"resource": "limits.cpu"}}]}}]}},
        {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "1"}}}}}}],
    "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 1}], "env": [{"name": "a", "valueFrom": {
        "fieldRef": {"fieldPath": "x"}}}], "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1"}},
        "livenessProbe": {"httpGet": {"port": 1}, "grpc": {}}, "lifecycle": {"preStop": {"httpGet": {}}}}],
}
_SAMPLES: list[tuple[str, str, str, dict[str, Any]]] = [
    ("", "v1", "Pod", {"metadata": {"name": "p"}, "spec": _RICH_POD_SPEC}),
    ("apps", "v1", "Deployment", {"spec": {"strategy": {"rollingUpdate": {}}, "template": {"spec": _RICH_POD_SPEC}}}),
    ("apps", "v1", "StatefulSet", {"spec": {"updateStrategy": {"rollingUpdate": {}}, "volumeClaimTemplates": [
        {"spec": {"resources": {}}}], "template": {"metadata": {}, "spec": _RICH_POD_SPEC}}}),
    ("apps", "v1", "DaemonSet", {"spec": {"updateStrategy": {}}, "status": {}}),
    ("batch", "v1", "Job", {"metadata": {}, "spec": {"podFailurePolicy": {"rules": [{"onPodConditions": [{}]}]},
                                                     "template": {"metadata": {"labels": {"a": "b"}}}}}),
    ("batch", "v1", "CronJob", {"spec": {"jobTemplate": {"spec": {"template": {"spec": _RICH_POD_SPEC}}}}}),
    ("", "v1", "ReplicationController", {"metadata": {}, "spec": {"template": {"metadata": {"labels": {"a": "b"}}}}}),
    ("", "v1", "Service", {"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP", "ports": [{"port": 1}]},
                           "status": {"loadBalancer": {"ingress": [{"ip": "1.1.1.1"}]}}}),
    ("", "v1", "LimitRange", {"spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}}),
    ("", "v1", "Namespace", {"metadata": {"name": "n", "labels": {}}, "status": {}}),
    ("", "v1", "Node", {"status": {"capacity": {"cpu": "1"}, "daemonEndpoints": {"kubeletEndpoint": {}},
                                   "nodeInfo": {}}}),
    ("networking.k8s.io", "v1", "NetworkPolicy", {"spec": {"egress": [{"ports": [{}]}]}}),
    ("autoscaling", "v2", "HorizontalPodAutoscaler", {"spec": {"behavior": {"scaleUp": {}}}}),
]


@pytest.mark.parametrize(("group", "version", "kind", "sample"), _SAMPLES, ids=[s[2] for s in _SAMPLES])
def test_wrong_types_anywhere_never_crash(group: str, version: str, kind: str, sample: dict[str, Any]) -> None:
    resource = info(group, kind, version)
    for path in _mutations(sample):
        for junk in _JUNK:
            obj = _replace(sample, path, junk)
            if not isinstance(obj, dict):
                apply(resource, obj)  # type: ignore[arg-type]  # a non-object body is left alone
                continue
            apply(resource, obj)
            again = copy.deepcopy(obj)
            apply(resource, again)
            assert again == obj, (path, junk)


def test_wrong_types_are_left_for_validation() -> None:
    out = defaulted("apps", "Deployment", {"spec": {"replicas": "three", "strategy": "fast",
                                                    "template": {"spec": {"containers": "nginx"}}}})
    assert out["spec"]["replicas"] == "three" and out["spec"]["strategy"] == "fast"
    assert out["spec"]["template"]["spec"]["containers"] == "nginx"
    probe = defaulted("", "Pod", {"spec": {"containers": [container(livenessProbe={"timeoutSeconds": "1"},
                                                                    resources={"limits": {"cpu": "lots"}})]}})
    c = probe["spec"]["containers"][0]
    assert c["livenessProbe"]["timeoutSeconds"] == "1"
    assert c["resources"] == {"limits": {"cpu": "lots"}, "requests": {"cpu": "lots"}}
