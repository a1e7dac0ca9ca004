"""The objects a fresh kind cluster already has, recreated on kubechain for client suites that expect them.

kr8s's tests list pods in ``kube-system`` and in all namespaces (and expect some, some with
``component=kube-apiserver`` and ``status.phase=Running``), and cordon and taint the cluster's nodes. A kind
cluster has a control-plane Node and its static (mirror) pods there; kubechain has no nodes. These are the
same objects written through the API the way kind's kubelet writes them: the Node, the mirror pods bound
to it, a CoreDNS pod, then each pod's status (phase Running, Ready) through ``pods/status``. Nothing here
runs: only the API objects exist, which is all those tests read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

NODE = "kr8s-control-plane"
STATIC_COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")


def _node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "labels": {
                "kubernetes.io/hostname": NODE,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/control-plane": "",
            },
        },
        "spec": {"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24"]},
    }


def _static_pod(component: str) -> dict[str, Any]:
    # A mirror pod, as the kubelet creates it for a manifest in /etc/kubernetes/manifests.
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{component}-{NODE}",
            "namespace": "kube-system",
            "labels": {"component": component, "tier": "control-plane"},
            "annotations": {
                "kubernetes.io/config.mirror": f"kr8s-{component}",
                "kubernetes.io/config.source": "file",
            },
        },
        "spec": {
            "nodeName": NODE,
            "hostNetwork": True,
            "priorityClassName": "system-node-critical",
            "containers": [{"name": component, "image": f"registry.k8s.io/{component}:v1.33.0"}],
        },
    }


def _coredns_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "coredns-kr8s",
            "namespace": "kube-system",
            "labels": {"k8s-app": "kube-dns"},
        },
        "spec": {
            "nodeName": NODE,
            "priorityClassName": "system-cluster-critical",
            "containers": [{"name": "coredns", "image": "registry.k8s.io/coredns/coredns:v1.12.0"}],
        },
    }


def objects() -> list[dict[str, Any]]:
    """The Node and the kube-system pods, in creation order."""
    return [_node(), *(_static_pod(c) for c in STATIC_COMPONENTS), _coredns_pod()]


NODE_IP = "172.18.0.2"


def running_status(pod: dict[str, Any]) -> dict[str, Any]:
    """What the kubelet reports for a started pod: Running, its conditions True, the node's IP as the pod's
    for a host-network pod (the static control-plane pods) and one from the node's pod CIDR otherwise."""
    conditions = [{"type": t, "status": "True"} for t in
                  ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]
    pod_ip = NODE_IP if pod["spec"].get("hostNetwork") else "10.244.0.2"
    return {"status": {"phase": "Running", "conditions": conditions, "hostIP": NODE_IP, "podIP": pod_ip}}


def create(kubectl: Callable[..., str]) -> list[str]:
    """Create the objects with ``kubectl(*args, input=...)`` and mark the pods Running; their names."""
    made = []
    for obj in objects():
        kubectl("create", "-f", "-", input=orjson.dumps(obj).decode())
        name = obj["metadata"]["name"]
        made.append(f"{obj['kind'].lower()}/{name}")
        if obj["kind"] == "Pod":
            kubectl("patch", "pod", name, "-n", obj["metadata"]["namespace"], "--subresource=status",
                    "--type=merge", "-p", orjson.dumps(running_status(obj)).decode())
    return made
