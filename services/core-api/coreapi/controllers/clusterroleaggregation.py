"""The ClusterRole aggregation controller (kube-controller-manager's ``clusterrole-aggregation``).

A ClusterRole with an ``aggregationRule`` (``admin``, ``edit``, ``view``, or a user's) owns no
rules of its own: its rules are the union of the rules of every ClusterRole any of its
``clusterRoleSelectors`` matches. As kube's controller: selectors in order, the matched roles of
each sorted by name, the aggregating role itself skipped, a rule added once (exact equality);
the role is written only when the result differs from what it holds. Any ClusterRole change
re-queues every aggregating ClusterRole, so a role labelled ``aggregate-to-view`` shows up in
``view`` (and through it in ``edit`` and ``admin``) and leaves again when deleted.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.labels import LabelSelectorError, from_label_selector_object
from genericapi.controllers import ClientSet, Controller, Informer

RBAC_GROUP = "rbac.authorization.k8s.io"


def aggregated_rules(role: dict[str, Any], all_roles: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The rules ``role`` should hold (None when it does not aggregate or a selector is invalid)."""
    rule = role.get("aggregationRule")
    if not isinstance(rule, dict):
        return None
    own_name = (role.get("metadata") or {}).get("name")
    by_name = sorted(all_roles, key=lambda r: str((r.get("metadata") or {}).get("name", "")))
    out: list[dict[str, Any]] = []
    for selector_obj in rule.get("clusterRoleSelectors") or []:
        try:
            selector = from_label_selector_object(selector_obj)
        except LabelSelectorError:
            return None  # kube's controller gives up on the role (validation rejects such selectors)
        for other in by_name:
            meta = other.get("metadata") or {}
            if meta.get("name") == own_name or not selector.matches(meta.get("labels") or {}):
                continue
            for r in other.get("rules") or []:
                if r not in out:
                    out.append(r)
    return out


#: kube's ClusterRoleAggregationController applies with this field manager.
FIELD_MANAGER = "clusterrole-aggregation-controller"


class ClusterRoleAggregationController(Controller):
    name = "clusterrole-aggregation"

    def __init__(self, clients: ClientSet) -> None:
        super().__init__()
        self.client = clients.client(RBAC_GROUP, "clusterroles")
        self.roles = Informer(self.client)
        self.informers.append(self.roles)
        self.roles.add_handler(self._event)

    def _event(self, _etype: str, _obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        self._enqueue_all()

    def _enqueue_all(self) -> None:
        for role in self.roles.items():
            if role.get("aggregationRule") is not None:
                self.queue.add(str(role["metadata"]["name"]))

    async def on_synced(self) -> None:
        self._enqueue_all()

    async def reconcile(self, key: Hashable) -> None:
        role = self.roles.get("", str(key))
        if role is None:
            return
        rules = aggregated_rules(role, self.roles.items())
        if rules is None or rules == (role.get("rules") or []):
            return
        # As kube's controller: a server-side apply of the rules alone, forced, by its own manager.
        config: dict[str, Any] = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole",
                                  "metadata": {"name": str(key)}}
        if rules:
            config["rules"] = rules
        try:
            await self.client.apply("", str(key), config, field_manager=FIELD_MANAGER, force=True)
        except APIError as err:
            if err.code != 404:
                raise  # 409: a stale copy; the retry (and the role's own event) sees the new one
