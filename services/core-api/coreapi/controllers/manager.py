"""core-api's controller manager: which controllers run, on which clients, under which lease.

Built in a post-start hook (the stores are started by then) and stopped first on shutdown, so
the lease is released while etcd is still reachable and another replica takes over at once.
Only the replica holding the ``kube-system/kube-controller-manager`` Lease runs controllers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from genericapi.apimachinery import serviceaccount as satoken
from genericapi.apimachinery.authorization import Authorizer
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.controllers import ClientSet, Controller, ControllerManager
from genericapi.server.apiserver import GenericAPIServer, client_ssl_context

from .clusterroleaggregation import ClusterRoleAggregationController
from .csrsigning import CertificateAuthority, CSRSigningController
from .garbagecollector import GarbageCollector
from .namespace import NamespaceController
from .podgc import PodGarbageCollector
from .rootca import RootCAPublisher
from .serviceaccounts import ServiceAccountsController
from .tokencleaner import TokenCleaner
from .tokens import TokensController
from .vapstatus import PolicyStatusController

log = logging.getLogger(__name__)

LEASE_NAME = "kube-controller-manager"


@dataclass
class ControllerOptions:
    #: PEM of the cluster CA published as kube-root-ca.crt ("" leaves the publisher off).
    root_ca: str = ""
    #: Signs the legacy tokens of service-account-token Secrets (None leaves the tokens controller off).
    service_account_key: satoken.PrivateKey | None = None
    #: ``--cluster-signing-cert-file``/``-key-file``: signs approved CSRs (None leaves csrsigning off).
    signing_authority: CertificateAuthority | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def build_controllers(clients: ClientSet, options: ControllerOptions) -> list[tuple[Controller, int]]:
    """Every controller core-api runs, with its number of workers, each acting as the service
    account kube-controller-manager gives it (``ClientOrDie("<name>")`` in kube's starters); the
    tokens controller acts as kube-controller-manager itself, as kube's does."""
    sa = clients.for_controller
    out: list[tuple[Controller, int]] = [(ServiceAccountsController(sa("service-account-controller")), 2)]
    out += [(NamespaceController(sa("namespace-controller")), 2),
            (GarbageCollector(sa("generic-garbage-collector")), 4)]
    if any((r.group, r.plural) == ("", "secrets") for r in clients.resources()):
        # on as kubeadm enables it (kube's own default: off)
        out.append((TokenCleaner(sa("token-cleaner")), 1))
    if any((r.group, r.plural) == ("", "pods") for r in clients.resources()):
        out.append((PodGarbageCollector(sa("pod-garbage-collector")), 1))
    if any((r.group, r.plural) == ("rbac.authorization.k8s.io", "clusterroles") for r in clients.resources()):
        out.append((ClusterRoleAggregationController(sa("clusterrole-aggregation-controller")), 1))
    if any((r.group, r.plural) == ("admissionregistration.k8s.io", "validatingadmissionpolicies")
           for r in clients.resources()):
        out.append((PolicyStatusController(sa("validatingadmissionpolicy-status-controller"),
                                           SchemaCatalog.load()), 1))
    if options.root_ca:
        out.append((RootCAPublisher(sa("root-ca-cert-publisher"), options.root_ca), 2))
    if options.signing_authority is not None and any(
            (r.group, r.plural) == ("certificates.k8s.io", "certificatesigningrequests") for r in clients.resources()):
        out.append((CSRSigningController(sa("certificate-controller"), options.signing_authority), 1))
    if options.service_account_key is not None:
        out.append((TokensController(clients, options.service_account_key, options.root_ca), 1))
    return out


def clientset_for(server: GenericAPIServer, authorizer: Authorizer | None = None) -> ClientSet:
    """This server's stores directly, plus what its delegate link serves (over HTTP), every call
    asked of ``authorizer`` first (None: none asked)."""
    config = server.config
    ctx = None
    if any(u.startswith("https") for u in config.delegate_urls):
        ctx = client_ssl_context(config.client_ca_file, config.proxy_client_cert_file, config.proxy_client_key_file)
    return ClientSet(server.stores, config.delegate_urls, ssl_context=ctx, authorizer=authorizer)


def install(server: GenericAPIServer, options: ControllerOptions, authorizer: Authorizer | None = None) -> None:
    """Start the manager after the stores (post-start hook); stop it first on shutdown. With an
    authorizer (core-api's: RBAC or AlwaysAllow) every controller call is authorized."""
    state: dict[str, object] = {}

    async def start(s: GenericAPIServer) -> None:
        clients = clientset_for(s, authorizer)
        await clients.start()
        manager = ControllerManager(clients.client("coordination.k8s.io", "leases"), LEASE_NAME,
                                    lease_duration=options.lease_duration, renew_deadline=options.renew_deadline,
                                    retry_period=options.retry_period)
        for controller, workers in build_controllers(clients, options):
            manager.add(controller, workers)
        await manager.start()
        state.update(manager=manager, clients=clients)
        log.info("controller manager %s started (%d controllers)", manager.identity, len(manager.controllers))

    async def stop(_s: GenericAPIServer) -> None:
        manager, clients = state.pop("manager", None), state.pop("clients", None)
        if isinstance(manager, ControllerManager):
            await manager.stop()
        if isinstance(clients, ClientSet):
            await clients.close()

    server.post_start.append(start)
    # First: the lease is released through the authorizer, whose own pre-shutdown hook (registered
    # earlier, with the authorizer) stops its RBAC informers and would deny the release.
    server.pre_shutdown.insert(0, stop)
