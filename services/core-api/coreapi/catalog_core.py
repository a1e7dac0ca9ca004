"""The core (legacy, ``/api/v1``) resources core-api serves, as Kubernetes 1.33 describes them.

Only object-shaped resources with a stored schema are listed. Create-only endpoints
(``bindings``, ...) are not in this table (``serviceaccounts/token`` is, as a subresource with its
own kind, served by ``coreapi.tokenrequest``); ``namespaces/finalize`` is
(PUT only, served by ``coreapi.namespaces``), and so are the connect subresources of pods, nodes
and services (``catalog_connect``, served by ``coreapi.connect``).
"""

from __future__ import annotations

from genericapi.apimachinery.resources import ResourceInfo, SubresourceSpec

from coreapi.catalog_build import NAMESPACE_VERBS, builtin
from coreapi.catalog_connect import (
    NODE_CONNECT_SPECS,
    POD_CONNECT_SPECS,
    POD_CONNECT_SUBRESOURCES,
    SERVICE_CONNECT_SPECS,
)
from coreapi.catalog_nodeless import POD_SUBRESOURCE_SPECS, POD_SUBRESOURCES
from coreapi.kinds import core

_ALL = ("all",)
_STATUS = ("status",)
_SCALE_STATUS = ("scale", "status")

CORE_V1_RESOURCES: tuple[ResourceInfo, ...] = (
    builtin("", "v1", "ConfigMap", "configmaps", namespaced=True, short_names=("cm",), strategy=core.ConfigMapStrategy),
    builtin("", "v1", "Endpoints", "endpoints", namespaced=True, short_names=("ep",), strategy=core.EndpointsStrategy),
    builtin("", "v1", "Event", "events", namespaced=True, short_names=("ev",), strategy=core.EventStrategy),
    builtin("", "v1", "LimitRange", "limitranges", namespaced=True, short_names=("limits",),
            strategy=core.LimitRangeStrategy),
    builtin(
        "",
        "v1",
        "Namespace",
        "namespaces",
        namespaced=False,
        short_names=("ns",),
        verbs=NAMESPACE_VERBS,
        subresources=("finalize", "status"),
        strategy=core.NamespaceStrategy,
    ),
    builtin("", "v1", "Node", "nodes", namespaced=False, short_names=("no",), subresources=("proxy", "status"),
            subresource_specs=NODE_CONNECT_SPECS, strategy=core.NodeStrategy),
    builtin(
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        namespaced=True,
        short_names=("pvc",),
        subresources=_STATUS,
        strategy=core.PersistentVolumeClaimStrategy,
    ),
    builtin(
        "",
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        namespaced=False,
        short_names=("pv",),
        subresources=_STATUS,
        strategy=core.PersistentVolumeStrategy,
    ),
    builtin(
        "",
        "v1",
        "Pod",
        "pods",
        namespaced=True,
        short_names=("po",),
        categories=_ALL,
        subresources=tuple(sorted((*POD_SUBRESOURCES, *POD_CONNECT_SUBRESOURCES, "status"))),
        subresource_specs=(*POD_SUBRESOURCE_SPECS, *POD_CONNECT_SPECS),
        strategy=core.PodStrategy,
    ),
    builtin("", "v1", "PodTemplate", "podtemplates", namespaced=True, strategy=core.PodTemplateStrategy),
    builtin(
        "",
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        namespaced=True,
        short_names=("rc",),
        categories=_ALL,
        subresources=_SCALE_STATUS,
        strategy=core.ReplicationControllerStrategy,
    ),
    builtin(
        "",
        "v1",
        "ResourceQuota",
        "resourcequotas",
        namespaced=True,
        short_names=("quota",),
        subresources=_STATUS,
        strategy=core.ResourceQuotaStrategy,
    ),
    builtin("", "v1", "Secret", "secrets", namespaced=True, strategy=core.SecretStrategy),
    builtin("", "v1", "ServiceAccount", "serviceaccounts", namespaced=True, short_names=("sa",),
            subresources=("token",),
            subresource_specs=(SubresourceSpec("token", ("create",), group="authentication.k8s.io", version="v1",
                                               kind="TokenRequest"),), strategy=core.ServiceAccountStrategy),
    builtin(
        "",
        "v1",
        "Service",
        "services",
        namespaced=True,
        short_names=("svc",),
        categories=_ALL,
        subresources=("proxy", "status"),
        subresource_specs=SERVICE_CONNECT_SPECS,
        strategy=core.ServiceStrategy,
    ),
)
