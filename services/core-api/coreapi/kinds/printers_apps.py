"""Table printers for workload, batch, networking, coordination and RBAC kinds.

Column sets and cell formats follow kube-apiserver 1.33's ``pkg/printers/internalversion``
(wide form: every column is filled, clients hide priority > 0 ones).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from genericapi.apimachinery.labels import LabelSelectorError, format_labels, from_label_selector_object
from genericapi.apimachinery.tables_common import (
    META,
    Cells,
    Obj,
    age_column,
    age_of,
    between,
    column,
    container_cells,
    containers_columns,
    doc,
    get,
    integer,
    items,
    mapping,
    name_column,
    name_of,
    printer,
    rfc3339,
    since,
    text,
)

from coreapi.kinds.printers_core import load_balancer_ips

APPS = "io.k8s.api.apps.v1."
BATCH = "io.k8s.api.batch.v1."


def selector_text(selector: Any) -> str:
    """``LabelSelectorAsSelector(...).String()``; an invalid selector prints as ``<error>``."""
    try:
        return str(from_label_selector_object(selector if isinstance(selector, dict) else None))
    except LabelSelectorError:
        return "<error>"


def _template_cells(obj: Obj, *template_path: str) -> tuple[str, str]:
    return container_cells(items(obj, *template_path, "spec", "containers"))


# --- deployments, replica sets, stateful sets, daemon sets -------------------------------------------

DEPLOYMENT_PRINTER = printer([
    name_column(),
    column("Ready", "string", "Number of the pod with ready state"),
    column("Up-to-date", "string", doc(APPS + "DeploymentStatus", "updatedReplicas")),
    column("Available", "string", doc(APPS + "DeploymentStatus", "availableReplicas")),
    age_column(),
    *containers_columns(doc(APPS + "DeploymentSpec", "selector")),
], lambda obj, now: deployment_cells(obj, now))


def deployment_cells(obj: Obj, now: datetime) -> Cells:
    names, images = _template_cells(obj, "spec", "template")
    desired = integer(obj, "spec", "replicas", default=1)
    return [name_of(obj), f"{integer(obj, 'status', 'readyReplicas')}/{desired}",
            integer(obj, "status", "updatedReplicas"), integer(obj, "status", "availableReplicas"),
            age_of(obj, now), names, images, selector_text(get(obj, "spec", "selector"))]


REPLICA_SET_PRINTER = printer([
    name_column(),
    column("Desired", "integer", doc(APPS + "ReplicaSetSpec", "replicas")),
    column("Current", "integer", doc(APPS + "ReplicaSetStatus", "replicas")),
    column("Ready", "integer", doc(APPS + "ReplicaSetStatus", "readyReplicas")),
    age_column(),
    *containers_columns(doc(APPS + "ReplicaSetSpec", "selector")),
], lambda obj, now: replicaset_cells(obj, now))


def replicaset_cells(obj: Obj, now: datetime) -> Cells:
    names, images = _template_cells(obj, "spec", "template")
    return [name_of(obj), integer(obj, "spec", "replicas", default=1), integer(obj, "status", "replicas"),
            integer(obj, "status", "readyReplicas"), age_of(obj, now), names, images,
            selector_text(get(obj, "spec", "selector"))]


STATEFUL_SET_PRINTER = printer([
    name_column(),
    column("Ready", "string", "Number of the pod with ready state"),
    age_column(),
    *containers_columns(None),
], lambda obj, now: statefulset_cells(obj, now))


def statefulset_cells(obj: Obj, now: datetime) -> Cells:
    names, images = _template_cells(obj, "spec", "template")
    desired = integer(obj, "spec", "replicas", default=1)
    return [name_of(obj), f"{integer(obj, 'status', 'readyReplicas')}/{desired}", age_of(obj, now),
            names, images]


_DS_STATUS = APPS + "DaemonSetStatus"
DAEMON_SET_PRINTER = printer([
    name_column(),
    column("Desired", "integer", doc(_DS_STATUS, "desiredNumberScheduled")),
    column("Current", "integer", doc(_DS_STATUS, "currentNumberScheduled")),
    column("Ready", "integer", doc(_DS_STATUS, "numberReady")),
    column("Up-to-date", "integer", doc(_DS_STATUS, "updatedNumberScheduled")),
    column("Available", "integer", doc(_DS_STATUS, "numberAvailable")),
    column("Node Selector", "string", doc("io.k8s.api.core.v1.PodSpec", "nodeSelector")),
    age_column(),
    *containers_columns(doc(APPS + "DaemonSetSpec", "selector")),
], lambda obj, now: daemonset_cells(obj, now))


def daemonset_cells(obj: Obj, now: datetime) -> Cells:
    names, images = _template_cells(obj, "spec", "template")
    status = mapping(obj, "status")
    return [name_of(obj), integer(status, "desiredNumberScheduled"),
            integer(status, "currentNumberScheduled"),
            integer(status, "numberReady"), integer(status, "updatedNumberScheduled"),
            integer(status, "numberAvailable"),
            format_labels(mapping(obj, "spec", "template", "spec", "nodeSelector")),
            age_of(obj, now), names, images, selector_text(get(obj, "spec", "selector"))]


# --- jobs and cron jobs --------------------------------------------------------------------------------

JOB_PRINTER = printer([
    name_column(),
    column("Status", "string", "Status of the job."),
    column("Completions", "string", doc(BATCH + "JobStatus", "succeeded")),
    column("Duration", "string", "Time required to complete the job."),
    age_column(),
    *containers_columns(doc(BATCH + "JobSpec", "selector")),
], lambda obj, now: job_cells(obj, now))


def _job_has(conditions: list[Any], type_: str) -> bool:
    return any(text(c, "type") == type_ and text(c, "status") == "True" for c in conditions)


def job_status(job: Obj) -> str:
    conditions = items(job, "status", "conditions")
    if _job_has(conditions, "Complete"):
        return "Complete"
    if _job_has(conditions, "Failed"):
        return "Failed"
    if get(job, "metadata", "deletionTimestamp") is not None:
        return "Terminating"
    if _job_has(conditions, "Suspended"):
        return "Suspended"
    if _job_has(conditions, "FailureTarget"):
        return "FailureTarget"
    if _job_has(conditions, "SuccessCriteriaMet"):
        return "SuccessCriteriaMet"
    return "Running"


def job_cells(job: Obj, now: datetime) -> Cells:
    succeeded = integer(job, "status", "succeeded")
    completions = get(job, "spec", "completions")
    if isinstance(completions, int):
        completions_text = f"{succeeded}/{completions}"
    else:
        parallelism = integer(job, "spec", "parallelism")
        completions_text = f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"
    start = get(job, "status", "startTime")
    end = get(job, "status", "completionTime")
    if start is None:
        duration = ""
    elif end is None:
        duration = since(start, now)
    else:
        duration = between(start, end)
    names, images = _template_cells(job, "spec", "template")
    return [name_of(job), job_status(job), completions_text, duration, age_of(job, now), names, images,
            selector_text(get(job, "spec", "selector"))]


_CRON_SPEC, _CRON_STATUS = BATCH + "CronJobSpec", BATCH + "CronJobStatus"
CRON_JOB_PRINTER = printer([
    name_column(),
    column("Schedule", "string", doc(_CRON_SPEC, "schedule")),
    column("Timezone", "string", doc(_CRON_SPEC, "timeZone")),
    column("Suspend", "boolean", doc(_CRON_SPEC, "suspend")),
    column("Active", "integer", doc(_CRON_STATUS, "active")),
    column("Last Schedule", "string", doc(_CRON_STATUS, "lastScheduleTime")),
    age_column(),
    *containers_columns(doc(BATCH + "JobSpec", "selector")),
], lambda obj, now: cronjob_cells(obj, now))


def _bool_pointer(value: Any) -> str:
    if value is None:
        return "<unset>"
    return "True" if value is True else "False"


def cronjob_cells(cron: Obj, now: datetime) -> Cells:
    last = get(cron, "status", "lastScheduleTime")
    time_zone = get(cron, "spec", "timeZone")
    names, images = _template_cells(cron, "spec", "jobTemplate", "spec", "template")
    return [name_of(cron), text(cron, "spec", "schedule"),
            time_zone if isinstance(time_zone, str) else "<none>",
            _bool_pointer(get(cron, "spec", "suspend")), len(items(cron, "status", "active")),
            since(last, now) if last is not None else "<none>", age_of(cron, now), names, images,
            selector_text(get(cron, "spec", "jobTemplate", "spec", "selector"))]


# --- ingresses and leases ------------------------------------------------------------------------------

INGRESS_PRINTER = printer([
    name_column(),
    column("Class", "string", "The name of the IngressClass resource that should be used for this ingress."),
    column("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule"),
    column("Address", "string", "Address is a list containing ingress points for the load-balancer"),
    column("Ports", "string", "Ports of TLS configurations that open"),
    age_column(),
], lambda obj, now: ingress_cells(obj, now))


def ingress_hosts(rules: list[Any]) -> str:
    shown: list[str] = []
    limit, more = 3, False
    for rule in rules:
        if len(shown) == limit:
            more = True
        host = text(rule, "host")
        if not more and host:
            shown.append(host)
    if not shown:
        return "*"
    joined = ",".join(shown)
    return f"{joined} + {len(rules) - limit} more..." if more else joined


def ingress_cells(ingress: Obj, now: datetime) -> Cells:
    class_name = get(ingress, "spec", "ingressClassName")
    ports = "80, 443" if items(ingress, "spec", "tls") else "80"
    return [name_of(ingress), class_name if isinstance(class_name, str) else "<none>",
            ingress_hosts(items(ingress, "spec", "rules")),
            load_balancer_ips(get(ingress, "status", "loadBalancer")), ports, age_of(ingress, now)]


LEASE_PRINTER = printer([
    name_column(),
    column("Holder", "string", doc("io.k8s.api.coordination.v1.LeaseSpec", "holderIdentity")),
    age_column(),
], lambda obj, now: [name_of(obj), text(obj, "spec", "holderIdentity"), age_of(obj, now)])

# --- RBAC -----------------------------------------------------------------------------------------------

ROLE_PRINTER = printer([
    name_column(),
    column("Created At", "date", doc(META, "creationTimestamp")),
], lambda obj, now: [name_of(obj), rfc3339(get(obj, "metadata", "creationTimestamp"))])


def subjects_strings(subjects: list[Any]) -> tuple[str, str, str]:
    """``rbac.SubjectsStrings`` joined as the printer joins them."""
    users: list[str] = []
    groups: list[str] = []
    service_accounts: list[str] = []
    for subject in subjects:
        kind = text(subject, "kind")
        if kind == "ServiceAccount":
            service_accounts.append(f"{text(subject, 'namespace')}/{text(subject, 'name')}")
        elif kind == "User":
            users.append(text(subject, "name"))
        elif kind == "Group":
            groups.append(text(subject, "name"))
    return ", ".join(users), ", ".join(groups), ", ".join(service_accounts)


ROLE_BINDING_PRINTER = printer([
    name_column(),
    column("Role", "string", doc("io.k8s.api.rbac.v1.RoleBinding", "roleRef")),
    age_column(),
    column("Users", "string", "Users in the roleBinding", priority=1),
    column("Groups", "string", "Groups in the roleBinding", priority=1),
    column("ServiceAccounts", "string", "ServiceAccounts in the roleBinding", priority=1),
], lambda obj, now: [name_of(obj), f"{text(obj, 'roleRef', 'kind')}/{text(obj, 'roleRef', 'name')}",
                     age_of(obj, now), *subjects_strings(items(obj, "subjects"))])
