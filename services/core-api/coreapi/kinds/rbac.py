"""``rbac.authorization.k8s.io/v1``: names are path segments (kube's ``ValidateRBACName``), bindings
default their subjects' apiGroup, and each pair shares a printer."""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.validation import name_is_path_segment
from genericapi.registry.strategy import NameValidator

from coreapi.defaults import groups as defaults

from . import printers_apps
from .base import BuiltinStrategy


class RoleStrategy(BuiltinStrategy):
    """Role and ClusterRole."""

    table_printer = printers_apps.ROLE_PRINTER

    def default_name_validator(self) -> NameValidator:
        return name_is_path_segment


class RoleBindingStrategy(BuiltinStrategy):
    """RoleBinding and ClusterRoleBinding."""

    table_printer = printers_apps.ROLE_BINDING_PRINTER

    def default_name_validator(self) -> NameValidator:
        return name_is_path_segment

    def set_defaults(self, obj: dict[str, Any]) -> None:
        defaults.role_binding(obj)
