"""extensions-api: CustomResourceDefinitions and the custom resources they define
(apiextensions-apiserver, the last link of the chain; what nobody serves answers 404 NotFound).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re

from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.apimachinery.serviceresolver import ServiceResolver
from genericapi.registry.namespacelifecycle import NamespaceLifecycle, namespace_view
from genericapi.registry.serviceview import ClusterServiceView
from genericapi.server.apiserver import GenericAPIServer, ServerConfig, add_common_flags, config_from_args
from genericapi.server.app import run_forever
from genericapi.server.authorization import add_authorization_mode_flag, authorizer_for

from .admission_policy import install as install_admission_policy
from .admission_webhooks import install_webhooks
from .crd_controller import CRDController
from .crds import CRD_INFO, CRDStore, CRDStrategy


def _order_key(group: str, version: str) -> tuple[int, str, str]:
    # apiextensions.k8s.io first, then CRD groups by name; versions in kube's version order.
    return (0 if group == CRD_INFO.group else 1, group, _version_rank(version))


def _version_rank(version: str) -> str:
    """Sort key putting GA before beta before alpha, higher numbers first (kube's version priority)."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if m is None:
        return "9" + version
    major, stage, minor = int(m.group(1)), m.group(2) or "", int(m.group(3) or 0)
    stage_rank = {"": 0, "beta": 1, "alpha": 2}[stage]
    return f"{stage_rank}{999 - major:03d}{999 - minor:03d}"


def build_server(config: ServerConfig,
                 authorization_mode: str = "AlwaysAllow") -> tuple[GenericAPIServer, CRDController]:
    """extensions-api's server. ``authorization_mode`` (``--authorization-mode``) is the authorizer
    admission asks on a request's behalf (CEL's ``authorizer``), as core-api's."""
    schemas = SchemaCatalog.load()
    server = GenericAPIServer(config, _order_key,
                              storage_hash=lambda info: info.extra.get("storageVersionHash", ""),
                              definitions=schemas.definitions)
    prefix = f"{config.etcd_prefix.rstrip('/')}/{CRD_INFO.group}/{CRD_INFO.plural}"
    crds = CRDStore(CRD_INFO, CRDStrategy(schemas), server.etcd, prefix, server.admission,
                    watch_cache_size=config.watch_cache_size)
    crds.gc_enabled = True  # kube's --enable-garbage-collector default: DELETE honours orphan/foreground
    server.add_store(crds)
    # Conversion webhooks named by Service are resolved from the cluster's Services (core-api's keys).
    services = ClusterServiceView(server.etcd, config.etcd_prefix)
    controller = CRDController(server, crds, schemas.definitions, ServiceResolver(services))

    namespaces = namespace_view(server.etcd, config.etcd_prefix)
    authorizer = authorizer_for(server, authorization_mode)  # RBAC's watch caches: ready waits for them
    server.admission.mutating.append(NamespaceLifecycle(namespaces))
    server.admission.validating.append(install_admission_policy(server, namespaces, authorizer))
    # the webhook plugins: last of each phase
    install_webhooks(server, namespaces, ServiceResolver(services), authorizer)

    async def start_services(_s: GenericAPIServer) -> None:
        await asyncio.gather(services.start(), namespaces.start())

    async def stop(_s: GenericAPIServer) -> None:
        await controller.stop()
        await asyncio.gather(services.stop(), namespaces.stop())

    # kube's apiextensions hooks: its informers, then the CRD informer synced with every CRD
    # served, and the controllers (naming, establishing, finalizing) following changes.
    server.add_post_start_hook(start_services, "start-apiextensions-informers")
    server.add_post_start_hook(controller.start, "start-apiextensions-controllers", "crd-informer-synced")
    server.pre_shutdown.append(stop)
    return server, controller


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="kubechain-extensions-api", description=__doc__)
    add_common_flags(parser, default_port=6445)
    add_authorization_mode_flag(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level,
                        format="%(asctime)s extensions-api %(levelname)s %(name)s: %(message)s")
    server, _controller = build_server(config_from_args("extensions-api", args),
                                      authorization_mode=args.authorization_mode)
    run_forever(server.run())
