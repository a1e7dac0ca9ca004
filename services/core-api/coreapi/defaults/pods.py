"""Defaults of Pods and pod templates (``k8s.io/kubernetes/pkg/apis/core/v1`` defaulters).

Every kind with a pod template runs :func:`default_template`: the PodSpec defaults (DNS and
restart policy, grace period, scheduler, an empty security context), the per-container defaults
(pull policy from the image tag, termination message, port protocol, probes, lifecycle
handlers, downward API field selectors) and the per-volume defaults (modes, host path type,
an empty ``emptyDir`` for a volume with no source). Pods run :func:`default_pod` on top, which
adds what kube applies to Pods only: requests copied from limits, ``enableServiceLinks`` and,
with host networking, host ports.

Go's encoding adds a few fields that never came from a client: ``resources: {}`` on a container
and ``metadata: {creationTimestamp: null}`` on an embedded object meta (kube 1.33 still writes
a zero ``metav1.Time`` as ``null``); they are added here so objects read as kube's do.
"""

from __future__ import annotations

from typing import Any

from . import volumes
from .common import default_embedded_meta, default_field_ref, default_resource_field_ref
from .fields import JSON, default_int, default_ptr, default_str, ensure_obj, is_int, items_at, obj_at
from .images import pull_policy
from .quantities import default_resource_list

CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_HANDLERS = ("postStart", "preStop")
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
TERMINATION_GRACE_PERIOD_SECONDS = 30
DEFAULT_SCHEDULER = "default-scheduler"


def default_template(template: Any) -> None:
    """A PodTemplateSpec of a workload: its metadata shape and the PodSpec defaults."""
    if not isinstance(template, dict):
        return
    default_embedded_meta(template)
    spec = obj_at(template, "spec")
    if spec is not None:
        default_pod_spec(spec)


def default_pod(pod: JSON) -> None:
    """A Pod: ``SetDefaults_Pod`` then the PodSpec defaults."""
    spec = obj_at(pod, "spec")
    if spec is None:
        return
    for key in ("containers", "initContainers"):
        for container in items_at(spec, key):
            _requests_from_limits(container)
    default_ptr(spec, "enableServiceLinks", True)
    if spec.get("hostNetwork") is True:
        for key in ("containers", "initContainers"):
            for container in items_at(spec, key):
                for port in items_at(container, "ports"):
                    hp, cp = port.get("hostPort"), port.get("containerPort")
                    if (hp is None or (is_int(hp) and hp == 0)) and is_int(cp) and cp != 0:
                        port["hostPort"] = cp
    default_pod_spec(spec)


def _requests_from_limits(container: JSON) -> None:
    resources = obj_at(container, "resources")
    limits = obj_at(resources, "limits")
    if resources is None or not limits:
        return
    requests = ensure_obj(resources, "requests")
    if requests is None:
        return
    for name, value in limits.items():
        requests.setdefault(name, value)


def default_pod_spec(spec: JSON) -> None:
    """``SetDefaults_PodSpec`` plus the generated per-field defaults below a PodSpec."""
    default_str(spec, "dnsPolicy", "ClusterFirst")
    default_str(spec, "restartPolicy", "Always")
    default_ptr(spec, "securityContext", {})
    default_ptr(spec, "terminationGracePeriodSeconds", TERMINATION_GRACE_PERIOD_SECONDS)
    default_str(spec, "schedulerName", DEFAULT_SCHEDULER)
    _service_account_alias(spec)
    for volume in items_at(spec, "volumes"):
        volumes.default_volume(volume)
    for key in CONTAINER_LISTS:
        for container in items_at(spec, key):
            default_container(container)
    default_resource_list(spec, "overhead")


def _service_account_alias(spec: JSON) -> None:
    """``serviceAccount`` is the deprecated alias of ``serviceAccountName``; v1 conversion keeps
    them equal (the new field wins when both are set)."""
    name, alias = spec.get("serviceAccountName"), spec.get("serviceAccount")
    if not isinstance(name, str | None) or not isinstance(alias, str | None):
        return
    if not name and alias:
        spec["serviceAccountName"] = name = alias
    if name:
        spec["serviceAccount"] = name
    elif "serviceAccount" in spec:
        del spec["serviceAccount"]


def default_container(container: JSON) -> None:
    """``SetDefaults_Container`` and the generated defaults of ports, env, resources, probes, hooks."""
    if container.get("imagePullPolicy") in (None, ""):
        container["imagePullPolicy"] = pull_policy(container.get("image"))
    default_str(container, "terminationMessagePath", TERMINATION_MESSAGE_PATH)
    default_str(container, "terminationMessagePolicy", "File")
    for port in items_at(container, "ports"):
        default_str(port, "protocol", "TCP")
    for env in items_at(container, "env"):
        source = obj_at(env, "valueFrom")
        default_field_ref(obj_at(source, "fieldRef"))
        default_resource_field_ref(obj_at(source, "resourceFieldRef"))
    resources = ensure_obj(container, "resources")
    default_resource_list(resources, "limits")
    default_resource_list(resources, "requests")
    for key in _PROBES:
        probe = obj_at(container, key)
        if probe is not None:
            _default_probe(probe)
    lifecycle = obj_at(container, "lifecycle")
    for key in _HANDLERS:
        _default_http_get(obj_at(obj_at(lifecycle, key), "httpGet"))


def _default_probe(probe: JSON) -> None:
    default_int(probe, "timeoutSeconds", 1)
    default_int(probe, "periodSeconds", 10)
    default_int(probe, "successThreshold", 1)
    default_int(probe, "failureThreshold", 3)
    _default_http_get(obj_at(probe, "httpGet"))
    grpc = obj_at(probe, "grpc")
    if grpc is not None:
        default_ptr(grpc, "service", "")


def _default_http_get(action: JSON | None) -> None:
    if action is not None:
        default_str(action, "path", "/")
        default_str(action, "scheme", "HTTP")
