"""Wiring of the resources a node-less cluster still serves (issue 16): one call from the server.

The rows are in ``catalog_nodeless``; this installs their stores on the server (the review
kinds and ``componentstatuses``/``bindings`` as stores of their own, ``pods/binding`` and
``pods/eviction`` as creators on the Pod store) once the generic stores exist.
"""

from __future__ import annotations

from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.server.apiserver import GenericAPIServer

from . import accessreviews, catalog_nodeless, componentstatuses
from .authorizer import AlwaysAllow, Authorizer
from .binding import BindingStore, install_pod_binding
from .eviction import install_pod_eviction
from .strategies import strategy_for


def install(server: GenericAPIServer, schemas: SchemaCatalog, authorizer: Authorizer | None = None) -> None:
    """Add the node-less resources' stores; call after the Pod and PodDisruptionBudget stores."""
    authorizer = authorizer or AlwaysAllow()
    prefix = server.config.etcd_prefix.rstrip("/")
    etcd = server.etcd

    def key(info: ResourceInfo) -> str:
        return f"{prefix}/{info.plural}"

    pods = server.by_resource[("", "pods")]
    pdbs = server.by_resource[("policy", "poddisruptionbudgets")]
    install_pod_binding(pods)
    install_pod_eviction(pods, pdbs)

    cs = catalog_nodeless.COMPONENT_STATUSES
    server.add_store(componentstatuses.ComponentStatusStore(
        cs, componentstatuses.ComponentStatusStrategy(cs, schemas), etcd, key(cs)))
    bindings = catalog_nodeless.BINDINGS
    server.add_store(BindingStore(bindings, strategy_for(bindings, schemas), etcd, key(bindings), pods))
    for info in catalog_nodeless.AUTHORIZATION_V1_RESOURCES:
        store_class, validate = accessreviews.REVIEW_STORES[info.plural]
        server.add_store(store_class(info, strategy_for(info, schemas), etcd, key(info), authorizer, validate))
