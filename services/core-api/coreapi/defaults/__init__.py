"""Defaulting of built-in kinds, as kube-apiserver's generated defaulters do it.

``apply(info, obj)`` fills the defaults of the object's kind in place; kinds without defaults are
left alone. Defaults apply to the served version's shape (``info`` names it) on create and on
every update, so each defaulter is idempotent and only fills what Go would see as unset. They
never fail: a field of the wrong type is skipped and left for validation to report.

The modules follow kube's packages: :mod:`.pods` and :mod:`.volumes` (core/v1 PodSpec),
:mod:`.workloads` (apps/v1, batch/v1, ReplicationController, PodTemplate), :mod:`.services`,
:mod:`.core` (the other core/v1 kinds) and :mod:`.groups` (the remaining API groups).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from genericapi.apimachinery.resources import ResourceInfo

from . import core, groups, pods, services, workloads
from .fields import ensure_obj

Defaulter = Callable[[dict[str, Any]], None]

#: (group, kind) -> defaulter, for kinds defaulted the same in every served version
_BY_KIND: dict[tuple[str, str], Defaulter] = {
    ("", "Pod"): pods.default_pod,
    ("", "PodTemplate"): workloads.pod_template,
    ("", "ReplicationController"): workloads.replication_controller,
    ("", "Service"): services.service,
    ("", "Endpoints"): services.endpoints,
    ("", "Namespace"): core.namespace,
    ("", "Secret"): core.secret,
    ("", "PersistentVolume"): core.persistent_volume,
    ("", "PersistentVolumeClaim"): core.persistent_volume_claim,
    ("", "LimitRange"): core.limit_range,
    ("", "ResourceQuota"): core.resource_quota,
    ("", "Node"): core.node,
    ("apps", "Deployment"): workloads.deployment,
    ("apps", "ReplicaSet"): workloads.replica_set,
    ("apps", "StatefulSet"): workloads.stateful_set,
    ("apps", "DaemonSet"): workloads.daemon_set,
    ("batch", "Job"): workloads.job,
    ("batch", "CronJob"): workloads.cron_job,
    ("discovery.k8s.io", "EndpointSlice"): services.endpoint_slice,
    ("networking.k8s.io", "NetworkPolicy"): groups.network_policy,
    ("networking.k8s.io", "Ingress"): groups.ingress,
    ("networking.k8s.io", "IngressClass"): groups.ingress_class,
    ("rbac.authorization.k8s.io", "RoleBinding"): groups.role_binding,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): groups.role_binding,
    ("scheduling.k8s.io", "PriorityClass"): groups.priority_class,
    ("storage.k8s.io", "StorageClass"): groups.storage_class,
    ("certificates.k8s.io", "CertificateSigningRequest"): groups.certificate_signing_request,
    ("storage.k8s.io", "CSIDriver"): groups.csi_driver,
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): groups.validating_webhook_configuration,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): groups.mutating_webhook_configuration,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): groups.validating_admission_policy,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"):
        groups.validating_admission_policy_binding,
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"): groups.flow_schema,
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"): groups.priority_level_configuration,
}

#: (group, version, kind) -> defaulter, where versions differ
_BY_VERSION: dict[tuple[str, str, str], Defaulter] = {
    ("autoscaling", "v1", "HorizontalPodAutoscaler"): groups.hpa_v1,
    ("autoscaling", "v2", "HorizontalPodAutoscaler"): groups.hpa_v2,
}

#: Status counters Go writes even when zero (non-``omitempty`` int32 fields), per kind.
_ZERO_STATUS: dict[tuple[str, str], tuple[str, ...]] = {
    ("apps", "ReplicaSet"): ("replicas",),
    ("", "ReplicationController"): ("replicas",),
    ("apps", "StatefulSet"): ("replicas", "availableReplicas"),
    ("apps", "DaemonSet"): ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"),
    ("policy", "PodDisruptionBudget"): ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"),
}


def defaulter_for(info: ResourceInfo) -> Defaulter | None:
    """The defaulter of a served resource's kind, or None when kube defines none."""
    return _BY_VERSION.get((info.group, info.version, info.kind)) or _BY_KIND.get((info.group, info.kind))


def apply(info: ResourceInfo, obj: dict[str, Any]) -> None:
    """Fill the defaults of ``info``'s kind into ``obj`` (in place)."""
    if not isinstance(obj, dict):
        return
    defaulter = defaulter_for(info)
    if defaulter is not None:
        defaulter(obj)
    counters = _ZERO_STATUS.get((info.group, info.kind))
    if counters:
        status = ensure_obj(obj, "status")
        if status is not None:
            for key in counters:
                if status.get(key) is None:
                    status[key] = 0
