"""core-api: the built-in resources (kube-apiserver's ``CreateKubeAPIServer`` link of the chain)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.controllers.tasks import cancel_and_wait
from genericapi.registry.codec import JsonCodec
from genericapi.server.apiserver import (
    GenericAPIServer,
    ServerConfig,
    add_common_flags,
    add_identity_flags,
    api_audiences,
    config_from_args,
)
from genericapi.server.app import run_forever
from genericapi.server.authorization import authorizer_for

from . import (
    catalog,
    connect,
    conversion,
    flowcontrol_bootstrap,
    issuerdiscovery,
    kubernetes_endpoints,
    namespaces,
    nodeless,
    reviews,
    runtimeconfig,
    services,
    tokenrequest,
    tokenreviews,
)
from .admission import NamespaceLifecycle
from .admission_policy import install as install_admission_policy
from .admission_priority import Priority
from .admission_serviceaccount import ServiceAccount
from .admission_tolerations import DefaultTolerationSeconds
from .admission_webhooks import install_webhooks
from .allocation import DEFAULT_NODE_PORT_RANGE, DEFAULT_SERVICE_CIDR, PortRange, ServiceIPRange
from .allocation.repair import DEFAULT_INTERVAL, DEFAULT_IP_GRACE, AllocationRepair
from .bootstrap import bootstrap
from .catalog_nodeless import NODELESS_KEYS
from .controllers import garbagecollector_policy
from .controllers.csrsigning import CertificateAuthority, parse_go_duration
from .controllers.manager import ControllerOptions
from .controllers.manager import install as install_controllers
from .csr import CSR_KEY
from .csr import build_store as build_csr_store
from .posthooks import HookGroup
from .rbac_bootstrap import HOOK_NAME as RBAC_HOOK_NAME
from .rbac_bootstrap import ensure_rbac_defaults
from .rbac_escalation import RBACEscalation
from .rbac_policy import RBAC_GROUP
from .strategies import strategy_for

log = logging.getLogger(__name__)


def storage_key(info: ResourceInfo) -> str:
    """``<resource>``: kube-apiserver keys built-ins by resource, whatever version serves them."""
    return info.plural


def codec_for(info: ResourceInfo) -> JsonCodec | None:
    """A converting codec for a resource served at a version other than its storage version
    (events.k8s.io/v1 Events over core v1, autoscaling/v1 HPAs over autoscaling/v2)."""
    conv = conversion.storage_conversion(info.group, info.version, info.plural)
    if conv is None:
        # Stored as served (ipaddresses and servicecidrs: kube stores v1beta1, which has the
        # same shape and is not served here).
        return None
    _group, _version, to_storage, from_storage = conv
    return JsonCodec(to_storage, from_storage)


def _order_key(group: str, version: str) -> tuple[int, int, str, str]:
    if not group:
        return (-1, 0, "", version)
    gp, vp = catalog.GROUP_PRIORITIES.get((group, version), (1000, 15))
    return (-gp, -vp, group, version)


def build_server(config: ServerConfig, secure_port: int = 6443,
                 controllers: ControllerOptions | None = None,
                 service_cidr: ServiceIPRange | None = None, node_ports: PortRange | None = None,
                 repair_interval: float = DEFAULT_INTERVAL,
                 ip_leak_grace: float = DEFAULT_IP_GRACE,
                 runtime_config: dict[str, str] | None = None,
                 token_issuer: tokenrequest.TokenIssuer | None = None,
                 authorization_mode: str = "AlwaysAllow", jwks_uri: str = "") -> GenericAPIServer:
    """core-api's server. ``runtime_config`` (``--runtime-config``, parsed) picks the served
    group-versions; a configuration kube would refuse raises ``RuntimeConfigError``."""
    enabled = runtimeconfig.enabled_versions(runtime_config or {}, available_group_versions(),
                                             OTHER_LINKS_GROUPS)
    service_cidr = service_cidr or ServiceIPRange.parse(DEFAULT_SERVICE_CIDR)
    schemas = SchemaCatalog.load()
    server = GenericAPIServer(
        config, _order_key,
        storage_hash=lambda info: info.extra.get(catalog.STORAGE_VERSION_HASH_KEY, ""),
        definitions=schemas.definitions,
    )
    prefix = config.etcd_prefix.rstrip("/")
    for info in catalog.BUILTIN_RESOURCES:
        if (info.group, info.plural) == ("", "namespaces"):
            # Two-phase delete and the finalize subresource; the kubernetes finalizer only when
            # a namespace controller runs to remove it.
            server.add_store(namespaces.build_store(info, schemas, server.etcd, f"{prefix}/{storage_key(info)}",
                                                    server.admission, config.watch_cache_size,
                                                    add_kubernetes_finalizer=controllers is not None))
            continue
        if (info.group, info.plural) in NODELESS_KEYS:
            continue  # stores of their own (nodeless.install)
        if (info.group, info.plural) == CSR_KEY:
            continue  # its own store, which asks the authorizer (below)
        server.install(info, strategy_for(info, schemas), storage_key(info), codec_for(info))
    authorizer = authorizer_for(server, authorization_mode)
    for info in catalog.BUILTIN_RESOURCES:
        if (info.group, info.plural) == CSR_KEY:  # approval, status and kube's CSR admission (csr.py)
            server.add_store(build_csr_store(info, schemas, server.etcd, f"{prefix}/{storage_key(info)}",
                                             server.admission, config.watch_cache_size, authorizer))
    nodeless.install(server, schemas, authorizer)
    if token_issuer is not None:  # kube serves TokenRequest only with a signing key
        tokenrequest.install_token_request(server.by_resource[("", "serviceaccounts")],
                                           {"pods": server.by_resource[("", "pods")],
                                            "secrets": server.by_resource[("", "secrets")]}, token_issuer)
        issuerdiscovery.install(server, token_issuer.issuer, jwks_uri, [token_issuer.key.public_key()])
    connect.install(server)  # pods/log, pods/exec, */proxy, ...
    if controllers is not None:
        garbagecollector_policy.enable(server.stores)  # a garbage collector runs: honour propagation
    service_store = server.by_resource[("", "services")]
    allocator = services.build_allocator(server.by_resource, server.etcd, prefix, service_cidr,
                                         node_ports or PortRange.parse(DEFAULT_NODE_PORT_RANGE))
    services.install_allocation(service_store, allocator)
    install_repair(server, AllocationRepair(service_store, allocator, interval=repair_interval,
                                            ip_grace=ip_leak_grace))  # its first pass before bootstrap
    server.add_store(tokenreviews.TokenReviewStore(
        tokenreviews.TOKEN_REVIEW, strategy_for(tokenreviews.TOKEN_REVIEW, schemas), server.etcd,
        f"{prefix}/tokenreviews", server.by_resource[("", "serviceaccounts")], token_issuer))
    for review in reviews.SELF_SUBJECT_REVIEWS:
        server.add_store(reviews.SelfSubjectReviewStore(review, strategy_for(review, schemas), server.etcd,
                                                        f"{config.etcd_prefix.rstrip('/')}/{review.plural}"))
    # The admission chain, in kube's AllOrderedPlugins order. RBAC escalation is kube's RBAC storage
    # check, made before admission: first. ValidatingAdmissionPolicy goes into `validating` before
    # the webhook plugin (kube's order).
    mutating = server.admission.mutating
    if authorization_mode == "RBAC":  # nobody grants what they do not hold
        mutating.append(RBACEscalation(authorizer, {
            "roles": server.by_resource[("rbac.authorization.k8s.io", "roles")],
            "clusterroles": server.by_resource[("rbac.authorization.k8s.io", "clusterroles")]}))
    mutating.append(NamespaceLifecycle(server.by_resource[("", "namespaces")]))
    mutating.append(ServiceAccount(server.by_resource[("", "serviceaccounts")]))
    mutating.append(Priority(server.by_resource[("scheduling.k8s.io", "priorityclasses")]))
    mutating.append(DefaultTolerationSeconds())
    server.admission.validating.append(install_admission_policy(server, authorizer))
    install_webhooks(server, authorizer)  # MutatingAdmissionWebhook, ValidatingAdmissionWebhook: last

    # kube runs its post-start hooks concurrently, each retried until it succeeds (posthooks): the
    # system namespaces' and the kubernetes Service's, RBAC's defaults (the namespaced Roles once
    # kube-system and kube-public exist) and APF's configuration wait for etcd together.
    namespaces_ready = asyncio.Event()
    # The gateway's APIService controllers start on core-api's ACCEPTING: their first write is their
    # Lease in kube-system, refused (namespace not found) until the bootstrap made it (issue 15).
    server.accept_gate = namespaces_ready

    async def run_bootstrap(s: GenericAPIServer) -> None:
        await bootstrap({(st.info.group, st.info.plural): st for st in s.stores if st.info.version == "v1"
                         or st.info.group == ""}, secure_port=secure_port, service_cidr=service_cidr,
                        namespaces_ready=namespaces_ready)

    # kube runs one post-start hook per task; bootstrap() does these four (the ServiceCIDR and the
    # PriorityClasses where their groups are served).
    hooks = ["start-system-namespaces-controller"]
    if ("scheduling.k8s.io", "priorityclasses") in server.by_resource:
        hooks.append("scheduling/bootstrap-system-priority-classes")
    hooks.append("bootstrap-controller")
    if ("networking.k8s.io", "servicecidrs") in server.by_resource:
        hooks.append("start-kubernetes-service-cidr-controller")
    group = HookGroup(server)
    group.add(run_bootstrap, *hooks)
    install_rbac_bootstrap(server, group, namespaces_ready)
    flowcontrol_bootstrap.install(server, group)  # APF's mandatory and suggested configuration
    kubernetes_endpoints.install(server, secure_port)  # after bootstrap: the Service's endpoints from the master leases
    if controllers is not None:
        install_controllers(server, controllers, authorizer)  # each call authorized, as its own identity
    hide_disabled(server, enabled)
    return server


#: Groups the other links of the chain serve: ``--runtime-config`` keys for them are theirs.
OTHER_LINKS_GROUPS = ("apiextensions.k8s.io", "apiregistration.k8s.io")


def available_group_versions() -> list[catalog.GroupVersion]:
    """Every group-version core-api has resources for (the catalog's and SelfSubjectReview's)."""
    extra = [(r.group, r.version) for r in (*reviews.SELF_SUBJECT_REVIEWS, tokenreviews.TOKEN_REVIEW)]
    return list(dict.fromkeys([*catalog.served_group_versions(), *extra]))


def hide_disabled(server: GenericAPIServer, enabled: set[catalog.GroupVersion]) -> None:
    """Take the stores of group-versions ``--runtime-config`` leaves off out of routes and
    discovery. They still run for core-api's own users (admission, controllers, bootstrap hold
    them), started before the post-start hooks and stopped last."""
    hidden = [st for st in server.stores if st.info.group and (st.info.group, st.info.version) not in enabled]
    for store in hidden:
        server.remove_store(store)
    if not hidden:
        return

    async def start(_s: GenericAPIServer) -> None:
        await asyncio.gather(*(st.start() for st in hidden))

    async def stop(_s: GenericAPIServer) -> None:
        await asyncio.gather(*(st.stop() for st in hidden), return_exceptions=True)

    server.post_start.insert(0, start)
    server.pre_shutdown.append(stop)


def install_rbac_bootstrap(server: GenericAPIServer, group: HookGroup | None = None,
                           namespaces_ready: asyncio.Event | None = None) -> None:
    """kube's ``rbac/bootstrap-roles`` post-start hook, with its named check: in ``group`` (run with
    the other bootstrap hooks, retried until it succeeds; the namespaced defaults wait for
    ``namespaces_ready``), else on its own."""
    # Taken now: runtime-config may hide the group from routes later, the defaults are still written.
    stores = {(st.info.group, st.info.plural): st for st in server.stores
              if st.info.group == RBAC_GROUP and st.info.version == "v1"}

    async def run(_s: GenericAPIServer) -> None:
        await ensure_rbac_defaults(stores, namespaces_ready.wait() if namespaces_ready is not None else None)

    if group is not None:
        group.add(run, RBAC_HOOK_NAME)
    else:
        server.add_post_start_hook(run, RBAC_HOOK_NAME)


def install_repair(server: GenericAPIServer, repair: AllocationRepair) -> None:
    """A first pass once the stores run, then the loop in the background (every replica runs
    it, as kube-apiserver's); cancelled first on shutdown."""
    tasks: list[asyncio.Task[None]] = []

    async def start(_s: GenericAPIServer) -> None:
        first_delay = await repair.run_once()
        tasks.append(asyncio.create_task(repair.run(first_delay), name="allocation-repair"))

    async def stop(_s: GenericAPIServer) -> None:
        while tasks:
            await cancel_and_wait(tasks.pop())

    server.add_post_start_hook(start, "start-service-ip-repair-controllers")
    server.pre_shutdown.append(stop)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="kubechain-core-api", description=__doc__)
    add_common_flags(parser, default_port=6444)
    parser.add_argument("--advertise-port", type=int, default=6443,
                        help="the gateway's port, used as the kubernetes Service's targetPort")
    parser.add_argument("--root-ca-file", default="",
                        help="the cluster CA (PEM) published as the kube-root-ca.crt ConfigMap in every namespace")
    parser.add_argument("--controllers", default=True, action=argparse.BooleanOptionalAction,
                        help="run the controllers (under leader election)")
    parser.add_argument("--service-cluster-ip-range", default=DEFAULT_SERVICE_CIDR,
                        help="CIDR the Services' ClusterIPs are allocated from (its first address goes to "
                             "default/kubernetes)")
    parser.add_argument("--service-node-port-range", default=DEFAULT_NODE_PORT_RANGE,
                        help="port range (e.g. 30000-32767) NodePort Services' node ports are allocated from")
    parser.add_argument("--allocation-repair-interval", type=float, default=DEFAULT_INTERVAL,
                        help="seconds between passes of the ClusterIP and NodePort repair loops (kube: 3 minutes)")
    parser.add_argument("--ipaddress-leak-grace-period", type=float, default=DEFAULT_IP_GRACE,
                        help="seconds an IPAddress without its Service is kept before the repair frees it")
    parser.add_argument("--runtime-config", action="append", default=[],
                        help="kube's key=value pairs enabling or disabling group-versions (api/all, api/ga, "
                             "api/beta, api/alpha, <group>/<version>); beta and alpha are off by default")
    add_identity_flags(parser)  # the access reviews ask the mode's authorizer; tokens carry the issuer
    parser.add_argument("--service-account-signing-key-file", default="",
                        help="PEM private key (EC or RSA) that signs service account tokens; without it "
                             "serviceaccounts/token is not served")
    parser.add_argument("--service-account-jwks-uri", default="",
                        help="jwks_uri of the issuer discovery document (default: https://<advertise address>"
                             "/openid/v1/jwks)")
    parser.add_argument("--cluster-signing-cert-file", default="",
                        help="PEM CA certificate that signs approved CertificateSigningRequests (kube's four signers)")
    parser.add_argument("--cluster-signing-key-file", default="", help="the private key of --cluster-signing-cert-file")
    parser.add_argument("--cluster-signing-duration", default="8760h0m0s",
                        help="the longest a signed certificate lives (Go duration)")
    parser.add_argument("--service-account-max-token-expiration", type=int, default=0,
                        help="the longest a requested token may live, in seconds (0: no cap)")
    args = parser.parse_args(argv)
    token_issuer = None
    if args.service_account_signing_key_file:
        key = serialization.load_pem_private_key(Path(args.service_account_signing_key_file).read_bytes(), None)
        if not isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
            parser.error("--service-account-signing-key-file: an EC or RSA private key is required")
        token_issuer = tokenrequest.TokenIssuer(key, args.service_account_issuer, api_audiences(args),
                                                args.service_account_max_token_expiration)
    try:
        service_cidr = ServiceIPRange.parse(args.service_cluster_ip_range)
        node_ports = PortRange.parse(args.service_node_port_range)
    except ValueError as err:
        parser.error(str(err))
    logging.basicConfig(level=args.log_level, format="%(asctime)s core-api %(levelname)s %(name)s: %(message)s")
    options = None
    if args.controllers:
        options = ControllerOptions(root_ca=Path(args.root_ca_file).read_text() if args.root_ca_file else "",
                                    service_account_key=token_issuer.key if token_issuer is not None else None)
        if args.cluster_signing_cert_file and args.cluster_signing_key_file:
            try:
                options.signing_authority = CertificateAuthority(
                    Path(args.cluster_signing_cert_file).read_bytes(), Path(args.cluster_signing_key_file).read_bytes(),
                    parse_go_duration(args.cluster_signing_duration))
            except ValueError as err:
                parser.error(f"--cluster-signing-*: {err}")
    try:
        server = build_server(config_from_args("core-api", args), secure_port=args.advertise_port,
                              controllers=options, service_cidr=service_cidr, node_ports=node_ports,
                              repair_interval=args.allocation_repair_interval,
                              ip_leak_grace=args.ipaddress_leak_grace_period,
                              runtime_config=runtimeconfig.parse(args.runtime_config),
                              token_issuer=token_issuer, authorization_mode=args.authorization_mode,
                              jwks_uri=args.service_account_jwks_uri)
    except runtimeconfig.RuntimeConfigError as err:
        print(f"Error: {err}", file=sys.stderr)  # kube-apiserver's start-up failure
        sys.exit(1)
    run_forever(server.run())
