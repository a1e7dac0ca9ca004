"""An in-memory RBAC object source for the authorizer's unit tests: the four lookups
``RBACAuthorizer`` makes of its watch caches, answered from plain dicts and lists a test fills in."""

from __future__ import annotations

from typing import Any


class DictSource:
    def __init__(self) -> None:
        self.cluster_roles: dict[str, Any] = {}
        self.roles: dict[tuple[str, str], Any] = {}
        self.crbs: list[Any] = []
        self.rbs: dict[str, list[Any]] = {}

    def cluster_role(self, name: str) -> Any:
        return self.cluster_roles.get(name)

    def role(self, namespace: str, name: str) -> Any:
        return self.roles.get((namespace, name))

    def cluster_role_bindings(self) -> list[Any]:
        return self.crbs

    def role_bindings(self, namespace: str) -> list[Any]:
        return self.rbs.get(namespace, [])
