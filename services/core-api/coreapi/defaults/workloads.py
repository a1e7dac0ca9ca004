"""Defaults of the kinds that carry a pod template (apps/v1, batch/v1, core/v1 controllers).

Each follows its kind's ``SetDefaults_*`` in kube-apiserver 1.33 and then defaults the embedded
pod template as every generated defaulter does. A CronJob's job template gets only the
template defaults: kube runs ``SetDefaults_Job`` on Jobs, never on the template.
"""

from __future__ import annotations

from .common import default_embedded_meta
from .fields import JSON, default_ptr, default_str, ensure_obj, is_empty, items_at, obj_at
from .pods import default_template
from .volumes import default_claim

_INT32_MAX = 2**31 - 1


def deployment(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is None:
        return
    default_ptr(spec, "replicas", 1)
    strategy = ensure_obj(spec, "strategy")
    if strategy is not None:
        default_str(strategy, "type", "RollingUpdate")
        if strategy.get("type") == "RollingUpdate":
            rolling = ensure_obj(strategy, "rollingUpdate")
            if rolling is not None:
                default_ptr(rolling, "maxUnavailable", "25%")
                default_ptr(rolling, "maxSurge", "25%")
    default_ptr(spec, "revisionHistoryLimit", 10)
    default_ptr(spec, "progressDeadlineSeconds", 600)
    _template(spec)


def replica_set(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is None:
        return
    default_ptr(spec, "replicas", 1)
    _template(spec)


def daemon_set(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is None:
        return
    strategy = ensure_obj(spec, "updateStrategy")
    if strategy is not None:
        default_str(strategy, "type", "RollingUpdate")
        if strategy.get("type") == "RollingUpdate":
            rolling = ensure_obj(strategy, "rollingUpdate")
            if rolling is not None:
                default_ptr(rolling, "maxUnavailable", 1)
                default_ptr(rolling, "maxSurge", 0)
    default_ptr(spec, "revisionHistoryLimit", 10)
    _template(spec)


def stateful_set(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is None:
        return
    default_str(spec, "podManagementPolicy", "OrderedReady")
    strategy = ensure_obj(spec, "updateStrategy")
    if strategy is not None:
        if strategy.get("type") in (None, ""):
            strategy["type"] = "RollingUpdate"
            default_ptr(strategy, "rollingUpdate", {})
        rolling = obj_at(strategy, "rollingUpdate")
        if strategy.get("type") == "RollingUpdate" and rolling is not None:
            default_ptr(rolling, "partition", 0)
    retention = ensure_obj(spec, "persistentVolumeClaimRetentionPolicy")
    if retention is not None:
        default_str(retention, "whenDeleted", "Retain")
        default_str(retention, "whenScaled", "Retain")
    default_ptr(spec, "replicas", 1)
    default_ptr(spec, "revisionHistoryLimit", 10)
    _template(spec)
    for claim in items_at(spec, "volumeClaimTemplates"):
        default_embedded_meta(claim)
        default_claim(claim)


def job(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is None:
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    default_ptr(spec, "parallelism", 1)
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = _INT32_MAX if spec.get("backoffLimitPerIndex") is not None else 6
    labels = obj_at(obj_at(spec, "template"), "metadata")
    template_labels = labels.get("labels") if labels is not None else None
    meta = obj_at(obj, "metadata")
    if isinstance(template_labels, dict) and meta is not None and is_empty(meta.get("labels")):
        meta["labels"] = dict(template_labels)
    default_ptr(spec, "completionMode", "NonIndexed")
    default_ptr(spec, "suspend", False)
    failure_policy = obj_at(spec, "podFailurePolicy")
    for rule in items_at(failure_policy, "rules"):
        for pattern in items_at(rule, "onPodConditions"):
            default_str(pattern, "status", "True")
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "Failed" if failure_policy is not None else "TerminatingOrFailed"
    _template(spec)


def cron_job(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is None:
        return
    default_str(spec, "concurrencyPolicy", "Allow")
    default_ptr(spec, "suspend", False)
    default_ptr(spec, "successfulJobsHistoryLimit", 3)
    default_ptr(spec, "failedJobsHistoryLimit", 1)
    job_template = obj_at(spec, "jobTemplate")
    if job_template is not None:
        default_embedded_meta(job_template)
        job_spec = obj_at(job_template, "spec")
        if job_spec is not None:
            _template(job_spec)


def replication_controller(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is None:
        return
    template = obj_at(spec, "template")
    labels = obj_at(obj_at(template, "metadata"), "labels")
    if labels is not None:
        if is_empty(spec.get("selector")):
            spec["selector"] = dict(labels)
        meta = obj_at(obj, "metadata")
        if meta is not None and is_empty(meta.get("labels")):
            meta["labels"] = dict(labels)
    default_ptr(spec, "replicas", 1)
    if template is not None:
        default_template(template)


def pod_template(obj: JSON) -> None:
    template = obj_at(obj, "template")
    if template is not None:
        default_template(template)


def _template(spec: JSON) -> None:
    template = obj_at(spec, "template")
    if template is not None:
        default_template(template)
