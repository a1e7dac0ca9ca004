"""core-api: the built-in resources (kube-apiserver's ``CreateKubeAPIServer`` link of the chain)."""

from __future__ import annotations

import argparse
import logging

from genericapi.apimachinery.resources import ResourceInfo
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.registry.codec import JsonCodec
from genericapi.server.apiserver import GenericAPIServer, ServerConfig, add_common_flags, config_from_args
from genericapi.server.app import run_forever

from . import catalog, conversion, reviews
from .admission import NamespaceLifecycle
from .bootstrap import bootstrap
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


def build_server(config: ServerConfig, secure_port: int = 6443) -> GenericAPIServer:
    schemas = SchemaCatalog.load()
    server = GenericAPIServer(
        config, _order_key,
        storage_hash=lambda info: info.extra.get(catalog.STORAGE_VERSION_HASH_KEY, ""),
        definitions=schemas.definitions,
    )
    for info in catalog.BUILTIN_RESOURCES:
        server.install(info, strategy_for(info, schemas), storage_key(info), codec_for(info))
    review = reviews.SELF_SUBJECT_REVIEW
    server.add_store(reviews.SelfSubjectReviewStore(review, strategy_for(review, schemas), server.etcd,
                                                    f"{config.etcd_prefix.rstrip('/')}/{review.plural}"))
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
