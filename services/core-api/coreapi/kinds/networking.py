"""``networking.k8s.io/v1``: Ingresses and NetworkPolicies track generation; their defaults and
IngressClass's, and the Ingress printer."""

from __future__ import annotations

from typing import Any

from coreapi.defaults import groups as defaults

from . import printers_apps
from .base import BuiltinStrategy


class IngressStrategy(BuiltinStrategy):
    tracks_generation = True
    table_printer = printers_apps.INGRESS_PRINTER

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.ingress(obj)


class IngressClassStrategy(BuiltinStrategy):
    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.ingress_class(obj)


class NetworkPolicyStrategy(BuiltinStrategy):
    tracks_generation = True

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.network_policy(obj)
