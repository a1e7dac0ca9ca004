"""Server-side Table printing: columns, cells and the Table envelope (pkg/printers/internalversion)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from coreapi import catalog
from coreapi.kinds.base import BuiltinStrategy
from genericapi.apimachinery import tables
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.tables import human_duration
from genericapi.apimachinery.tables_common import Printer


def printer_of(group: str, resource: str) -> Printer | None:
    """A built-in kind's printer, from the strategy class its catalog row names (coreapi.kinds)."""
    for info in catalog.BUILTIN_RESOURCES:
        if (info.group, info.plural) == (group, resource):
            return getattr(info, "strategy", BuiltinStrategy).table_printer
    return None


def has_printer(group: str, resource: str) -> bool:
    return printer_of(group, resource) is not None


def table_columns(group: str, resource: str) -> list[dict[str, Any]]:
    return tables.table_columns(group, resource, printer_of(group, resource))


def table_row_cells(group: str, resource: str, obj: Any, now: datetime | None = None) -> list[Any]:
    return tables.table_row_cells(group, resource, obj, now, printer_of(group, resource))


def build_table(group: str, resource: str, objects: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return tables.build_table(group, resource, objects, *args, printer=printer_of(group, resource), **kwargs)

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)


def ago(**kwargs: float) -> str:
    return (NOW - timedelta(**kwargs)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (-3, "<invalid>"),
        (-2, "<invalid>"),
        (-1.5, "0s"),
        (-1, "0s"),
        (0, "0s"),
        (59, "59s"),
        (119, "119s"),
        (120, "2m"),
        (312, "5m12s"),
        (599, "9m59s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60 * 25, "3h25m"),
        (8 * 3600, "8h"),
        (47 * 3600 + 3599, "47h"),
        (48 * 3600, "2d"),
        (2 * 86400 + 3 * 3600, "2d3h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (731 * 86400, "2y1d"),
        (8 * 365 * 86400, "8y"),
        (10 * 365 * 86400 + 99, "10y"),
    ],
)
def test_human_duration(seconds: float, expected: str) -> None:
    assert human_duration(seconds) == expected


def names(group: str, resource: str) -> list[str]:
    return [c["name"] for c in table_columns(group, resource)]


def test_pod_columns() -> None:
    columns = table_columns("", "pods")
    assert [c["name"] for c in columns] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
        "IP",
        "Node",
        "Nominated Node",
        "Readiness Gates",
    ]
    assert [c["priority"] for c in columns] == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert columns[0]["format"] == "name"
    assert columns[0]["description"].startswith("Name must be unique within a namespace.")
    assert set(columns[0]) == {"name", "type", "format", "description", "priority"}


RUNNING_POD = {
    "metadata": {
        "name": "nginx-7c5ddbdf54-x2vqz",
        "namespace": "default",
        "creationTimestamp": ago(minutes=5, seconds=12),
        "resourceVersion": "812",
    },
    "spec": {"nodeName": "kind-worker", "containers": [{"name": "nginx", "image": "nginx:1.27"}]},
    "status": {
        "phase": "Running",
        "podIP": "10.244.1.3",
        "podIPs": [{"ip": "10.244.1.3"}],
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {
                "name": "nginx",
                "ready": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": ago(minutes=5)}},
            }
        ],
    },
}


def test_running_pod_row() -> None:
    assert table_row_cells("", "pods", RUNNING_POD, NOW) == [
        "nginx-7c5ddbdf54-x2vqz",
        "1/1",
        "Running",
        "0",
        "5m12s",
        "10.244.1.3",
        "kind-worker",
        "<none>",
        "<none>",
    ]


def test_crashloop_pod_with_restarts() -> None:
    pod = {
        "metadata": {"name": "bad", "creationTimestamp": ago(hours=3)},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "readinessGates": [{"conditionType": "x/y"}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "x/y", "status": "True"}],
            "containerStatuses": [
                {"name": "a", "ready": True, "restartCount": 0, "state": {"running": {}}},
                {
                    "name": "b",
                    "ready": False,
                    "restartCount": 4,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(seconds=40)}},
                },
            ],
        },
    }
    cells = table_row_cells("", "pods", pod, NOW)
    assert cells[:5] == ["bad", "1/2", "CrashLoopBackOff", "4 (40s ago)", "3h"]
    assert cells[5:] == ["<none>", "<none>", "<none>", "1/1"]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (
            {
                "phase": "Pending",
                "containerStatuses": [{"name": "c", "state": {"waiting": {"reason": "ContainerCreating"}}}],
            },
            "ContainerCreating",
        ),
        (
            {
                "phase": "Pending",
                "initContainerStatuses": [{"name": "i", "state": {"waiting": {"reason": "PodInitializing"}}}],
            },
            "Init:0/1",
        ),
        (
            {
                "phase": "Pending",
                "initContainerStatuses": [{"name": "i", "state": {"terminated": {"exitCode": 2}}}],
            },
            "Init:ExitCode:2",
        ),
        (
            {
                "phase": "Pending",
                "initContainerStatuses": [
                    {"name": "i", "state": {"waiting": {"reason": "ImagePullBackOff"}}}
                ],
            },
            "Init:ImagePullBackOff",
        ),
        (
            {
                "phase": "Succeeded",
                "containerStatuses": [
                    {"name": "c", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
                ],
            },
            "Completed",
        ),
        (
            {
                "phase": "Failed",
                "containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 137, "signal": 9}}}],
            },
            "Signal:9",
        ),
        ({"phase": "Failed", "reason": "Evicted"}, "Evicted"),
        (
            {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
            },
            "SchedulingGated",
        ),
    ],
)
def test_pod_status_reason(status: dict[str, object], expected: str) -> None:
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}], "initContainers": [{"name": "i"}]},
        "status": status,
    }
    assert table_row_cells("", "pods", pod, NOW)[2] == expected


def test_terminating_pod_and_sidecar_counts() -> None:
    pod = {
        "metadata": {"name": "p", "deletionTimestamp": ago(seconds=1)},
        "spec": {"containers": [{"name": "c"}], "initContainers": [{"name": "s", "restartPolicy": "Always"}]},
        "status": {
            "phase": "Running",
            "initContainerStatuses": [
                {"name": "s", "started": True, "ready": True, "restartCount": 1, "state": {"running": {}}}
            ],
            "containerStatuses": [{"name": "c", "ready": True, "state": {"running": {}}}],
        },
    }
    cells = table_row_cells("", "pods", pod, NOW)
    assert cells[1] == "2/2"
    assert cells[2] == "Terminating"
    assert cells[3] == "1"  # no last termination time, so no "(... ago)"
    assert cells[4] == "<unknown>"


def test_completed_pod_row_conditions() -> None:
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Succeeded"},
    }
    table = build_table("", "pods", [pod], "None", now=NOW)
    assert table["rows"][0]["conditions"] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]


def test_deployment_and_replicaset() -> None:
    deployment = {
        "metadata": {"name": "nginx", "creationTimestamp": ago(days=2, hours=3)},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "spec": {
                    "containers": [
                        {"name": "nginx", "image": "nginx:1.27"},
                        {"name": "side", "image": "busybox"},
                    ]
                }
            },
        },
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    assert names("apps", "deployments") == [
        "Name",
        "Ready",
        "Up-to-date",
        "Available",
        "Age",
        "Containers",
        "Images",
        "Selector",
    ]
    assert table_row_cells("apps", "deployments", deployment, NOW) == [
        "nginx",
        "2/3",
        3,
        2,
        "2d3h",
        "nginx,side",
        "nginx:1.27,busybox",
        "app=nginx",
    ]
    rs = dict(deployment, status={"replicas": 3, "readyReplicas": 3})
    assert table_row_cells("apps", "replicasets", rs, NOW)[:5] == ["nginx", 3, 3, 3, "2d3h"]


def test_statefulset_daemonset() -> None:
    sts = {
        "metadata": {"name": "db", "creationTimestamp": ago(minutes=30)},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "pg", "image": "postgres"}]}}},
        "status": {"readyReplicas": 1},
    }
    assert table_row_cells("apps", "statefulsets", sts, NOW) == ["db", "1/2", "30m", "pg", "postgres"]
    ds = {
        "metadata": {"name": "kube-proxy", "creationTimestamp": ago(days=10)},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
            "template": {
                "spec": {
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "containers": [{"name": "kube-proxy", "image": "kp:v1.33"}],
                }
            },
        },
        "status": {
            "desiredNumberScheduled": 3,
            "currentNumberScheduled": 3,
            "numberReady": 3,
            "updatedNumberScheduled": 3,
            "numberAvailable": 3,
        },
    }
    assert table_row_cells("apps", "daemonsets", ds, NOW) == [
        "kube-proxy",
        3,
        3,
        3,
        3,
        3,
        "kubernetes.io/os=linux",
        "10d",
        "kube-proxy",
        "kp:v1.33",
        "k8s-app=kube-proxy",
    ]


def test_services() -> None:
    svc = {
        "metadata": {"name": "kubernetes", "creationTimestamp": ago(days=40)},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": "10.96.0.1",
            "clusterIPs": ["10.96.0.1"],
            "ports": [{"port": 443, "protocol": "TCP"}],
        },
    }
    assert table_row_cells("", "services", svc, NOW) == [
        "kubernetes",
        "ClusterIP",
        "10.96.0.1",
        "<none>",
        "443/TCP",
        "40d",
        "<none>",
    ]
    lb = {
        "metadata": {"name": "web"},
        "spec": {
            "type": "LoadBalancer",
            "clusterIPs": ["10.96.3.4"],
            "selector": {"app": "web"},
            "ports": [
                {"port": 80, "nodePort": 30080, "protocol": "TCP"},
                {"port": 443, "nodePort": 30443, "protocol": "TCP"},
            ],
        },
        "status": {"loadBalancer": {}},
    }
    cells = table_row_cells("", "services", lb, NOW)
    assert cells[3:5] == ["<pending>", "80:30080/TCP,443:30443/TCP"]
    assert cells[6] == "app=web"
    lb["status"] = {"loadBalancer": {"ingress": [{"ip": "172.18.0.5"}, {"hostname": "a.example.com"}]}}
    assert table_row_cells("", "services", lb, NOW)[3] == "172.18.0.5,a.example.com"
    ext = {"metadata": {"name": "e"}, "spec": {"type": "ExternalName", "externalName": "db.example.com"}}
    assert table_row_cells("", "services", ext, NOW)[2:5] == ["<none>", "db.example.com", "<none>"]


def test_endpoints() -> None:
    ep = {
        "metadata": {"name": "web"},
        "subsets": [
            {
                "addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "fd00::3"}, {"ip": "10.0.0.4"}],
                "ports": [{"port": 80}],
            }
        ],
    }
    assert table_row_cells("", "endpoints", ep, NOW)[1] == "10.0.0.1:80,10.0.0.2:80,[fd00::3]:80 + 1 more..."
    assert table_row_cells("", "endpoints", {"metadata": {"name": "x"}}, NOW)[1] == "<none>"


def test_configmap_secret_namespace_serviceaccount() -> None:
    cm = {
        "metadata": {"name": "kube-root-ca.crt", "creationTimestamp": ago(hours=5)},
        "data": {"ca.crt": "x"},
        "binaryData": {"b": "AA=="},
    }
    assert table_row_cells("", "configmaps", cm, NOW) == ["kube-root-ca.crt", 2, "5h"]
    secret = {
        "metadata": {"name": "tls"},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": "", "tls.key": ""},
    }
    assert table_row_cells("", "secrets", secret, NOW) == ["tls", "kubernetes.io/tls", 2, "<unknown>"]
    ns = {"metadata": {"name": "default", "creationTimestamp": ago(days=3)}, "status": {"phase": "Active"}}
    assert table_row_cells("", "namespaces", ns, NOW) == ["default", "Active", "3d"]
    assert table_row_cells("", "serviceaccounts", {"metadata": {"name": "default"}}, NOW)[1] == 0


def test_nodes() -> None:
    node = {
        "metadata": {
            "name": "kind-control-plane",
            "creationTimestamp": ago(days=1),
            "labels": {
                "node-role.kubernetes.io/control-plane": "",
                "kubernetes.io/role": "master",
                "node-role.kubernetes.io/": "x",
            },
        },
        "spec": {"unschedulable": True},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True"},
            ],
            "addresses": [
                {"type": "InternalIP", "address": "172.18.0.2"},
                {"type": "Hostname", "address": "kind-control-plane"},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.33.1",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "kernelVersion": "6.8.0",
                "containerRuntimeVersion": "containerd://2.1.1",
            },
        },
    }
    assert table_row_cells("", "nodes", node, NOW) == [
        "kind-control-plane",
        "Ready,SchedulingDisabled",
        "control-plane,master",
        "24h",
        "v1.33.1",
        "172.18.0.2",
        "<none>",
        "Debian GNU/Linux 12 (bookworm)",
        "6.8.0",
        "containerd://2.1.1",
    ]
    bare = table_row_cells("", "nodes", {"metadata": {"name": "n"}}, NOW)
    assert bare[1:3] == ["Unknown", "<none>"]
    assert bare[7:] == ["<unknown>", "<unknown>", "<unknown>"]
    not_ready = {
        "metadata": {"name": "n"},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]},
    }
    assert table_row_cells("", "nodes", not_ready, NOW)[1] == "NotReady"


def test_events_core_and_events_k8s_io() -> None:
    assert names("", "events") == [
        "Last Seen",
        "Type",
        "Reason",
        "Object",
        "Subobject",
        "Source",
        "Message",
        "First Seen",
        "Count",
        "Name",
    ]
    event = {
        "metadata": {"name": "nginx.17f", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "nginx", "fieldPath": "spec.containers{nginx}"},
        "reason": "Pulled",
        "message": 'Successfully pulled image "nginx"\n',
        "type": "Normal",
        "source": {"component": "kubelet", "host": "kind-worker"},
        "firstTimestamp": ago(minutes=10),
        "lastTimestamp": ago(minutes=2),
        "count": 3,
    }
    assert table_row_cells("", "events", event, NOW) == [
        "2m",
        "Normal",
        "Pulled",
        "pod/nginx",
        "spec.containers{nginx}",
        "kubelet, kind-worker",
        'Successfully pulled image "nginx"',
        "10m",
        3,
        "nginx.17f",
    ]
    new_style = {
        "metadata": {"name": "e"},
        "regarding": {"kind": "Node"},
        "note": "hello",
        "reportingController": "ctl",
        "reportingInstance": "i-1",
        "eventTime": ago(seconds=30),
        "type": "Warning",
        "reason": "X",
    }
    assert table_row_cells("events.k8s.io", "events", new_style, NOW) == [
        "30s",
        "Warning",
        "X",
        "node",
        "",
        "ctl, i-1",
        "hello",
        "30s",
        1,
        "e",
    ]
    series = dict(new_style, series={"count": 7, "lastObservedTime": ago(seconds=5)})
    cells = table_row_cells("events.k8s.io", "events", series, NOW)
    assert cells[0] == "5s"
    assert cells[8] == 7


def test_jobs_and_cronjobs() -> None:
    job = {
        "metadata": {"name": "pi", "creationTimestamp": ago(minutes=3)},
        "spec": {
            "completions": 1,
            "selector": {"matchLabels": {"job-name": "pi"}},
            "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}},
        },
        "status": {
            "succeeded": 1,
            "startTime": ago(minutes=3),
            "completionTime": ago(minutes=2, seconds=20),
            "conditions": [{"type": "Complete", "status": "True"}],
        },
    }
    assert names("batch", "jobs") == [
        "Name",
        "Status",
        "Completions",
        "Duration",
        "Age",
        "Containers",
        "Images",
        "Selector",
    ]
    assert table_row_cells("batch", "jobs", job, NOW) == [
        "pi",
        "Complete",
        "1/1",
        "40s",
        "3m",
        "pi",
        "perl",
        "job-name=pi",
    ]
    running = {"metadata": {"name": "j"}, "spec": {"parallelism": 3}, "status": {"startTime": ago(seconds=9)}}
    assert table_row_cells("batch", "jobs", running, NOW)[1:4] == ["Running", "0/1 of 3", "9s"]
    cron = {
        "metadata": {"name": "hello", "creationTimestamp": ago(hours=1)},
        "spec": {
            "schedule": "*/1 * * * *",
            "suspend": False,
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "h", "image": "bb"}]}}}},
        },
        "status": {"active": [{"name": "hello-1"}], "lastScheduleTime": ago(seconds=42)},
    }
    assert table_row_cells("batch", "cronjobs", cron, NOW) == [
        "hello",
        "*/1 * * * *",
        "<none>",
        "False",
        1,
        "42s",
        "60m",
        "h",
        "bb",
        "",
    ]
    cron["spec"].pop("suspend")  # type: ignore[attr-defined]
    assert table_row_cells("batch", "cronjobs", cron, NOW)[3] == "<unset>"


def test_ingress_lease_rbac() -> None:
    ingress = {
        "metadata": {"name": "web"},
        "spec": {
            "ingressClassName": "nginx",
            "rules": [{"host": "a.com"}, {}, {"host": "b.com"}],
            "tls": [{"hosts": ["a.com"]}],
        },
        "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}},
    }
    assert table_row_cells("networking.k8s.io", "ingresses", ingress, NOW)[:5] == [
        "web",
        "nginx",
        "a.com,b.com",
        "1.2.3.4",
        "80, 443",
    ]
    many = {"metadata": {"name": "m"}, "spec": {"rules": [{"host": f"h{i}"} for i in range(5)]}}
    assert table_row_cells("networking.k8s.io", "ingresses", many, NOW)[1:5] == [
        "<none>",
        "h0,h1,h2 + 2 more...",
        "",
        "80",
    ]
    lease = {
        "metadata": {"name": "kube-scheduler", "creationTimestamp": ago(seconds=90)},
        "spec": {"holderIdentity": "kind-control-plane_1234"},
    }
    assert table_row_cells("coordination.k8s.io", "leases", lease, NOW) == [
        "kube-scheduler",
        "kind-control-plane_1234",
        "90s",
    ]
    role = {"metadata": {"name": "r", "creationTimestamp": "2025-05-01T10:00:00+02:00"}}
    assert names("rbac.authorization.k8s.io", "clusterroles") == ["Name", "Created At"]
    assert table_row_cells("rbac.authorization.k8s.io", "roles", role, NOW) == ["r", "2025-05-01T08:00:00Z"]
    binding = {
        "metadata": {"name": "b", "creationTimestamp": ago(days=1)},
        "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [
            {"kind": "User", "name": "alice"},
            {"kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "namespace": "kube-system", "name": "default"},
            {"kind": "User", "name": "bob"},
        ],
    }
    assert table_row_cells("rbac.authorization.k8s.io", "clusterrolebindings", binding, NOW) == [
        "b",
        "ClusterRole/view",
        "24h",
        "alice, bob",
        "devs",
        "kube-system/default",
    ]


def test_pvc_pv_rc() -> None:
    pvc = {
        "metadata": {"name": "data", "creationTimestamp": ago(minutes=15)},
        "spec": {"volumeName": "pvc-1", "storageClassName": "standard", "volumeMode": "Filesystem"},
        "status": {
            "phase": "Bound",
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"],
        },
    }
    assert table_row_cells("", "persistentvolumeclaims", pvc, NOW) == [
        "data",
        "Bound",
        "pvc-1",
        "1Gi",
        "RWO,RWX",
        "standard",
        "<unset>",
        "15m",
        "Filesystem",
    ]
    pv = {
        "metadata": {"name": "pvc-1", "annotations": {"volume.beta.kubernetes.io/storage-class": "old"}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "claimRef": {"namespace": "default", "name": "data"},
        },
        "status": {"phase": "Bound"},
    }
    assert table_row_cells("", "persistentvolumes", pv, NOW) == [
        "pvc-1",
        "1Gi",
        "RWO",
        "Delete",
        "Bound",
        "default/data",
        "old",
        "<unset>",
        "",
        "<unknown>",
        "<unset>",
    ]
    rc = {
        "metadata": {"name": "rc"},
        "spec": {"replicas": 2, "selector": {"b": "2", "a": "1"}},
        "status": {"replicas": 2, "readyReplicas": 1},
    }
    assert table_row_cells("", "replicationcontrollers", rc, NOW) == [
        "rc",
        2,
        2,
        1,
        "<unknown>",
        "",
        "",
        "a=1,b=2",
    ]


def test_default_table_for_unknown_resources() -> None:
    assert not has_printer("example.com", "widgets")
    columns = table_columns("example.com", "widgets")
    assert [(c["name"], c["type"], c["format"]) for c in columns] == [
        ("Name", "string", "name"),
        ("Created At", "date", ""),
    ]
    obj = {"metadata": {"name": "w1", "creationTimestamp": "2025-01-02T03:04:05Z"}}
    assert table_row_cells("example.com", "widgets", obj, NOW) == ["w1", "2025-01-02T03:04:05Z"]


def test_build_table_envelope_and_include_object() -> None:
    table = build_table(
        "", "pods", [RUNNING_POD], now=NOW, list_meta={"resourceVersion": "900", "continue": ""}
    )
    assert table["kind"] == "Table"
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "900"}
    assert len(table["columnDefinitions"]) == 9
    row = table["rows"][0]
    assert row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": RUNNING_POD["metadata"],
    }
    assert row["object"]["metadata"] is not RUNNING_POD["metadata"]
    assert "conditions" not in row

    full = build_table("", "pods", [RUNNING_POD], "Object", now=NOW)
    assert full["rows"][0]["object"] == RUNNING_POD
    assert full["metadata"] == {"resourceVersion": "812"}  # single object: its own resourceVersion
    none = build_table("", "pods", [RUNNING_POD], "None", now=NOW, no_headers=True)
    assert "object" not in none["rows"][0]
    assert none["columnDefinitions"] == []
    assert build_table(
        "",
        "pods",
        [],
        "",
        now=NOW,
        list_meta={"resourceVersion": "1", "remainingItemCount": 5, "continue": "abc"},
    )["metadata"] == {"resourceVersion": "1", "continue": "abc", "remainingItemCount": 5}
    with pytest.raises(APIError) as info:
        build_table("", "pods", [], "Everything")
    assert info.value.code == 400


def test_build_table_uses_current_time_by_default() -> None:
    fresh = {
        "metadata": {"name": "x", "creationTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
        "status": {"phase": "Active"},
    }
    row = build_table("", "namespaces", [fresh])["rows"][0]
    assert row["cells"][2] in ("0s", "1s", "2s")
