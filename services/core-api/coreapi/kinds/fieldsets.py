"""Field selectors of the built-in kinds (``FieldSupport`` their strategy classes name): the labels
kube-apiserver's per-kind ``AddFieldLabelConversionFunc``s accept, the label they are renamed to,
the exact rejection message, and the values each registry's ``GetAttrs``/``ToSelectableFields``
gives an object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from genericapi.apimachinery.fields import (
    FieldSupport,
    default_reject,
    get_path,
    go_bool,
    go_int,
    identity,
    not_supported,
    text_at,
)


def _pod_values(pod: Mapping[str, Any]) -> dict[str, str]:
    pod_ips = get_path(pod, "status", "podIPs")
    pod_ip = ""
    if isinstance(pod_ips, list) and pod_ips and isinstance(pod_ips[0], Mapping):
        pod_ip = str(pod_ips[0].get("ip") or "")
    return {
        "spec.nodeName": text_at(pod, "spec", "nodeName"),
        "spec.restartPolicy": text_at(pod, "spec", "restartPolicy"),
        "spec.schedulerName": text_at(pod, "spec", "schedulerName"),
        "spec.serviceAccountName": text_at(pod, "spec", "serviceAccountName"),
        "spec.hostNetwork": go_bool(get_path(pod, "spec", "hostNetwork")),
        "status.phase": text_at(pod, "status", "phase"),
        "status.podIP": pod_ip,
        "status.nominatedNodeName": text_at(pod, "status", "nominatedNodeName"),
    }


def _core_event_values(event: Mapping[str, Any]) -> dict[str, str]:
    source = text_at(event, "source", "component") or text_at(event, "reportingComponent")
    values = {f"involvedObject.{k}": text_at(event, "involvedObject", k)
              for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")}
    values.update(reason=text_at(event, "reason"), reportingComponent=text_at(event, "reportingComponent"),
                  source=source, type=text_at(event, "type"))
    return values


def _events_k8s_io_values(event: Mapping[str, Any]) -> dict[str, str]:
    source = text_at(event, "deprecatedSource", "component") or text_at(event, "reportingController")
    values = {f"involvedObject.{k}": text_at(event, "regarding", k)
              for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")}
    values.update(reason=text_at(event, "reason"), reportingComponent=text_at(event, "reportingController"),
                  source=source, type=text_at(event, "type"))
    return values


_EVENT_LABELS = ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                 "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                 "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
                 "metadata.namespace", "metadata.name")

_EVENTS_K8S_IO_LABELS = {
    "reason": "reason",
    "regarding.kind": "involvedObject.kind",
    "regarding.namespace": "involvedObject.namespace",
    "regarding.name": "involvedObject.name",
    "regarding.uid": "involvedObject.uid",
    "regarding.apiVersion": "involvedObject.apiVersion",
    "regarding.resourceVersion": "involvedObject.resourceVersion",
    "regarding.fieldPath": "involvedObject.fieldPath",
    "reportingController": "reportingComponent",
    "source": "source",
    "type": "type",
    "metadata.namespace": "metadata.namespace",
    "metadata.name": "metadata.name",
}

_pod_labels = identity("metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
                        "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork",
                        "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName")
_pod_labels["spec.host"] = "spec.nodeName"  # legacy v1 clients

POD_FIELDS = FieldSupport(_pod_labels, not_supported, _pod_values)
NODE_FIELDS = FieldSupport(
    identity("metadata.name", "spec.unschedulable"), not_supported,
    lambda o: {"spec.unschedulable": go_bool(get_path(o, "spec", "unschedulable"))}, namespaced=False)
REPLICATION_CONTROLLER_FIELDS = FieldSupport(
    identity("metadata.name", "metadata.namespace", "status.replicas"), not_supported,
    lambda o: {"status.replicas": go_int(get_path(o, "status", "replicas"))})
EVENT_FIELDS = FieldSupport(identity(*_EVENT_LABELS), not_supported, _core_event_values)
EVENTS_K8S_IO_EVENT_FIELDS = FieldSupport(_EVENTS_K8S_IO_LABELS, not_supported, _events_k8s_io_values)
NAMESPACE_FIELDS = FieldSupport(
    identity("status.phase", "metadata.name"), not_supported,
    lambda o: {"status.phase": text_at(o, "status", "phase")}, namespaced=False)
SECRET_FIELDS = FieldSupport(
    identity("type", "metadata.namespace", "metadata.name"), not_supported,
    lambda o: {"type": text_at(o, "type")})
SERVICE_FIELDS = FieldSupport(
    identity("metadata.namespace", "metadata.name", "spec.clusterIP", "spec.type"), not_supported,
    lambda o: {"spec.clusterIP": text_at(o, "spec", "clusterIP"), "spec.type": text_at(o, "spec", "type")})
JOB_FIELDS = FieldSupport(
    identity("metadata.name", "metadata.namespace", "status.successful"),
    lambda label: f'field label "{label}" not supported for Job',
    lambda o: {"status.successful": go_int(get_path(o, "status", "succeeded"))})
CSR_FIELDS = FieldSupport(
    identity("metadata.name", "spec.signerName"), not_supported,
    lambda o: {"spec.signerName": text_at(o, "spec", "signerName")}, namespaced=False)
#: apps/v1 registers no conversion func, so only the metadata fields pass the handler's
#: conversion step; the registry still exposes status.replicas.
REPLICA_SET_FIELDS = FieldSupport(
    identity("metadata.name", "metadata.namespace"), default_reject,
    lambda o: {"status.replicas": go_int(get_path(o, "status", "replicas"))})
