"""Semantic validation of built-in kinds (coreapi.validation): kube-apiserver 1.33's paths and messages."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from coreapi import catalog
from coreapi.defaults import apply
from coreapi.validation import cron, validate, validate_update
from genericapi.apimachinery.resources import ResourceInfo

INFOS = {(i.group, i.kind): i for i in catalog.BUILTIN_RESOURCES if i.version == "v1"}


def info(group: str, kind: str) -> ResourceInfo:
    return INFOS[(group, kind)]


def messages(group: str, kind: str, obj: dict[str, Any], *, default: bool = True) -> list[str]:
    obj = copy.deepcopy(obj)
    if default:
        apply(info(group, kind), obj)
    return [str(e) for e in validate(info(group, kind), obj)]


def update_messages(group: str, kind: str, new: dict[str, Any], old: dict[str, Any]) -> list[str]:
    new, old = copy.deepcopy(new), copy.deepcopy(old)
    apply(info(group, kind), new)
    apply(info(group, kind), old)
    return [str(e) for e in validate_update(info(group, kind), new, old)]


def container(**extra: Any) -> dict[str, Any]:
    return {"name": "web", "image": "nginx:1.25", **extra}


def pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": list(containers) or [container()], **spec}}


def deployment(labels: dict[str, str] | None = None, selector: Any = None, **spec: Any) -> dict[str, Any]:
    labels = {"app": "web"} if labels is None else labels
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ns"},
            "spec": {"selector": {"matchLabels": {"app": "web"}} if selector is None else selector,
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container()]}}, **spec}}


# -- pods -----------------------------------------------------------------------------------------

def test_valid_pod_and_deployment_have_no_errors() -> None:
    assert messages("", "Pod", pod(container(ports=[{"containerPort": 80, "name": "http"}],
                                             resources={"requests": {"cpu": "500m", "memory": "1Gi"},
                                                        "limits": {"cpu": "1", "memory": "1Gi"}}))) == []
    assert messages("apps", "Deployment", deployment()) == []
    # no defaulting at all: still valid (fields defaulting fills are not required)
    assert messages("apps", "Deployment", deployment(), default=False) == []


def test_container_names() -> None:
    assert messages("", "Pod", pod(container(), container(image="redis"))) == [
        'spec.containers[1].name: Duplicate value: "web"']
    assert messages("", "Pod", pod(container(name="Web_1"))) == [
        'spec.containers[0].name: Invalid value: "Web_1": a lowercase RFC 1123 label must consist of lower case '
        "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
        "or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]
    init = pod(initContainers=[container(image="busybox")])
    assert messages("", "Pod", init) == ['spec.initContainers[0].name: Duplicate value: "web"']


def test_image_required_and_whitespace() -> None:
    assert messages("", "Pod", pod(container(image=""))) == ["spec.containers[0].image: Required value"]
    assert messages("", "Pod", pod(container(image=" nginx"))) == [
        'spec.containers[0].image: Invalid value: " nginx": must not have leading or trailing whitespace']
    dep = deployment()
    dep["spec"]["template"]["spec"]["containers"][0]["image"] = ""
    assert messages("apps", "Deployment", dep) == ["spec.template.spec.containers[0].image: Required value"]


def test_ports() -> None:
    bad = pod(container(ports=[{"containerPort": 70000}, {"containerPort": 80, "hostPort": 0},
                               {"containerPort": 81, "hostPort": 65536}]))
    assert messages("", "Pod", bad) == [
        "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        "spec.containers[0].ports[2].hostPort: Invalid value: 65536: must be between 1 and 65535, inclusive"]
    names = pod(container(ports=[{"containerPort": 80, "name": "HTTP"}, {"containerPort": 81, "name": "a--b"},
                                 {"containerPort": 82, "name": "123"}, {"containerPort": 83, "name": "a--b"}]))
    assert messages("", "Pod", names) == [
        'spec.containers[0].ports[0].name: Invalid value: "HTTP": must contain only alpha-numeric characters '
        "(a-z, 0-9), and hyphens (-)",
        'spec.containers[0].ports[0].name: Invalid value: "HTTP": must contain at least one letter (a-z)',
        'spec.containers[0].ports[1].name: Invalid value: "a--b": must not contain consecutive hyphens',
        'spec.containers[0].ports[2].name: Invalid value: "123": must contain at least one letter (a-z)',
        'spec.containers[0].ports[3].name: Invalid value: "a--b": must not contain consecutive hyphens']
    dup = pod(container(ports=[{"containerPort": 80, "name": "http"}, {"containerPort": 81, "name": "http"}]))
    assert messages("", "Pod", dup) == ['spec.containers[0].ports[1].name: Duplicate value: "http"']
    proto = pod(container(ports=[{"containerPort": 80, "protocol": "HTTP"}]))
    assert messages("", "Pod", proto, default=False) == [
        'spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"']
    host = pod(container(ports=[{"containerPort": 80, "hostPort": 8080}]),
               container(name="b", ports=[{"containerPort": 81, "hostPort": 8080}]))
    assert messages("", "Pod", host) == ['spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"']


def test_env() -> None:
    env = pod(container(env=[{"name": "A=B", "value": "x"}, {"name": "", "value": "y"},
                             {"name": "C", "valueFrom": {}},
                             {"name": "D", "value": "v", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                             {"name": "E", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "bad key"}}}]))
    assert messages("", "Pod", env) == [
        'spec.containers[0].env[0].name: Invalid value: "A=B": a valid environment variable name must consist only '
        "of printable ASCII characters other than '='",
        "spec.containers[0].env[1].name: Required value",
        'spec.containers[0].env[2].valueFrom: Invalid value: "": must specify one of: `fieldRef`, '
        "`resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        'spec.containers[0].env[3].valueFrom: Invalid value: "": may not be specified when `value` is not empty',
        'spec.containers[0].env[4].valueFrom.configMapKeyRef.key: Invalid value: "bad key": a valid config key must '
        "consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', "
        "regex used for validation is '[-._a-zA-Z0-9]+')"]
    assert messages("", "Pod", pod(container(env=[{"name": "my.env-NAME_1", "value": "1"}]))) == []


def test_volumes_and_mounts() -> None:
    spec = pod(container(volumeMounts=[{"name": "data", "mountPath": "/d"}, {"name": "missing", "mountPath": "/d"}]),
               volumes=[{"name": "data", "emptyDir": {}}, {"name": "data", "configMap": {"name": "c"}},
                        {"name": "x", "emptyDir": {}, "secret": {"secretName": "s"}}])
    assert messages("", "Pod", spec) == [
        'spec.volumes[1].name: Duplicate value: "data"',
        "spec.volumes[2].secret: Forbidden: may not specify more than 1 volume type",
        'spec.containers[0].volumeMounts[1].name: Not found: "missing"',
        'spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/d": must be unique']


def test_policies() -> None:
    assert messages("", "Pod", pod(restartPolicy="Sometimes"), default=False) == [
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"']
    assert messages("", "Pod", pod(dnsPolicy="Cluster"), default=False) == [
        'spec.dnsPolicy: Unsupported value: "Cluster": supported values: "ClusterFirstWithHostNet", '
        '"ClusterFirst", "Default", "None"']


def test_resources() -> None:
    over = pod(container(resources={"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "500m",
                                                                                        "memory": "1Gi"}}))
    assert messages("", "Pod", over) == [
        'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 500m',
        'spec.containers[0].resources.requests: Invalid value: "2Gi": must be less than or equal to memory limit '
        "of 1Gi"]
    negative = pod(container(resources={"requests": {"cpu": "-1"}}))
    assert messages("", "Pod", negative) == [
        'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0']
    odd = pod(container(resources={"limits": {"gpu": "1"}}))
    assert messages("", "Pod", odd) == [  # defaulting copies limits into requests, as kube does
        'spec.containers[0].resources.limits[gpu]: Invalid value: "gpu": must be a standard resource for containers',
        'spec.containers[0].resources.requests[gpu]: Invalid value: "gpu": must be a standard resource for '
        "containers"]
    equal = pod(container(resources={"requests": {"cpu": "0.5"}, "limits": {"cpu": "500m"}}))
    assert messages("", "Pod", equal) == []


# -- selectors and workloads -------------------------------------------------------------------------

def test_selector_must_match_template() -> None:
    assert messages("apps", "Deployment", deployment(labels={"app": "other"})) == [
        'spec.template.metadata.labels: Invalid value: map[string]string{"app":"other"}: '
        "`selector` does not match template `labels`"]


def test_selector_required_and_non_empty() -> None:
    dep = deployment()
    del dep["spec"]["selector"]
    assert "spec.selector: Required value" in messages("apps", "Deployment", dep)
    assert messages("apps", "Deployment", deployment(selector={})) == [
        "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"]


def test_label_selector_syntax() -> None:
    selector = {"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": []},
        {"key": "tier", "operator": "Exists", "values": ["x"]},
        {"key": "tier", "operator": "Near"},
        {"key": "bad key", "operator": "NotIn", "values": ["ok", "not ok"]}]}
    got = messages("apps", "Deployment", deployment(selector=selector))
    assert got[:6] == [
        "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or "
        "'NotIn'",
        "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or "
        "'DoesNotExist'",
        'spec.selector.matchExpressions[2].operator: Invalid value: "Near": not a valid selector operator',
        'spec.selector.matchExpressions[3].key: Invalid value: "bad key": name part must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
        "'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        'spec.selector.matchExpressions[3].values[1]: Invalid value: "not ok": a valid label must be an empty '
        "string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
        "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\"}, "
        "MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:\"tier\", Operator:\"In\", "
        "Values:[]string{}}, v1.LabelSelectorRequirement{Key:\"tier\", Operator:\"Exists\", "
        "Values:[]string{\"x\"}}, v1.LabelSelectorRequirement{Key:\"tier\", Operator:\"Near\", "
        "Values:[]string(nil)}, v1.LabelSelectorRequirement{Key:\"bad key\", Operator:\"NotIn\", "
        "Values:[]string{\"ok\", \"not ok\"}}}}: invalid label selector"]


def test_replicas_and_strategy() -> None:
    assert messages("apps", "Deployment", deployment(replicas=-1)) == [
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0"]
    zero = deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}})
    assert messages("apps", "Deployment", zero) == [
        "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, "
        'StrVal:""}: may not be 0 when `maxSurge` is 0']
    percent = deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "150%",
                                                                                "maxSurge": "ten"}})
    assert messages("apps", "Deployment", percent) == [
        'spec.strategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"ten"}: '
        "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex "
        "used for validation is '[0-9]+%')",
        'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, '
        'StrVal:"150%"}: must not be greater than 100%']
    recreate = deployment(strategy={"type": "Recreate", "rollingUpdate": {}})
    assert messages("apps", "Deployment", recreate, default=False) == [
        "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"]


def test_deployment_selector_immutable() -> None:
    new = deployment(labels={"app": "web2"}, selector={"matchLabels": {"app": "web2"}})
    assert update_messages("apps", "Deployment", new, deployment()) == [
        'spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"web2"}, '
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"]
    assert update_messages("apps", "Deployment", deployment(replicas=5), deployment()) == []


def statefulset(**spec: Any) -> dict[str, Any]:
    base = deployment()
    base["kind"] = "StatefulSet"
    base["spec"]["serviceName"] = "web"
    base["spec"].update(spec)
    return base


def test_statefulset_update_rules() -> None:
    assert update_messages("apps", "StatefulSet", statefulset(replicas=3), statefulset()) == []
    assert update_messages("apps", "StatefulSet", statefulset(serviceName="other"), statefulset()) == [
        "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
        "'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"]
    assert messages("apps", "StatefulSet", statefulset(selector={})) == [
        "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for statefulset"]


def test_daemonset_and_replicaset() -> None:
    ds = deployment()
    ds["kind"] = "DaemonSet"
    ds["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    assert messages("apps", "DaemonSet", ds) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"']
    rs = deployment(labels={"app": "x"})
    rs["kind"] = "ReplicaSet"
    assert messages("apps", "ReplicaSet", rs) == [
        'spec.template.metadata.labels: Invalid value: map[string]string{"app":"x"}: '
        "`selector` does not match template `labels`"]


def test_replication_controller_selector() -> None:
    rc = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "r", "namespace": "ns"},
          "spec": {"selector": {"app": "a"}, "template": {"metadata": {"labels": {"app": "b"}},
                                                          "spec": {"containers": [container()]}}}}
    assert messages("", "ReplicationController", rc) == [
        'spec.template.metadata.labels: Invalid value: map[string]string{"app":"b"}: '
        "`selector` does not match template `labels`"]


# -- batch ------------------------------------------------------------------------------------------

def job(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns", "uid": "u1"},
            "spec": {"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
                     "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u1"}},
                                  "spec": {"containers": [container()], "restartPolicy": "Never"}}, **spec}}


def test_job_counts_and_mode() -> None:
    assert messages("batch", "Job", job()) == []
    assert messages("batch", "Job", job(completions=-1, parallelism=-2, backoffLimit=-3)) == [
        "spec.parallelism: Invalid value: -2: must be greater than or equal to 0",
        "spec.completions: Invalid value: -1: must be greater than or equal to 0",
        "spec.backoffLimit: Invalid value: -3: must be greater than or equal to 0"]
    assert messages("batch", "Job", job(completionMode="Sometimes"), default=False) == [
        'spec.completionMode: Unsupported value: "Sometimes": supported values: "NonIndexed", "Indexed"']
    always = job()
    del always["spec"]["template"]["spec"]["restartPolicy"]
    assert messages("batch", "Job", always) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never"']


def test_job_manual_selector_mismatch() -> None:
    manual = job(manualSelector=True, selector={"matchLabels": {"app": "x"}})
    assert messages("batch", "Job", manual) == [
        'spec.template.metadata.labels: Invalid value: map[string]string{"batch.kubernetes.io/controller-uid":"u1"}: '
        "`selector` does not match template `labels`"]


def test_job_template_immutable_unless_suspended_scheduling() -> None:
    old = job()
    new = job()
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.26"
    assert update_messages("batch", "Job", new, old) == [
        "spec.template: Invalid value: core.PodTemplateSpec{...}: field is immutable"]
    sched = job()
    sched["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    assert update_messages("batch", "Job", sched, old) == [
        "spec.template: Invalid value: core.PodTemplateSpec{...}: field is immutable"]
    suspended_old, suspended_new = job(suspend=True), job(suspend=True)
    suspended_new["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    assert update_messages("batch", "Job", suspended_new, suspended_old) == []
    started = copy.deepcopy(suspended_old)
    started["status"] = {"startTime": "2025-01-01T00:00:00Z"}
    assert len(update_messages("batch", "Job", suspended_new, started)) == 1
    moved = job(selector={"matchLabels": {"batch.kubernetes.io/controller-uid": "u2"}})
    assert 'spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{' \
           '"batch.kubernetes.io/controller-uid":"u2"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: ' \
           "field is immutable" in update_messages("batch", "Job", moved, old)


def cronjob(schedule: str = "*/5 * * * *", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {
                "spec": {"containers": [container()], "restartPolicy": "OnFailure"}}}}, **spec}}


def test_cronjob_schedule_and_timezone() -> None:
    assert messages("batch", "CronJob", cronjob()) == []
    assert messages("batch", "CronJob", cronjob("@daily", timeZone="Europe/Paris")) == []
    assert messages("batch", "CronJob", cronjob("every minute")) == [
        'spec.schedule: Invalid value: "every minute": expected exactly 5 fields, found 2: [every minute]']
    assert messages("batch", "CronJob", cronjob("0 25 * * *")) == [
        'spec.schedule: Invalid value: "0 25 * * *": end of range (25) above maximum (23): 25']
    assert messages("batch", "CronJob", cronjob("TZ=UTC 0 * * * *")) == [
        'spec.schedule: Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone '
        "field instead"]
    assert messages("batch", "CronJob", cronjob(timeZone="Mars/Olympus")) == [
        'spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus']


@pytest.mark.parametrize(("spec", "error"), [
    ("* * * * *", None), ("0 0 1 jan mon", None), ("@hourly", None), ("@every 1h30m", None),
    ("", "empty spec string"), ("@often", "unrecognized descriptor: @often"),
    ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
    ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
    ("*/0 * * * *", "step of range should be a positive number: */0"),
    ("1-2-3 * * * *", "too many hyphens: 1-2-3"), ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
])
def test_cron_parser(spec: str, error: str | None) -> None:
    assert cron.schedule_error(spec) == error


# -- services ---------------------------------------------------------------------------------------

def service(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"ports": [{"port": 80}], "selector": {"app": "web"}}
    base.update(spec)
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"}, "spec": base}


def test_service_ports() -> None:
    assert messages("", "Service", service()) == []
    assert messages("", "Service", service(ports=[])) == ["spec.ports: Required value"]
    assert messages("", "Service", service(clusterIP="None", clusterIPs=["None"], ports=[])) == []
    two = service(ports=[{"port": 80}, {"port": 443, "name": "https", "targetPort": 70000}])
    assert messages("", "Service", two) == [
        "spec.ports[0].name: Required value",
        "spec.ports[1].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive"]
    dup = service(ports=[{"port": 80, "name": "a"}, {"port": 80, "name": "a"}])
    assert messages("", "Service", dup) == [
        'spec.ports[1].name: Duplicate value: "a"',
        'spec.ports[1]: Duplicate value: core.ServicePort{Name:"", Protocol:"TCP", AppProtocol:(*string)(nil), '
        'Port:80, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:""}, NodePort:0}']
    assert messages("", "Service", service(ports=[{"port": 80, "nodePort": 30080}])) == [
        "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]


def test_service_external_name_and_cluster_ips() -> None:
    assert messages("", "Service", service(type="ExternalName", externalName="example.com.", ports=[])) == []
    assert messages("", "Service", service(type="ExternalName", ports=[])) == ["spec.externalName: Required value"]
    assert messages("", "Service", service(type="ExternalName", externalName="Bad_Name", ports=[])) == [
        'spec.externalName: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case '
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
    got = messages("", "Service", service(clusterIP="10.0.0.300", clusterIPs=["10.0.0.300"]), default=False)
    assert got == ['spec.clusterIPs[0]: Invalid value: "10.0.0.300": must be a valid IP address, (e.g. 10.9.8.7 or '
                   "2001:db8::ffff)"]
    headless_np = service(type="NodePort", clusterIP="None", clusterIPs=["None"])
    assert 'spec.clusterIPs[0]: Invalid value: "None": may not be set to \'None\' for NodePort services' in \
        messages("", "Service", headless_np, default=False)


def test_service_cluster_ip_immutable() -> None:
    old = service(clusterIP="10.0.0.10", clusterIPs=["10.0.0.10"])
    new = service(clusterIP="10.0.0.11", clusterIPs=["10.0.0.11"])
    assert update_messages("", "Service", new, old) == [
        'spec.clusterIPs[0]: Invalid value: []string{"10.0.0.11"}: may not change once set']
    assert update_messages("", "Service", old, old) == []


# -- config data ------------------------------------------------------------------------------------

def test_config_map_keys_and_immutability() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"},
          "data": {"bad key": "1", "..x": "2", "ok.key": "3"}}
    assert messages("", "ConfigMap", cm) == [
        'data[bad key]: Invalid value: "bad key": a valid config key must consist of alphanumeric characters, '
        "'-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
        "'[-._a-zA-Z0-9]+')",
        "data[..x]: Invalid value: \"..x\": must not start with '..'"]
    old: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"},
                           "data": {"a": "1"}, "immutable": True}
    new = copy.deepcopy(old)
    new["data"]["a"] = "2"
    del new["immutable"]
    assert update_messages("", "ConfigMap", new, old) == [
        "immutable: Forbidden: field is immutable when `immutable` is set",
        "data: Forbidden: field is immutable when `immutable` is set"]
    mutable = copy.deepcopy(old)
    del mutable["immutable"]
    changed = copy.deepcopy(mutable)
    changed["data"]["a"] = "2"
    assert update_messages("", "ConfigMap", changed, mutable) == []


def secret(kind: str | None, data: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ns"},
                           "data": data or {}, **extra}
    if kind:
        obj["type"] = kind
    return obj


def test_secret_types() -> None:
    assert messages("", "Secret", secret("kubernetes.io/tls", {"tls.crt": "eA=="})) == [
        "data[tls.key]: Required value"]
    assert messages("", "Secret", secret("kubernetes.io/tls", {"tls.crt": "eA==", "tls.key": "eA=="})) == []
    assert messages("", "Secret", secret("kubernetes.io/ssh-auth")) == ["data[ssh-privatekey]: Required value"]
    assert messages("", "Secret", secret("kubernetes.io/basic-auth")) == [
        "data[username]: Required value", "data[password]: Required value"]
    assert messages("", "Secret", secret("kubernetes.io/basic-auth", stringData={"username": "u"})) == []
    assert messages("", "Secret", secret("kubernetes.io/dockercfg")) == ["data[.dockercfg]: Required value"]
    assert messages("", "Secret", secret("kubernetes.io/dockerconfigjson", {".dockerconfigjson": "bm9wZQ=="})) == [
        'data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": invalid character \'o\' in literal '
        "null (expecting 'u')"]
    assert messages("", "Secret", secret("kubernetes.io/dockerconfigjson",
                                         stringData={".dockerconfigjson": '{"auths":{}}'})) == []
    assert messages("", "Secret", secret("kubernetes.io/service-account-token")) == [
        "metadata.annotations[kubernetes.io/service-account.name]: Required value"]


def test_secret_update_rules() -> None:
    old = secret("Opaque", {"a": "eA=="}, immutable=True)
    new = secret("kubernetes.io/tls", {"a": "eQ=="})
    assert update_messages("", "Secret", new, old) == [
        'type: Invalid value: "kubernetes.io/tls": field is immutable',
        "immutable: Forbidden: field is immutable when `immutable` is set",
        "data: Forbidden: field is immutable when `immutable` is set",
        "data[tls.crt]: Required value", "data[tls.key]: Required value"]


def pvc(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    base.update(spec)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "ns"},
            "spec": base}


def test_pvc() -> None:
    assert messages("", "PersistentVolumeClaim", pvc()) == []
    assert messages("", "PersistentVolumeClaim", pvc(resources={"requests": {"storage": "0"}})) == [
        'spec.resources[storage]: Invalid value: "0": must be greater than zero']
    changed = update_messages("", "PersistentVolumeClaim", pvc(storageClassName="fast"), pvc(storageClassName="slow"))
    assert len(changed) == 1
    assert changed[0].startswith("spec: Forbidden: spec is immutable after creation except resources.requests and "
                                 "volumeAttributesClassName for bound claims\n")
    assert update_messages("", "PersistentVolumeClaim", pvc(), pvc()) == []
