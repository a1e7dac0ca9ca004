"""A backend's authorizer from ``--authorization-mode``: the one place core-api and extensions-api get it.

Both links ask an authorizer on a request's behalf after the gateway authorized the request itself:
the CEL ``authorizer`` of ValidatingAdmissionPolicies and webhook matchConditions, core-api's access
reviews, CSR approval, RBAC escalation checks. kube-apiserver has one authorizer for all of them
(``--authorization-mode``); here each backend builds the same one: RBAC (``system:masters`` first,
roles and bindings from watch caches of the shared etcd, started before the server is ready) or
AlwaysAllow.
"""

from __future__ import annotations

import argparse

from genericapi.apimachinery.authorization import AlwaysAllow, Authorizer
from genericapi.registry.rbacview import RBACView

from .apiserver import GenericAPIServer

#: The modes ``--authorization-mode`` accepts here (kube's names).
MODES = ("AlwaysAllow", "RBAC")


def add_authorization_mode_flag(parser: argparse.ArgumentParser) -> None:
    """``--authorization-mode`` for a link that does not take the gateway's identity flags
    (the same default and choices as ``apiserver.add_identity_flags``)."""
    parser.add_argument("--authorization-mode", default="AlwaysAllow", choices=MODES,
                        help="who may do what: everyone everything (kube-apiserver's own default), or RBAC "
                             "(system:masters may do anything)")


def authorizer_for(server: GenericAPIServer, mode: str) -> Authorizer:
    """RBAC (system:masters first, roles from watch caches started before the server is ready:
    readiness waits for them) or AlwaysAllow."""
    if mode != "RBAC":
        return AlwaysAllow()
    view = RBACView(server.etcd, server.config.etcd_prefix)

    async def start(_s: GenericAPIServer) -> None:
        await view.start()

    async def stop(_s: GenericAPIServer) -> None:
        await view.stop()

    server.post_start.insert(0, start)
    server.pre_shutdown.append(stop)
    return view.authorizer()
