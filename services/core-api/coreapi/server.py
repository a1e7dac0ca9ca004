"""core-api: the built-in resources (kube-apiserver's ``CreateKubeAPIServer`` link of the chain)."""

from __future__ import annotations

import argparse
import logging

from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.server.apiserver import GenericAPIServer, ServerConfig, add_common_flags, config_from_args
from genericapi.server.app import run_forever

from . import catalog
from .admission import NamespaceLifecycle
from .bootstrap import bootstrap
from .strategies import strategy_for

log = logging.getLogger(__name__)


def storage_key(info: ResourceInfo) -> str:
    """``<resource>`` for the storage version of a resource, as kube-apiserver keys built-ins.

    Resources served at several versions or groups over one storage (events, HPAs) need
    conversion between versions, which is not implemented yet: the non-storage versions are
    kept under their own ``<group>/<version>/<resource>`` keys until it is.
    """
    if catalog.storage_group_version(info) == (info.group, info.version):
        return info.plural
    return f"{info.group or 'core'}/{info.version}/{info.plural}"


def _order_key(group: str, version: str) -> tuple[int, int, str, str]:
    if not group:
        return (-1, 0, "", version)
    gp, vp = catalog.GROUP_PRIORITIES.get((group, version), (1000, 15))
    return (-gp, -vp, group, version)


def build_server(config: ServerConfig, secure_port: int = 6443) -> GenericAPIServer:
    schemas = SchemaCatalog.load()
    server = GenericAPIServer(
        config, _order_key,
        storage_hash=lambda info: info.extra.get(catalog.STORAGE_VERSION_HASH_KEY, ""),
        definitions=schemas.definitions,
    )
    for info in catalog.BUILTIN_RESOURCES:
        server.install(info, strategy_for(info, schemas), storage_key(info))
    server.admission.append(NamespaceLifecycle(server.by_resource[("", "namespaces")]))

    async def run_bootstrap(s: GenericAPIServer) -> None:
        await bootstrap({(st.info.group, st.info.plural): st for st in s.stores if st.info.version == "v1"
                         or st.info.group == ""}, secure_port=secure_port)

    server.post_start.append(run_bootstrap)
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="kubechain-core-api", description=__doc__)
    add_common_flags(parser, default_port=6444)
    parser.add_argument("--advertise-port", type=int, default=6443,
                        help="the gateway's port, used as the kubernetes Service's targetPort")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s core-api %(levelname)s %(name)s: %(message)s")
    server = build_server(config_from_args("core-api", args), secure_port=args.advertise_port)
    run_forever(server.run())
