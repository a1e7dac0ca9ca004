"""The named-group (``/apis/<group>/<version>``) resources core-api serves at Kubernetes 1.33.

Where a resource is persisted in another group-version than the one served, ``stored_as``
says so, because discovery's storage version hash is computed from the stored one:

* ``events.k8s.io/v1`` Events share storage with core ``v1`` Events (kube registers them as
  cohabiting resources): one object, visible through both APIs;
* ``autoscaling/v1`` and ``autoscaling/v2`` HorizontalPodAutoscalers are one resource stored
  as ``autoscaling/v2``, the group's preferred version;
* ``networking.k8s.io/v1`` IPAddress and ServiceCIDR went GA in 1.33. A 1.33 server keeps
  compatibility with 1.32, which knows no ``v1`` of these kinds, so kube's emulated storage
  version rule (highest-priority version introduced no later than the minimum compatibility
  version) still stores them as ``v1beta1``.
"""

from __future__ import annotations

from genericapi.apimachinery.resources import ResourceInfo

from coreapi.catalog_build import builtin
from coreapi.kinds import admission, apps, autoscaling, batch, flowcontrol, groups, networking, rbac

_ALL = ("all",)
_API_EXTENSIONS = ("api-extensions",)
_STATUS = ("status",)
_SCALE_STATUS = ("scale", "status")

_APPS = "apps"
_AUTOSCALING = "autoscaling"
_RBAC = "rbac.authorization.k8s.io"
_NETWORKING = "networking.k8s.io"
_STORAGE = "storage.k8s.io"
_ADMISSION = "admissionregistration.k8s.io"
_FLOWCONTROL = "flowcontrol.apiserver.k8s.io"

APPS_V1_RESOURCES: tuple[ResourceInfo, ...] = (
    builtin(_APPS, "v1", "ControllerRevision", "controllerrevisions", namespaced=True),
    builtin(
        _APPS,
        "v1",
        "DaemonSet",
        "daemonsets",
        namespaced=True,
        short_names=("ds",),
        categories=_ALL,
        subresources=_STATUS,
        strategy=apps.DaemonSetStrategy,
    ),
    builtin(
        _APPS,
        "v1",
        "Deployment",
        "deployments",
        namespaced=True,
        short_names=("deploy",),
        categories=_ALL,
        subresources=_SCALE_STATUS,
        strategy=apps.DeploymentStrategy,
    ),
    builtin(
        _APPS,
        "v1",
        "ReplicaSet",
        "replicasets",
        namespaced=True,
        short_names=("rs",),
        categories=_ALL,
        subresources=_SCALE_STATUS,
        strategy=apps.ReplicaSetStrategy,
    ),
    builtin(
        _APPS,
        "v1",
        "StatefulSet",
        "statefulsets",
        namespaced=True,
        short_names=("sts",),
        categories=_ALL,
        subresources=_SCALE_STATUS,
        strategy=apps.StatefulSetStrategy,
    ),
)

BATCH_V1_RESOURCES: tuple[ResourceInfo, ...] = (
    builtin(
        "batch",
        "v1",
        "CronJob",
        "cronjobs",
        namespaced=True,
        short_names=("cj",),
        categories=_ALL,
        subresources=_STATUS,
        strategy=batch.CronJobStrategy,
    ),
    builtin("batch", "v1", "Job", "jobs", namespaced=True, categories=_ALL, subresources=_STATUS,
            strategy=batch.JobStrategy),
)

AUTOSCALING_RESOURCES: tuple[ResourceInfo, ...] = tuple(
    builtin(
        _AUTOSCALING,
        version,
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        namespaced=True,
        short_names=("hpa",),
        categories=_ALL,
        subresources=_STATUS,
        stored_as=(_AUTOSCALING, "v2"),
        strategy=autoscaling.HorizontalPodAutoscalerStrategy,
    )
    for version in ("v2", "v1")
)

RBAC_V1_RESOURCES: tuple[ResourceInfo, ...] = (
    builtin(_RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False,
            strategy=rbac.RoleBindingStrategy),
    builtin(_RBAC, "v1", "ClusterRole", "clusterroles", namespaced=False, strategy=rbac.RoleStrategy),
    builtin(_RBAC, "v1", "RoleBinding", "rolebindings", namespaced=True, strategy=rbac.RoleBindingStrategy),
    builtin(_RBAC, "v1", "Role", "roles", namespaced=True, strategy=rbac.RoleStrategy),
)

SMALL_GROUP_RESOURCES: tuple[ResourceInfo, ...] = (
    builtin("coordination.k8s.io", "v1", "Lease", "leases", namespaced=True, strategy=groups.LeaseStrategy),
    builtin(
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        namespaced=True,
        short_names=("ev",),
        stored_as=("", "v1"),
        strategy=groups.EventsV1EventStrategy,
    ),
    builtin("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", namespaced=True,
            strategy=groups.EndpointSliceStrategy),
    builtin(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        namespaced=True,
        short_names=("pdb",),
        subresources=_STATUS,
        strategy=groups.PodDisruptionBudgetStrategy,
    ),
    builtin(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        namespaced=False,
        short_names=("pc",),
        strategy=groups.PriorityClassStrategy,
    ),
    builtin(
        "certificates.k8s.io",
        "v1",
        "CertificateSigningRequest",
        "certificatesigningrequests",
        namespaced=False,
        short_names=("csr",),
        subresources=("approval", "status"),
        strategy=groups.CertificateSigningRequestStrategy,
    ),
    builtin("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", namespaced=False,
            strategy=groups.RuntimeClassStrategy),
)

NETWORKING_V1_RESOURCES: tuple[ResourceInfo, ...] = (
    builtin(
        _NETWORKING,
        "v1",
        "IPAddress",
        "ipaddresses",
        namespaced=False,
        short_names=("ip",),
        stored_as=(_NETWORKING, "v1beta1"),
    ),
    builtin(_NETWORKING, "v1", "IngressClass", "ingressclasses", namespaced=False,
            strategy=networking.IngressClassStrategy),
    builtin(
        _NETWORKING,
        "v1",
        "Ingress",
        "ingresses",
        namespaced=True,
        short_names=("ing",),
        subresources=_STATUS,
        strategy=networking.IngressStrategy,
    ),
    builtin(
        _NETWORKING,
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        namespaced=True,
        short_names=("netpol",),
        strategy=networking.NetworkPolicyStrategy,
    ),
    builtin(
        _NETWORKING,
        "v1",
        "ServiceCIDR",
        "servicecidrs",
        namespaced=False,
        subresources=_STATUS,
        stored_as=(_NETWORKING, "v1beta1"),
    ),
)

STORAGE_V1_RESOURCES: tuple[ResourceInfo, ...] = (
    builtin(_STORAGE, "v1", "CSIDriver", "csidrivers", namespaced=False, strategy=groups.CSIDriverStrategy),
    builtin(_STORAGE, "v1", "CSINode", "csinodes", namespaced=False, strategy=groups.CSINodeStrategy),
    builtin(_STORAGE, "v1", "CSIStorageCapacity", "csistoragecapacities", namespaced=True,
            strategy=groups.CSIStorageCapacityStrategy),
    builtin(_STORAGE, "v1", "StorageClass", "storageclasses", namespaced=False, short_names=("sc",),
            strategy=groups.StorageClassStrategy),
    builtin(
        _STORAGE,
        "v1",
        "VolumeAttachment",
        "volumeattachments",
        namespaced=False,
        subresources=_STATUS,
        strategy=groups.VolumeAttachmentStrategy,
    ),
)

ADMISSIONREGISTRATION_V1_RESOURCES: tuple[ResourceInfo, ...] = (
    builtin(
        _ADMISSION,
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        namespaced=False,
        categories=_API_EXTENSIONS,
        strategy=admission.MutatingWebhookConfigurationStrategy,
    ),
    builtin(
        _ADMISSION,
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        namespaced=False,
        categories=_API_EXTENSIONS,
        subresources=_STATUS,
        strategy=admission.ValidatingAdmissionPolicyStrategy,
    ),
    builtin(
        _ADMISSION,
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        namespaced=False,
        categories=_API_EXTENSIONS,
        strategy=admission.ValidatingAdmissionPolicyBindingStrategy,
    ),
    builtin(
        _ADMISSION,
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        namespaced=False,
        categories=_API_EXTENSIONS,
        strategy=admission.ValidatingWebhookConfigurationStrategy,
    ),
)

FLOWCONTROL_V1_RESOURCES: tuple[ResourceInfo, ...] = (
    builtin(_FLOWCONTROL, "v1", "FlowSchema", "flowschemas", namespaced=False, subresources=_STATUS,
            strategy=flowcontrol.FlowSchemaStrategy),
    builtin(
        _FLOWCONTROL,
        "v1",
        "PriorityLevelConfiguration",
        "prioritylevelconfigurations",
        namespaced=False,
        subresources=_STATUS,
        strategy=flowcontrol.PriorityLevelConfigurationStrategy,
    ),
)

GROUP_RESOURCES: tuple[ResourceInfo, ...] = (
    *APPS_V1_RESOURCES,
    *BATCH_V1_RESOURCES,
    *AUTOSCALING_RESOURCES,
    *RBAC_V1_RESOURCES,
    *SMALL_GROUP_RESOURCES,
    *NETWORKING_V1_RESOURCES,
    *STORAGE_V1_RESOURCES,
    *ADMISSIONREGISTRATION_V1_RESOURCES,
    *FLOWCONTROL_V1_RESOURCES,
)
