"""Defaults of volume sources, persistent volume sources and claim specs (core/v1 defaulters).

Shared by Pods and pod templates (``spec.volumes``), PersistentVolumes, PersistentVolumeClaims,
StatefulSet claim templates and generic ephemeral volumes.
"""

from __future__ import annotations

from typing import Any

from .common import default_embedded_meta, default_field_ref, default_resource_field_ref
from .fields import JSON, default_ptr, default_str, ensure_obj, items_at, obj_at
from .quantities import canonical, default_resource_list

#: 0644, the mode kube gives files of secret, configMap, downwardAPI and projected volumes
DEFAULT_FILE_MODE = 420
#: a projected service account token lives an hour unless told otherwise
TOKEN_EXPIRATION_SECONDS = 3600

#: every member of the VolumeSource union (a volume with none of them gets an emptyDir)
VOLUME_SOURCES = frozenset({
    "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs",
    "iscsi", "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs", "flocker",
    "downwardAPI", "fc", "azureFile", "configMap", "vsphereVolume", "quobyte", "azureDisk",
    "photonPersistentDisk", "projected", "portworxVolume", "scaleIO", "storageos", "csi", "ephemeral", "image",
})


def default_volume(volume: JSON) -> None:
    """One entry of ``spec.volumes``."""
    if all(volume.get(key) is None for key in VOLUME_SOURCES):
        volume["emptyDir"] = {}
    _default_sources(volume)
    for key in ("secret", "configMap"):
        source = obj_at(volume, key)
        if source is not None:
            default_ptr(source, "defaultMode", DEFAULT_FILE_MODE)
    downward = obj_at(volume, "downwardAPI")
    if downward is not None:
        default_ptr(downward, "defaultMode", DEFAULT_FILE_MODE)
        _default_downward_items(downward)
    projected = obj_at(volume, "projected")
    if projected is not None:
        default_ptr(projected, "defaultMode", DEFAULT_FILE_MODE)
        for source in items_at(projected, "sources"):
            _default_downward_items(obj_at(source, "downwardAPI"))
            token = obj_at(source, "serviceAccountToken")
            if token is not None:
                default_ptr(token, "expirationSeconds", TOKEN_EXPIRATION_SECONDS)
    empty_dir = obj_at(volume, "emptyDir")
    if empty_dir is not None and empty_dir.get("sizeLimit") is not None:
        empty_dir["sizeLimit"] = canonical(empty_dir["sizeLimit"])
    claim = obj_at(obj_at(volume, "ephemeral"), "volumeClaimTemplate")
    if claim is not None:
        default_embedded_meta(claim)
        spec = obj_at(claim, "spec")
        if spec is not None:
            default_claim_spec(spec)


def _default_downward_items(downward: JSON | None) -> None:
    for item in items_at(downward, "items"):
        default_field_ref(obj_at(item, "fieldRef"))
        default_resource_field_ref(obj_at(item, "resourceFieldRef"))


def default_persistent_volume_source(spec: JSON) -> None:
    """The sources a PersistentVolumeSpec shares with pod volumes."""
    _default_sources(spec)


def _default_sources(holder: JSON) -> None:
    """Sources whose defaults are the same in a pod volume and a persistent volume."""
    host_path = obj_at(holder, "hostPath")
    if host_path is not None:
        default_ptr(host_path, "type", "")
    iscsi = obj_at(holder, "iscsi")
    if iscsi is not None:
        default_str(iscsi, "iscsiInterface", "default")
    rbd = obj_at(holder, "rbd")
    if rbd is not None:
        default_str(rbd, "pool", "rbd")
        default_str(rbd, "user", "admin")
        default_str(rbd, "keyring", "/etc/ceph/keyring")
    azure = obj_at(holder, "azureDisk")
    if azure is not None:
        default_ptr(azure, "cachingMode", "ReadWrite")
        default_ptr(azure, "fsType", "ext4")
        default_ptr(azure, "readOnly", False)
        default_ptr(azure, "kind", "Shared")
    scale_io = obj_at(holder, "scaleIO")
    if scale_io is not None:
        default_str(scale_io, "storageMode", "ThinProvisioned")
        default_str(scale_io, "fsType", "xfs")


def default_claim_spec(spec: JSON) -> None:
    """``SetDefaults_PersistentVolumeClaimSpec`` and its resource lists (``resources`` is a
    non-pointer struct in Go, so it is always written)."""
    default_ptr(spec, "volumeMode", "Filesystem")
    resources = ensure_obj(spec, "resources")
    default_resource_list(resources, "limits")
    default_resource_list(resources, "requests")


def default_claim(claim: Any) -> None:
    """A whole PersistentVolumeClaim (also a StatefulSet claim template): phase Pending, spec defaults."""
    if not isinstance(claim, dict):
        return
    spec = obj_at(claim, "spec")
    if spec is not None:
        default_claim_spec(spec)
    status = ensure_obj(claim, "status")
    if status is not None:
        default_str(status, "phase", "Pending")
        default_resource_list(status, "capacity")
        default_resource_list(status, "allocatedResources")
