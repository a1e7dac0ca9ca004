"""Semantic validation of built-in kinds, beyond the JSON schema: kube-apiserver's field paths
and messages for names, containers, ports, selectors, quantities and immutable fields.

``validate`` / ``validate_update`` dispatch on (group, kind); kinds without rules here get none
(their metadata and schema are still checked by the strategy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.resources import ResourceInfo

from . import (
    admissionpolicy,
    batch,
    configdata,
    flowcontrol,
    pods,
    podupdate,
    scheduling,
    services,
    webhooks,
    workloads,
)

Validator = Callable[[dict[str, Any]], list[FieldError]]
UpdateValidator = Callable[[dict[str, Any], dict[str, Any]], list[FieldError]]

_CREATE: dict[tuple[str, str], Validator] = {
    ("", "Pod"): pods.validate_pod_create,
    ("", "PodTemplate"): lambda obj: pods.validate_pod_template_spec(obj.get("template"), "template"),
    ("", "ReplicationController"): workloads.validate_replication_controller,
    ("", "Service"): services.validate_service,
    ("", "ConfigMap"): configdata.validate_config_map,
    ("", "Secret"): configdata.validate_secret,
    ("", "PersistentVolumeClaim"): configdata.validate_pvc,
    ("", "Namespace"): configdata.validate_namespace,
    ("apps", "Deployment"): workloads.validate_deployment,
    ("apps", "ReplicaSet"): workloads.validate_replica_set,
    ("apps", "StatefulSet"): workloads.validate_stateful_set,
    ("apps", "DaemonSet"): workloads.validate_daemon_set,
    ("batch", "Job"): batch.validate_job,
    ("batch", "CronJob"): batch.validate_cron_job,
    ("scheduling.k8s.io", "PriorityClass"): scheduling.validate_priority_class,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): admissionpolicy.validate_policy,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): admissionpolicy.validate_binding,
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): webhooks.validate_validating_configuration,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): webhooks.validate_mutating_configuration,
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"): flowcontrol.validate_flow_schema,
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"): flowcontrol.validate_priority_level,
}


def _with_selector_immutable(check: Validator) -> UpdateValidator:
    """apps/v1 controllers: the new object's errors, then the selector may not change."""
    def validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        return check(new) + workloads.selector_immutable(new, old)
    return validate_update


_UPDATE: dict[tuple[str, str], UpdateValidator] = {
    ("", "Pod"): podupdate.validate_pod_update,
    ("", "Service"): services.validate_service_update,
    ("", "ConfigMap"): configdata.validate_config_map_update,
    ("", "Secret"): configdata.validate_secret_update,
    ("", "PersistentVolumeClaim"): configdata.validate_pvc_update,
    ("apps", "Deployment"): _with_selector_immutable(workloads.validate_deployment),
    ("apps", "ReplicaSet"): _with_selector_immutable(workloads.validate_replica_set),
    ("apps", "DaemonSet"): _with_selector_immutable(workloads.validate_daemon_set),
    ("apps", "StatefulSet"): workloads.validate_stateful_set_update,
    ("batch", "Job"): batch.validate_job_update,
    ("batch", "CronJob"): batch.validate_cron_job,
    ("scheduling.k8s.io", "PriorityClass"): scheduling.validate_priority_class_update,
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"): flowcontrol.validate_flow_schema_update,
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"): flowcontrol.validate_priority_level_update,
}


def validate(info: ResourceInfo, obj: dict[str, Any]) -> list[FieldError]:
    """Errors of a new object of ``info``'s kind."""
    check = _CREATE.get((info.group, info.kind))
    return check(obj) if check is not None else []


def validate_update(info: ResourceInfo, new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """Errors of an update: the new object's own errors plus forbidden changes (immutable fields)."""
    check = _UPDATE.get((info.group, info.kind))
    if check is not None:
        return check(new, old)
    create = _CREATE.get((info.group, info.kind))
    return create(new) if create is not None else []
