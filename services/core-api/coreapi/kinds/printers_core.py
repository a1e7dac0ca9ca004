"""Table printers for the core (``v1``) group and events.k8s.io.

Each printer reproduces the column set and cell formatting of kube-apiserver 1.33's
``pkg/printers/internalversion`` for one kind, always in wide form (the server prints every
column and lets the client hide priority > 0 ones).
"""

from __future__ import annotations

import ipaddress
from datetime import datetime
from typing import Any

from genericapi.apimachinery.labels import format_labels, selector_from_set
from genericapi.apimachinery.tables_common import (
    META,
    Cells,
    Obj,
    RowResult,
    age_column,
    age_of,
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
    parse_time,
    printer,
    since,
    text,
)

CORE = "io.k8s.api.core.v1."

# --- pods --------------------------------------------------------------------------------------

_POD_COLUMNS = [
    name_column(),
    column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    column("Status", "string", "The aggregate status of the containers in this pod."),
    column("Restarts", "string", "The number of times the containers in this pod have been restarted "
                                 "and when the last container in this pod has restarted."),
    age_column(),
    column("IP", "string", doc(CORE + "PodStatus", "podIP"), priority=1),
    column("Node", "string", doc(CORE + "PodSpec", "nodeName"), priority=1),
    column("Nominated Node", "string", doc(CORE + "PodStatus", "nominatedNodeName"), priority=1),
    column("Readiness Gates", "string", doc(CORE + "PodSpec", "readinessGates"), priority=1),
]

_POD_SUCCEEDED = [{"type": "Completed", "status": "True", "reason": "Succeeded",
                   "message": "The pod has completed successfully."}]
_POD_FAILED = [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]


def _is_restartable_init(container: Any) -> bool:
    return isinstance(container, dict) and container.get("restartPolicy") == "Always"


def _has_condition(conditions: list[Any], type_: str) -> bool:
    return any(text(c, "type") == type_ and text(c, "status") == "True" for c in conditions)


def _later(current: datetime | None, candidate: Any) -> datetime | None:
    when = parse_time(candidate)
    if when is None:
        return current
    return when if current is None or when > current else current


def _terminated_reason(terminated: dict[str, Any], prefix: str) -> str:
    reason = text(terminated, "reason")
    if reason:
        return prefix + reason
    signal = integer(terminated, "signal")
    if signal:
        return f"{prefix}Signal:{signal}"
    return f"{prefix}ExitCode:{integer(terminated, 'exitCode')}"


def pod_cells(pod: Obj, now: datetime) -> RowResult:
    spec = mapping(pod, "spec")
    status = mapping(pod, "status")
    phase = text(status, "phase")
    reason = text(status, "reason") or phase
    conditions = items(status, "conditions")
    for condition in conditions:
        if text(condition, "type") == "PodScheduled" and text(condition, "reason") == "SchedulingGated":
            reason = "SchedulingGated"

    total = len(items(spec, "containers"))
    ready = 0
    restarts = 0
    sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None

    init_specs = {text(c, "name"): c for c in items(spec, "initContainers")}
    total += sum(1 for c in init_specs.values() if _is_restartable_init(c))
    init_count = len(items(spec, "initContainers"))

    initializing = False
    for index, container in enumerate(items(status, "initContainerStatuses")):
        restarts += integer(container, "restartCount")
        finished = get(container, "lastState", "terminated", "finishedAt")
        last_restart = _later(last_restart, finished)
        sidecar = _is_restartable_init(init_specs.get(text(container, "name")))
        if sidecar:
            sidecar_restarts += integer(container, "restartCount")
            last_sidecar_restart = _later(last_sidecar_restart, finished)
        terminated = get(container, "state", "terminated")
        waiting = get(container, "state", "waiting")
        if isinstance(terminated, dict) and integer(terminated, "exitCode") == 0:
            continue
        if sidecar and get(container, "started") is True:
            if get(container, "ready") is True:
                ready += 1
            continue
        if isinstance(terminated, dict):
            reason = _terminated_reason(terminated, "Init:")
        elif isinstance(waiting, dict) and text(waiting, "reason") not in ("", "PodInitializing"):
            reason = "Init:" + text(waiting, "reason")
        else:
            reason = f"Init:{index}/{init_count}"
        initializing = True
        break

    if not initializing or _has_condition(conditions, "Initialized"):
        restarts = sidecar_restarts
        last_restart = last_sidecar_restart
        has_running = False
        for container in reversed(items(status, "containerStatuses")):
            restarts += integer(container, "restartCount")
            last_restart = _later(last_restart, get(container, "lastState", "terminated", "finishedAt"))
            waiting = get(container, "state", "waiting")
            terminated = get(container, "state", "terminated")
            if isinstance(waiting, dict) and text(waiting, "reason"):
                reason = text(waiting, "reason")
            elif isinstance(terminated, dict):
                reason = _terminated_reason(terminated, "")
            elif get(container, "ready") is True and isinstance(get(container, "state", "running"), dict):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if _has_condition(conditions, "Ready") else "NotReady"

    if get(pod, "metadata", "deletionTimestamp") is not None:
        if text(status, "reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    restarts_text = str(restarts)
    if restarts != 0 and last_restart is not None:
        restarts_text = f"{restarts} ({since(last_restart.isoformat(), now)} ago)"

    pod_ips = items(status, "podIPs")
    pod_ip = text(pod_ips[0], "ip") if pod_ips else ""
    gates = items(spec, "readinessGates")
    gates_text = "<none>"
    if gates:
        true_count = 0
        for gate in gates:
            for condition in conditions:
                if text(condition, "type") == text(gate, "conditionType"):
                    if text(condition, "status") == "True":
                        true_count += 1
                    break
        gates_text = f"{true_count}/{len(gates)}"

    cells: Cells = [
        name_of(pod), f"{ready}/{total}", reason, restarts_text, age_of(pod, now),
        pod_ip or "<none>", text(spec, "nodeName") or "<none>",
        text(status, "nominatedNodeName") or "<none>", gates_text,
    ]
    row_conditions = _POD_SUCCEEDED if phase == "Succeeded" else _POD_FAILED if phase == "Failed" else None
    return RowResult(cells, row_conditions)


POD_PRINTER = printer(_POD_COLUMNS, pod_cells)

# --- services and endpoints ----------------------------------------------------------------------

_SERVICE_SPEC = CORE + "ServiceSpec"
SERVICE_PRINTER = printer([
    name_column(),
    column("Type", "string", doc(_SERVICE_SPEC, "type")),
    column("Cluster-IP", "string", doc(_SERVICE_SPEC, "clusterIP")),
    column("External-IP", "string", doc(_SERVICE_SPEC, "externalIPs")),
    column("Port(s)", "string", doc(_SERVICE_SPEC, "ports")),
    age_column(),
    column("Selector", "string", doc(_SERVICE_SPEC, "selector"), priority=1),
], lambda obj, now: service_cells(obj, now))


def load_balancer_ips(status: Any) -> str:
    """``loadBalancerStatusStringer`` (server prints wide, so never clipped)."""
    found = set()
    for ingress in items(status, "ingress"):
        value = text(ingress, "ip") or text(ingress, "hostname")
        if value:
            found.add(value)
    return ",".join(sorted(found))


def _external_ip(service: Obj) -> str:
    spec = mapping(service, "spec")
    external = [ip for ip in items(spec, "externalIPs") if isinstance(ip, str)]
    kind = text(spec, "type")
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else "<none>"
    if kind == "LoadBalancer":
        lb = load_balancer_ips(get(service, "status", "loadBalancer"))
        if external:
            return ",".join((lb.split(",") if lb else []) + external)
        return lb or "<pending>"
    if kind == "ExternalName":
        return text(spec, "externalName")
    return "<unknown>"


def _port_string(ports: list[Any]) -> str:
    pieces = []
    for port in ports:
        protocol = text(port, "protocol")
        node_port = integer(port, "nodePort")
        if node_port > 0:
            pieces.append(f"{integer(port, 'port')}:{node_port}/{protocol}")
        else:
            pieces.append(f"{integer(port, 'port')}/{protocol}")
    return ",".join(pieces)


def service_cells(service: Obj, now: datetime) -> Cells:
    spec = mapping(service, "spec")
    cluster_ips = items(spec, "clusterIPs")
    internal_ip = cluster_ips[0] if cluster_ips and isinstance(cluster_ips[0], str) else "<none>"
    ports = _port_string(items(spec, "ports")) or "<none>"
    return [name_of(service), text(spec, "type"), internal_ip, _external_ip(service), ports,
            age_of(service, now), format_labels(mapping(spec, "selector"))]


def _join_host_port(host: str, port: int) -> str:
    try:
        is_v6 = isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address)
    except ValueError:
        is_v6 = ":" in host
    return f"[{host}]:{port}" if is_v6 else f"{host}:{port}"


def format_endpoints(endpoints: Obj) -> str:
    subsets = items(endpoints, "subsets")
    if not subsets:
        return "<none>"
    shown: list[str] = []
    limit, more, count = 3, False, 0
    for subset in subsets:
        addresses = items(subset, "addresses")
        ports = items(subset, "ports")
        if not ports:
            for address in addresses:
                if len(shown) == limit:
                    more = True
                if not more:
                    shown.append(text(address, "ip"))
                count += 1
            continue
        for port in ports:
            for address in addresses:
                if len(shown) == limit:
                    more = True
                if not more:
                    shown.append(_join_host_port(text(address, "ip"), integer(port, "port")))
                count += 1
    joined = ",".join(shown)
    return f"{joined} + {count - limit} more..." if more else joined


ENDPOINTS_PRINTER = printer([
    name_column(), column("Endpoints", "string", doc(CORE + "Endpoints", "subsets")), age_column(),
], lambda obj, now: [name_of(obj), format_endpoints(obj), age_of(obj, now)])

# --- config, secrets, namespaces, service accounts ------------------------------------------------

CONFIG_MAP_PRINTER = printer([
    name_column(), column("Data", "string", doc(CORE + "ConfigMap", "data")), age_column(),
], lambda obj, now: [name_of(obj), len(mapping(obj, "data")) + len(mapping(obj, "binaryData")),
                     age_of(obj, now)])

SECRET_PRINTER = printer([
    name_column(), column("Type", "string", doc(CORE + "Secret", "type")),
    column("Data", "string", doc(CORE + "Secret", "data")), age_column(),
], lambda obj, now: [name_of(obj), text(obj, "type"), len(mapping(obj, "data")), age_of(obj, now)])

NAMESPACE_PRINTER = printer([
    name_column(), column("Status", "string", "The status of the namespace"), age_column(),
], lambda obj, now: [name_of(obj), text(obj, "status", "phase"), age_of(obj, now)])

SERVICE_ACCOUNT_PRINTER = printer([
    name_column(), column("Secrets", "string", doc(CORE + "ServiceAccount", "secrets")), age_column(),
], lambda obj, now: [name_of(obj), len(items(obj, "secrets")), age_of(obj, now)])

# --- nodes ------------------------------------------------------------------------------------------

_NODE_INFO = CORE + "NodeSystemInfo"
NODE_PRINTER = printer([
    name_column(),
    column("Status", "string", "The status of the node"),
    column("Roles", "string", "The roles of the node"),
    age_column(),
    column("Version", "string", doc(_NODE_INFO, "kubeletVersion")),
    column("Internal-IP", "string", doc(CORE + "NodeStatus", "addresses"), priority=1),
    column("External-IP", "string", doc(CORE + "NodeStatus", "addresses"), priority=1),
    column("OS-Image", "string", doc(_NODE_INFO, "osImage"), priority=1),
    column("Kernel-Version", "string", doc(_NODE_INFO, "kernelVersion"), priority=1),
    column("Container-Runtime", "string", doc(_NODE_INFO, "containerRuntimeVersion"), priority=1),
], lambda obj, now: node_cells(obj, now))


def node_roles(node: Obj) -> list[str]:
    roles: set[str] = set()
    for key, value in mapping(node, "metadata", "labels").items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key[len("node-role.kubernetes.io/"):]
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return sorted(roles)


def _node_address(node: Obj, kind: str) -> str:
    for address in items(node, "status", "addresses"):
        if text(address, "type") == kind:
            return text(address, "address")
    return "<none>"


def node_cells(node: Obj, now: datetime) -> Cells:
    statuses: list[str] = []
    ready = [c for c in items(node, "status", "conditions") if text(c, "type") == "Ready"]
    if ready:
        condition = ready[-1]
        statuses.append("Ready" if text(condition, "status") == "True" else "NotReady")
    else:
        statuses.append("Unknown")
    if get(node, "spec", "unschedulable") is True:
        statuses.append("SchedulingDisabled")
    info = mapping(node, "status", "nodeInfo")
    return [
        name_of(node), ",".join(statuses), ",".join(node_roles(node)) or "<none>", age_of(node, now),
        text(info, "kubeletVersion"), _node_address(node, "InternalIP"), _node_address(node, "ExternalIP"),
        text(info, "osImage") or "<unknown>", text(info, "kernelVersion") or "<unknown>",
        text(info, "containerRuntimeVersion") or "<unknown>",
    ]


# --- events (core/v1 and events.k8s.io share one printer) -----------------------------------------

_EVENT = CORE + "Event"
_EVENT_COLUMNS = [
    column("Last Seen", "string", doc(_EVENT, "lastTimestamp")),
    column("Type", "string", doc(_EVENT, "type")),
    column("Reason", "string", doc(_EVENT, "reason")),
    column("Object", "string", doc(_EVENT, "involvedObject")),
    column("Subobject", "string", doc(CORE + "ObjectReference", "fieldPath"), priority=1),
    column("Source", "string", doc(_EVENT, "source"), priority=1),
    column("Message", "string", doc(_EVENT, "message")),
    column("First Seen", "string", doc(_EVENT, "firstTimestamp"), priority=1),
    column("Count", "string", doc(_EVENT, "count"), priority=1),
    column("Name", "string", doc(META, "name"), priority=1, format_="name"),
]


def _first_non_empty(*values: str) -> str:
    for value in values:
        if value:
            return value
    return ""


def _event_row(event: Obj, now: datetime, *, involved: Any, message: str, first: Any, last: Any,
               count: int, source: Any) -> Cells:
    first_seen = since(first, now) if parse_time(first) else since(get(event, "eventTime"), now)
    last_seen = since(last, now) if parse_time(last) else first_seen
    series = get(event, "series")
    if isinstance(series, dict):
        last_seen = since(get(series, "lastObservedTime"), now)
        count = integer(series, "count")
    elif count == 0:
        count = 1
    kind = text(involved, "kind").lower()
    target = f"{kind}/{text(involved, 'name')}" if text(involved, "name") else kind
    component = _first_non_empty(text(source, "component"), text(event, "reportingController"),
                                 text(event, "reportingComponent"))
    instance = _first_non_empty(text(source, "host"), text(event, "reportingInstance"))
    source_text = f"{component}, {instance}" if instance else component
    return [last_seen, text(event, "type"), text(event, "reason"), target, text(involved, "fieldPath"),
            source_text, message.strip(), first_seen, count, name_of(event)]


def core_event_cells(event: Obj, now: datetime) -> Cells:
    return _event_row(event, now, involved=get(event, "involvedObject"), message=text(event, "message"),
                      first=get(event, "firstTimestamp"), last=get(event, "lastTimestamp"),
                      count=integer(event, "count"), source=get(event, "source"))


def events_k8s_io_cells(event: Obj, now: datetime) -> Cells:
    return _event_row(event, now, involved=get(event, "regarding"), message=text(event, "note"),
                      first=get(event, "deprecatedFirstTimestamp"),
                      last=get(event, "deprecatedLastTimestamp"),
                      count=integer(event, "deprecatedCount"), source=get(event, "deprecatedSource"))


EVENT_PRINTER = printer(_EVENT_COLUMNS, core_event_cells)
EVENTS_K8S_IO_EVENT_PRINTER = printer(_EVENT_COLUMNS, events_k8s_io_cells)

# --- replication controllers ------------------------------------------------------------------------

_RC_SPEC, _RC_STATUS = CORE + "ReplicationControllerSpec", CORE + "ReplicationControllerStatus"
REPLICATION_CONTROLLER_PRINTER = printer([
    name_column(),
    column("Desired", "integer", doc(_RC_SPEC, "replicas")),
    column("Current", "integer", doc(_RC_STATUS, "replicas")),
    column("Ready", "integer", doc(_RC_STATUS, "readyReplicas")),
    age_column(),
    *containers_columns(doc(_RC_SPEC, "selector")),
], lambda obj, now: rc_cells(obj, now))


def rc_cells(rc: Obj, now: datetime) -> Cells:
    names, images = container_cells(items(rc, "spec", "template", "spec", "containers"))
    return [name_of(rc), integer(rc, "spec", "replicas", default=1), integer(rc, "status", "replicas"),
            integer(rc, "status", "readyReplicas"), age_of(rc, now), names, images,
            str(selector_from_set(mapping(rc, "spec", "selector")))]


# --- persistent volumes and claims -------------------------------------------------------------------

_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"


def access_modes(modes: list[Any]) -> str:
    """``GetAccessModesAsString``: fixed order, duplicates dropped."""
    present = set(modes)
    order = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"),
             ("ReadWriteOncePod", "RWOP"))
    return ",".join(short for mode, short in order if mode in present)


def _storage_class(obj: Obj) -> str:
    annotations = mapping(obj, "metadata", "annotations")
    if _STORAGE_CLASS_ANNOTATION in annotations:
        return str(annotations[_STORAGE_CLASS_ANNOTATION])
    return text(obj, "spec", "storageClassName")


def _quantity(value: Any) -> str:
    return str(value) if value is not None else "0"


_PVC_SPEC, _PVC_STATUS = CORE + "PersistentVolumeClaimSpec", CORE + "PersistentVolumeClaimStatus"
PVC_PRINTER = printer([
    name_column(),
    column("Status", "string", doc(_PVC_STATUS, "phase")),
    column("Volume", "string", doc(_PVC_SPEC, "volumeName")),
    column("Capacity", "string", doc(_PVC_STATUS, "capacity")),
    column("Access Modes", "string", doc(_PVC_STATUS, "accessModes")),
    column("StorageClass", "string", "StorageClass of the pvc"),
    column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
    age_column(),
    column("VolumeMode", "string", doc(_PVC_SPEC, "volumeMode"), priority=1),
], lambda obj, now: pvc_cells(obj, now))


def pvc_cells(pvc: Obj, now: datetime) -> Cells:
    phase = "Terminating" if get(pvc, "metadata", "deletionTimestamp") else text(pvc, "status", "phase")
    volume = text(pvc, "spec", "volumeName")
    capacity = modes = ""
    if volume:
        modes = access_modes(items(pvc, "status", "accessModes"))
        capacity = _quantity(get(pvc, "status", "capacity", "storage"))
    current_class = get(pvc, "status", "currentVolumeAttributesClassName")
    return [name_of(pvc), phase, volume, capacity, modes, _storage_class(pvc),
            current_class if isinstance(current_class, str) else "<unset>", age_of(pvc, now),
            text(pvc, "spec", "volumeMode") or "<unset>"]


_PV_SPEC = CORE + "PersistentVolumeSpec"
PV_PRINTER = printer([
    name_column(),
    column("Capacity", "string", doc(_PV_SPEC, "capacity")),
    column("Access Modes", "string", doc(_PV_SPEC, "accessModes")),
    column("Reclaim Policy", "string", doc(_PV_SPEC, "persistentVolumeReclaimPolicy")),
    column("Status", "string", doc(CORE + "PersistentVolumeStatus", "phase")),
    column("Claim", "string", doc(_PV_SPEC, "claimRef")),
    column("StorageClass", "string", "StorageClass of the pv"),
    column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
    column("Reason", "string", doc(CORE + "PersistentVolumeStatus", "reason")),
    age_column(),
    column("VolumeMode", "string", doc(_PV_SPEC, "volumeMode"), priority=1),
], lambda obj, now: pv_cells(obj, now))


def pv_cells(pv: Obj, now: datetime) -> Cells:
    claim = get(pv, "spec", "claimRef")
    claim_text = f"{text(claim, 'namespace')}/{text(claim, 'name')}" if isinstance(claim, dict) else ""
    phase = "Terminating" if get(pv, "metadata", "deletionTimestamp") else text(pv, "status", "phase")
    attributes_class = get(pv, "spec", "volumeAttributesClassName")
    return [name_of(pv), _quantity(get(pv, "spec", "capacity", "storage")),
            access_modes(items(pv, "spec", "accessModes")), text(pv, "spec", "persistentVolumeReclaimPolicy"),
            phase, claim_text, _storage_class(pv),
            attributes_class if isinstance(attributes_class, str) else "<unset>",
            text(pv, "status", "reason"), age_of(pv, now), text(pv, "spec", "volumeMode") or "<unset>"]
