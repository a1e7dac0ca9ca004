"""A backend's authorizer from ``--authorization-mode``: the one place core-api and extensions-api get it.

Both links ask an authorizer on a request's behalf after the gateway authorized the request itself:
the CEL ``authorizer`` of ValidatingAdmissionPolicies and webhook matchConditions, core-api's access
reviews, CSR approval, RBAC escalation checks. kube-apiserver has one authorizer for all of them
(``--authorization-mode``); here each backend builds the same one: RBAC (``system:masters`` first,
roles and bindings from watch caches of the shared etcd, started before the server is ready) or
AlwaysAllow.
"""

from __future__ import annotations

from genericapi.apimachinery.authorization import AlwaysAllow, Authorizer
from genericapi.registry.rbacview import RBACView

from .apiserver import GenericAPIServer, add_authorization_mode_flag

__all__ = ["add_authorization_mode_flag", "authorizer_for"]


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
