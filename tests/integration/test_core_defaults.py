"""Defaulting on the running chain, as kubectl and the Python client see it: imperative creates come
back with kube-apiserver's defaults, and ``kubectl apply`` then ``kubectl diff`` of the usual
manifests shows nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

NS = "defaults-it"

MANIFESTS = f"""
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {NS}}}
data: {{colour: blue}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {NS}, labels: {{app: web}}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: web
        image: nginx:1.25
        ports: [{{containerPort: 80}}]
        readinessProbe: {{httpGet: {{port: 80}}}}
        resources: {{limits: {{cpu: "0.5", memory: 128Mi}}}}
        volumeMounts: [{{name: conf, mountPath: /etc/conf}}]
      volumes:
      - name: conf
        configMap: {{name: settings}}
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {NS}}}
spec:
  selector: {{app: web}}
  ports: [{{port: 80}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db, namespace: {NS}}}
spec:
  serviceName: db
  selector: {{matchLabels: {{app: db}}}}
  template:
    metadata: {{labels: {{app: db}}}}
    spec:
      containers:
      - name: db
        image: postgres
        env: [{{name: POD, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}]
  volumeClaimTemplates:
  - metadata: {{name: data}}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {{requests: {{storage: 1Gi}}}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent, namespace: {NS}}}
spec:
  selector: {{matchLabels: {{app: agent}}}}
  template:
    metadata: {{labels: {{app: agent}}}}
    spec:
      containers: [{{name: agent, image: "busybox:1.36", args: [sleep, "3600"]}}]
---
apiVersion: batch/v1
kind: Job
metadata: {{name: once, namespace: {NS}}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{{name: once, image: "busybox:1.36", command: ["true"]}}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {{name: tick, namespace: {NS}}}
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{{name: tick, image: "busybox:1.36"}}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: scratch, namespace: {NS}}}
spec:
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 2Gi}}}}
"""


@pytest.fixture(scope="module")
def ns(chain: ChainHandle) -> Iterator[str]:
    chain.kubectl("create", "namespace", NS)
    yield NS
    chain.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=false", check=False)


def get(chain: ChainHandle, *args: str) -> dict[str, Any]:
    return json.loads(chain.kubectl("get", *args, "-n", NS, "-o", "json").stdout)  # type: ignore[no-any-return]


def test_kubectl_create_deployment_comes_back_as_kube_returns_it(chain: ChainHandle, ns: str) -> None:
    chain.kubectl("create", "deployment", "imperative", "--image=nginx", "-n", ns)
    obj = get(chain, "deployment", "imperative")
    assert obj["spec"] == {
        "progressDeadlineSeconds": 600, "replicas": 1, "revisionHistoryLimit": 10,
        "selector": {"matchLabels": {"app": "imperative"}},
        "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
        "template": {
            "metadata": {"creationTimestamp": None, "labels": {"app": "imperative"}},
            "spec": {
                "containers": [{"image": "nginx", "imagePullPolicy": "Always", "name": "nginx", "resources": {},
                                "terminationMessagePath": "/dev/termination-log",
                                "terminationMessagePolicy": "File"}],
                "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                "securityContext": {}, "terminationGracePeriodSeconds": 30,
            },
        },
    }
    assert obj["status"] == {}


def test_kubectl_run_pod_gets_pod_defaults_and_pending_status(chain: ChainHandle, ns: str) -> None:
    override = {"spec": {"containers": [{"name": "runner", "image": "busybox:1.36", "args": ["sleep", "1"],
                                         "resources": {"limits": {"cpu": "200m", "memory": "64Mi"}}}]}}
    chain.kubectl("run", "runner", "--image=busybox:1.36", "--restart=Never", "-n", ns,
                  f"--overrides={json.dumps(override)}")
    pod = get(chain, "pod", "runner")
    spec = pod["spec"]
    assert spec["enableServiceLinks"] is True and spec["restartPolicy"] == "Never"
    assert spec["dnsPolicy"] == "ClusterFirst" and spec["terminationGracePeriodSeconds"] == 30
    container = spec["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"
    # requests copied from limits (a Pod-only default) make the Pod Guaranteed
    assert container["resources"] == {"limits": {"cpu": "200m", "memory": "64Mi"},
                                      "requests": {"cpu": "200m", "memory": "64Mi"}}
    assert pod["status"] == {"phase": "Pending", "qosClass": "Guaranteed"}
    chain.kubectl("run", "bare", "--image=nginx", "-n", ns)
    assert get(chain, "pod", "bare")["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


def test_apply_then_diff_shows_nothing(chain: ChainHandle, ns: str) -> None:
    out = chain.kubectl("apply", "-f", "-", input=MANIFESTS).stdout
    for created in ("configmap/settings", "deployment.apps/web", "service/web", "statefulset.apps/db",
                    "daemonset.apps/agent", "job.batch/once", "cronjob.batch/tick", "persistentvolumeclaim/scratch"):
        assert f"{created} created" in out, out
    for version in ("1.27", "1.33"):
        same = chain.kubectl("diff", "-f", "-", input=MANIFESTS, version=version, check=False)
        assert same.returncode == 0, same.stdout + same.stderr
    kinds = "configmap,deployment,service,statefulset,daemonset,job,cronjob,pvc"
    before = {item["metadata"]["uid"]: item["metadata"]["resourceVersion"] for item in get(chain, kinds)["items"]}
    # Re-applying writes nothing. kubectl still says "configured" where its patch restates a value the
    # server canonicalises ("0.5" CPU) or an atomic list the server defaults (volumeClaimTemplates),
    # as it does against kube-apiserver.
    again = chain.kubectl("apply", "-f", "-", input=MANIFESTS).stdout
    assert again.count("unchanged") == 6, again
    after = {item["metadata"]["uid"]: item["metadata"]["resourceVersion"] for item in get(chain, kinds)["items"]}
    assert after == before and len(before) >= 8
    # a real change still shows, and only there
    changed = chain.kubectl("diff", "-f", "-", input=MANIFESTS.replace("colour: blue", "colour: green"), check=False)
    assert changed.returncode == 1, changed.stderr
    assert "settings" in changed.stdout and "deployment" not in changed.stdout.lower()
    # an unbound claim's size is immutable (kube 1.33): the server-side diff reports the rejection
    immutable = chain.kubectl("diff", "-f", "-", input=MANIFESTS.replace("storage: 2Gi", "storage: 3Gi"), check=False)
    assert immutable.returncode > 1
    assert "spec is immutable after creation except resources.requests" in immutable.stderr


def test_python_client_sees_the_defaults(chain: ChainHandle, ns: str) -> None:
    chain.kubectl("apply", "-f", "-", input=MANIFESTS)
    api = config.new_client_from_config(config_file=chain.kubeconfig)
    apps, core, batch = client.AppsV1Api(api), client.CoreV1Api(api), client.BatchV1Api(api)
    web: Any = apps.read_namespaced_deployment("web", ns)
    assert web.spec.strategy.type == "RollingUpdate" and web.spec.strategy.rolling_update.max_surge == "25%"
    probe = web.spec.template.spec.containers[0].readiness_probe
    assert (probe.http_get.path, probe.http_get.scheme, probe.period_seconds, probe.failure_threshold) == \
        ("/", "HTTP", 10, 3)
    assert web.spec.template.spec.containers[0].ports[0].protocol == "TCP"
    assert web.spec.template.spec.containers[0].resources.limits == {"cpu": "500m", "memory": "128Mi"}
    assert web.spec.template.spec.volumes[0].config_map.default_mode == 420
    svc: Any = core.read_namespaced_service("web", ns)
    assert (svc.spec.type, svc.spec.session_affinity, svc.spec.internal_traffic_policy) == \
        ("ClusterIP", "None", "Cluster")
    assert (svc.spec.ports[0].protocol, svc.spec.ports[0].target_port) == ("TCP", 80)
    db: Any = apps.read_namespaced_stateful_set("db", ns)
    assert db.spec.pod_management_policy == "OrderedReady" and db.spec.update_strategy.rolling_update.partition == 0
    assert db.spec.persistent_volume_claim_retention_policy.when_deleted == "Retain"
    assert db.spec.volume_claim_templates[0].spec.volume_mode == "Filesystem"
    assert db.spec.volume_claim_templates[0].status.phase == "Pending"
    assert db.spec.template.spec.containers[0].env[0].value_from.field_ref.api_version == "v1"
    agent: Any = apps.read_namespaced_daemon_set("agent", ns)
    assert agent.spec.update_strategy.rolling_update.max_unavailable == 1
    job: Any = batch.read_namespaced_job("once", ns)
    assert (job.spec.backoff_limit, job.spec.completions, job.spec.parallelism) == (6, 1, 1)
    assert (job.spec.completion_mode, job.spec.suspend, job.spec.pod_replacement_policy) == \
        ("NonIndexed", False, "TerminatingOrFailed")
    tick: Any = batch.read_namespaced_cron_job("tick", ns)
    assert (tick.spec.concurrency_policy, tick.spec.successful_jobs_history_limit,
            tick.spec.failed_jobs_history_limit, tick.spec.suspend) == ("Allow", 3, 1, False)
    pvc: Any = core.read_namespaced_persistent_volume_claim("scratch", ns)
    assert pvc.spec.volume_mode == "Filesystem" and pvc.status.phase == "Pending"


def test_defaults_come_back_on_update(chain: ChainHandle, ns: str) -> None:
    chain.kubectl("create", "deployment", "updated", "--image=nginx:1.25", "-n", ns)
    obj = get(chain, "deployment", "updated")
    for key in ("revisionHistoryLimit", "progressDeadlineSeconds", "strategy"):
        del obj["spec"][key]
    del obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"]
    status, body = chain.json("PUT", f"/apis/apps/v1/namespaces/{ns}/deployments/updated", obj)
    assert status == 200, body
    assert body["spec"]["revisionHistoryLimit"] == 10 and body["spec"]["strategy"]["type"] == "RollingUpdate"
    assert body["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert body["metadata"]["generation"] == 1  # the defaults restore the same spec: nothing changed


def test_wrong_types_are_rejected_not_crashed(chain: ChainHandle, ns: str) -> None:
    bad = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bad"},
           "spec": {"replicas": 1, "strategy": "fast", "selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [
                        {"name": "c", "image": "i", "livenessProbe": {"timeoutSeconds": "one"}}]}}}}
    status, body = chain.json("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", bad)
    assert status in (400, 422), body
    assert body["kind"] == "Status" and body["status"] == "Failure"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": ["1"]}}}]}}
    status, body = chain.json("POST", f"/api/v1/namespaces/{ns}/pods", pod)
    assert status in (400, 422), body
