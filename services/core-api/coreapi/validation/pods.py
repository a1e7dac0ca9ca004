"""Pod specs (Pods and every pod template): containers, ports, env, volumes, resources, policies.

Follows ``ValidatePodSpec`` / ``validateContainerCommon`` of kube-apiserver 1.33 for the rules a
client meets in practice. Fields defaulting fills (protocol, pull and termination-message
policies, restart and DNS policies) are only checked when present, so the checks hold whether or
not the object was defaulted first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from genericapi.apimachinery import errors
from genericapi.apimachinery.errors import FieldError
from genericapi.apimachinery.quantity import Quantity, parse_quantity
from genericapi.apimachinery.validation_meta import (
    validate_annotations,
    validate_dns1123_label,
    validate_labels,
    validate_qualified_name,
)

from . import names

_PROTOCOLS = ("SCTP", "TCP", "UDP")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_TERMINATION_POLICIES = ("File", "FallbackToLogsOnError")
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
#: Volume source fields, in the order kube's validateVolumeSource checks them.
_VOLUME_SOURCES = (
    "emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore", "secret", "nfs", "iscsi",
    "glusterfs", "flocker", "persistentVolumeClaim", "rbd", "quobyte", "flexVolume", "cinder", "cephfs",
    "downwardAPI", "fc", "azureFile", "vsphereVolume", "photonPersistentDisk", "portworxVolume", "azureDisk",
    "storageos", "projected", "configMap", "scaleIO", "csi", "ephemeral", "image",
)


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def validate_pod_template_spec(template: Any, path: str) -> list[FieldError]:
    """``ValidatePodTemplateSpec``: template metadata, then its pod spec."""
    template = _dict(template)
    meta = _dict(template.get("metadata"))
    errs: list[FieldError] = []
    errs.extend(validate_labels(_dict(meta.get("labels")), f"{path}.labels"))
    errs.extend(validate_annotations(_dict(meta.get("annotations")), f"{path}.annotations"))
    spec = _dict(template.get("spec"))
    errs.extend(validate_pod_spec(spec, f"{path}.spec"))
    if _list(spec.get("ephemeralContainers")):
        errs.append(errors.forbidden(f"{path}.spec.ephemeralContainers",
                                     "ephemeral containers not allowed in pod template"))
    return errs


def validate_pod(pod: Mapping[str, Any]) -> list[FieldError]:
    """A new Pod: its spec, the checks only pods get, and no ephemeral containers on create."""
    spec = _dict(pod.get("spec"))
    errs = validate_pod_spec(spec, "spec")
    for i, ctr in enumerate(_list(spec.get("containers"))):
        image = _dict(ctr).get("image")
        if isinstance(image, str) and image != image.strip():
            errs.append(errors.invalid(f"spec.containers[{i}].image", image,
                                       "must not have leading or trailing whitespace"))
    return errs


def validate_pod_create(pod: Mapping[str, Any]) -> list[FieldError]:
    errs = validate_pod(pod)
    if _list(_dict(pod.get("spec")).get("ephemeralContainers")):
        errs.append(errors.forbidden("spec.ephemeralContainers", "cannot be set on create"))
    return errs


def validate_pod_spec(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    """``ValidatePodSpec`` (the parts kubechain serves: no nodes, so no node-side checks)."""
    errs: list[FieldError] = []
    volume_errs, volumes = _validate_volumes(_list(spec.get("volumes")), f"{path}.volumes")
    errs.extend(volume_errs)
    containers = _list(spec.get("containers"))
    init_containers = _list(spec.get("initContainers"))
    ephemeral = _list(spec.get("ephemeralContainers"))
    errs.extend(_validate_containers(containers, volumes, f"{path}.containers"))
    errs.extend(_validate_other_containers(init_containers, [containers], volumes, f"{path}.initContainers"))
    errs.extend(_validate_other_containers(ephemeral, [containers, init_containers], volumes,
                                           f"{path}.ephemeralContainers"))
    errs.extend(_host_port_conflicts(containers, f"{path}.containers"))
    errs.extend(_one_of(spec.get("restartPolicy"), _RESTART_POLICIES, f"{path}.restartPolicy"))
    errs.extend(_one_of(spec.get("dnsPolicy"), _DNS_POLICIES, f"{path}.dnsPolicy"))
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and not 1 <= deadline <= 2**31 - 1:
        errs.append(errors.invalid(f"{path}.activeDeadlineSeconds", deadline,
                                   names.inclusive_range_error(1, 2**31 - 1)))
    grace = spec.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace < 0:
        errs.append(errors.invalid(f"{path}.terminationGracePeriodSeconds", grace,
                                   "must be greater than or equal to 0"))
    return errs


def _one_of(value: Any, supported: tuple[str, ...], path: str) -> list[FieldError]:
    if value is None:
        return []  # filled by defaulting
    if value == "":
        return [errors.required(path)]
    if value not in supported:
        return [errors.not_supported(path, value, supported)]
    return []


# -- volumes ------------------------------------------------------------------------------------

def _validate_volumes(volumes: list[Any], path: str) -> tuple[list[FieldError], set[str]]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, vol in enumerate(volumes):
        vol = _dict(vol)
        idx = f"{path}[{i}]"
        name = str(vol.get("name") or "")
        if not name:
            errs.append(errors.required(f"{idx}.name"))
        else:
            errs.extend(errors.invalid(f"{idx}.name", name, m) for m in validate_dns1123_label(name))
        if name in seen:
            errs.append(errors.duplicate(f"{idx}.name", name))
        else:
            seen.add(name)
        errs.extend(_validate_volume_source(vol, idx))
    return errs, seen


def _validate_volume_source(vol: Mapping[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    count = 0
    for source in _VOLUME_SOURCES:
        if vol.get(source) is None:
            continue
        if count:
            errs.append(errors.forbidden(f"{path}.{source}", "may not specify more than 1 volume type"))
            continue
        count += 1
        body = _dict(vol.get(source))
        if source == "secret" and not body.get("secretName"):
            errs.append(errors.required(f"{path}.secret.secretName"))
        elif source == "configMap" and not body.get("name"):
            errs.append(errors.required(f"{path}.configMap.name"))
        elif source == "persistentVolumeClaim" and not body.get("claimName"):
            errs.append(errors.required(f"{path}.persistentVolumeClaim.claimName"))
        elif source == "hostPath" and not body.get("path"):
            errs.append(errors.required(f"{path}.hostPath.path"))
    # no source at all is never an error here: defaulting makes such a volume an emptyDir
    return errs


# -- containers ---------------------------------------------------------------------------------

def _validate_containers(containers: list[Any], volumes: set[str], path: str) -> list[FieldError]:
    if not containers:
        return [errors.required(path)]
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, ctr in enumerate(containers):
        ctr = _dict(ctr)
        idx = f"{path}[{i}]"
        errs.extend(_validate_container(ctr, volumes, idx))
        name = ctr.get("name") or ""
        if name in seen:
            errs.append(errors.duplicate(f"{idx}.name", name))
        else:
            seen.add(name)
    return errs


def _validate_other_containers(containers: list[Any], others: list[list[Any]], volumes: set[str],
                               path: str) -> list[FieldError]:
    """Init and ephemeral containers: names unique among every container of the pod."""
    errs: list[FieldError] = []
    taken = {_dict(c).get("name") or "" for group in others for c in group}
    for i, ctr in enumerate(containers):
        ctr = _dict(ctr)
        idx = f"{path}[{i}]"
        errs.extend(_validate_container(ctr, volumes, idx))
        name = ctr.get("name") or ""
        if name in taken:
            errs.append(errors.duplicate(f"{idx}.name", name))
        else:
            taken.add(name)
    return errs


def _validate_container(ctr: Mapping[str, Any], volumes: set[str], path: str) -> list[FieldError]:
    """``validateContainerCommon``."""
    errs: list[FieldError] = []
    name = str(ctr.get("name") or "")
    if not name:
        errs.append(errors.required(f"{path}.name"))
    else:
        errs.extend(errors.invalid(f"{path}.name", name, m) for m in validate_dns1123_label(name))
    if not ctr.get("image"):
        errs.append(errors.required(f"{path}.image"))
    policy = ctr.get("terminationMessagePolicy")
    if policy is not None:
        errs.extend(_one_of(policy, _TERMINATION_POLICIES, f"{path}.terminationMessagePolicy"))
    errs.extend(_validate_ports(_list(ctr.get("ports")), f"{path}.ports"))
    errs.extend(_validate_env(_list(ctr.get("env")), f"{path}.env"))
    errs.extend(_validate_env_from(_list(ctr.get("envFrom")), f"{path}.envFrom"))
    errs.extend(_validate_volume_mounts(_list(ctr.get("volumeMounts")), volumes, f"{path}.volumeMounts"))
    pull = ctr.get("imagePullPolicy")
    if pull is not None:
        errs.extend(_one_of(pull, _PULL_POLICIES, f"{path}.imagePullPolicy"))
    errs.extend(validate_resource_requirements(_dict(ctr.get("resources")), f"{path}.resources"))
    return errs


def _validate_ports(ports: list[Any], path: str) -> list[FieldError]:
    """``validateContainerPorts``."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, port in enumerate(ports):
        port = _dict(port)
        idx = f"{path}[{i}]"
        name = port.get("name")
        if isinstance(name, str) and name:
            msgs = names.port_name_errors(name)
            if msgs:
                errs.extend(errors.invalid(f"{idx}.name", name, m) for m in msgs)
            elif name in seen:
                errs.append(errors.duplicate(f"{idx}.name", name))
            else:
                seen.add(name)
        number = port.get("containerPort")
        if not number:
            errs.append(errors.required(f"{idx}.containerPort"))
        elif isinstance(number, int):
            errs.extend(errors.invalid(f"{idx}.containerPort", number, m) for m in names.port_num_errors(number))
        host = port.get("hostPort")
        if isinstance(host, int) and host != 0:
            errs.extend(errors.invalid(f"{idx}.hostPort", host, m) for m in names.port_num_errors(host))
        protocol = port.get("protocol")
        if protocol == "":
            errs.append(errors.required(f"{idx}.protocol"))
        elif protocol is not None and protocol not in _PROTOCOLS:
            errs.append(errors.not_supported(f"{idx}.protocol", protocol, _PROTOCOLS))
    return errs


def _host_port_conflicts(containers: list[Any], path: str) -> list[FieldError]:
    """``AccumulateUniqueHostPorts``: one (protocol, hostIP, hostPort) per pod."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, ctr in enumerate(containers):
        for j, port in enumerate(_list(_dict(ctr).get("ports"))):
            port = _dict(port)
            host = port.get("hostPort")
            if not isinstance(host, int) or host == 0:
                continue
            key = f"{port.get('protocol') or 'TCP'}/{port.get('hostIP') or ''}/{host}"
            if key in seen:
                errs.append(errors.duplicate(f"{path}[{i}].ports[{j}].hostPort", key))
            else:
                seen.add(key)
    return errs


def _validate_env(env: list[Any], path: str) -> list[FieldError]:
    """``ValidateEnv`` with relaxed names (the 1.33 default)."""
    errs: list[FieldError] = []
    for i, var in enumerate(env):
        var = _dict(var)
        idx = f"{path}[{i}]"
        name = str(var.get("name") or "")
        if not name:
            errs.append(errors.required(f"{idx}.name"))
        else:
            errs.extend(errors.invalid(f"{idx}.name", name, m) for m in names.relaxed_env_var_name_errors(name))
        errs.extend(_validate_value_from(var, f"{idx}.valueFrom"))
    return errs


def _validate_value_from(var: Mapping[str, Any], path: str) -> list[FieldError]:
    source = var.get("valueFrom")
    if not isinstance(source, Mapping):
        return []
    errs: list[FieldError] = []
    count = 0
    if isinstance(source.get("fieldRef"), Mapping):
        count += 1
        ref = source["fieldRef"]
        if not ref.get("fieldPath"):
            errs.append(errors.required(f"{path}.fieldRef.fieldPath"))
    if isinstance(source.get("resourceFieldRef"), Mapping):
        count += 1
        if not source["resourceFieldRef"].get("resource"):
            errs.append(errors.required(f"{path}.resourceFieldRef.resource"))
    for kind in ("configMapKeyRef", "secretKeyRef"):
        ref = source.get(kind)
        if not isinstance(ref, Mapping):
            continue
        count += 1
        if not ref.get("name"):
            errs.append(errors.required(f"{path}.{kind}.name"))
        key = ref.get("key")
        if not key:
            errs.append(errors.required(f"{path}.{kind}.key"))
        elif isinstance(key, str):
            errs.extend(errors.invalid(f"{path}.{kind}.key", key, m) for m in names.config_key_errors(key))
    if count == 0:
        errs.append(errors.invalid(path, "", "must specify one of: `fieldRef`, `resourceFieldRef`, "
                                            "`configMapKeyRef` or `secretKeyRef`"))
    elif var.get("value"):
        errs.append(errors.invalid(path, "", "may not be specified when `value` is not empty"))
    elif count > 1:
        errs.append(errors.invalid(path, "", "may not have more than one field specified at a time"))
    return errs


def _validate_env_from(sources: list[Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, source in enumerate(sources):
        source = _dict(source)
        idx = f"{path}[{i}]"
        count = 0
        for kind in ("configMapRef", "secretRef"):
            ref = source.get(kind)
            if not isinstance(ref, Mapping):
                continue
            count += 1
            if not ref.get("name"):
                errs.append(errors.required(f"{idx}.{kind}.name"))
        if count == 0:
            errs.append(errors.invalid(idx, "", "must specify one of: `configMapRef` or `secretRef`"))
        elif count > 1:
            errs.append(errors.invalid(idx, "", "may not have more than one field specified at a time"))
    return errs


def _validate_volume_mounts(mounts: list[Any], volumes: set[str], path: str) -> list[FieldError]:
    """``ValidateVolumeMounts``: each mount names a pod volume; mount paths are unique."""
    errs: list[FieldError] = []
    paths: set[str] = set()
    for i, mount in enumerate(mounts):
        mount = _dict(mount)
        idx = f"{path}[{i}]"
        name = str(mount.get("name") or "")
        if not name:
            errs.append(errors.required(f"{idx}.name"))
        if name not in volumes:
            errs.append(FieldError("FieldValueNotFound", f"{idx}.name", "", name, True))
        mount_path = str(mount.get("mountPath") or "")
        if not mount_path:
            errs.append(errors.required(f"{idx}.mountPath"))
        if mount_path in paths:
            errs.append(errors.invalid(f"{idx}.mountPath", mount_path, "must be unique"))
        paths.add(mount_path)
    return errs


# -- resources ----------------------------------------------------------------------------------

def _quantity(value: Any) -> Quantity | None:
    """A parsed quantity; malformed ones never get here (they fail decoding with a 400)."""
    try:
        return parse_quantity(str(value).strip())
    except ValueError:
        return None


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _overcommit_allowed(name: str) -> bool:
    return _is_native(name) and not name.startswith("hugepages-")


def _resource_name_errors(name: str, path: str) -> list[FieldError]:
    """``validateContainerResourceName``."""
    errs = [errors.invalid(path, name, m) for m in validate_qualified_name(name)]
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            errs.append(errors.invalid(path, name, "must be a standard resource for containers"))
    return errs


def validate_resource_requirements(resources: Mapping[str, Any], path: str) -> list[FieldError]:
    """``ValidateContainerResourceRequirements``: names, non-negative values, requests <= limits."""
    errs: list[FieldError] = []
    limits = _dict(resources.get("limits"))
    requests = _dict(resources.get("requests"))
    parsed_limits: dict[str, Quantity] = {}
    for name, value in limits.items():
        key_path = f"{path}.limits[{name}]"
        errs.extend(_resource_name_errors(name, key_path))
        q = _quantity(value)
        if q is None:
            continue
        parsed_limits[name] = q
        if q.sign() < 0:
            errs.append(errors.invalid(key_path, q.canonical(), "must be greater than or equal to 0"))
    for name, value in requests.items():
        key_path = f"{path}.requests[{name}]"
        errs.extend(_resource_name_errors(name, key_path))
        q = _quantity(value)
        if q is None:
            continue
        if q.sign() < 0:
            errs.append(errors.invalid(key_path, q.canonical(), "must be greater than or equal to 0"))
        limit = parsed_limits.get(name)
        if limit is not None:
            if q.cmp(limit) != 0 and not _overcommit_allowed(name):
                errs.append(errors.invalid(f"{path}.requests", q.canonical(),
                                           f"must be equal to {name} limit of {limit.canonical()}"))
            elif q.cmp(limit) > 0:
                errs.append(errors.invalid(f"{path}.requests", q.canonical(),
                                           f"must be less than or equal to {name} limit of {limit.canonical()}"))
        elif not _overcommit_allowed(name) and name not in limits:
            errs.append(errors.required(f"{path}.limits", "Limit must be set for non overcommitable resources"))
    return errs
