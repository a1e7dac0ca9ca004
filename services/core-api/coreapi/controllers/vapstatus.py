"""The ValidatingAdmissionPolicy status controller: ``status.typeChecking`` as kube-controller-manager writes it.

kube's ``validatingadmissionpolicy-status-controller`` type-checks a policy whenever its
generation is newer than ``status.observedGeneration`` and writes ``observedGeneration`` with the
expression warnings (``status.typeChecking.expressionWarnings``; none: ``typeChecking: {}``).
Kinds are resolved from the served resources: built-in schemas from the OpenAPI catalog, custom
resources from their CRD's ``openAPIV3Schema`` (read from extensions-api when a rule names one).
kube applies the status with server-side apply; a merge patch of ``status`` gives the same object.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.policy import typecheck
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.controllers import ClientSet, Controller, Informer

GROUP = "admissionregistration.k8s.io"


#: kube's ValidatingAdmissionPolicy status controller applies with this field manager.
FIELD_MANAGER = "validatingadmissionpolicy-status"


class PolicyStatusController(Controller):
    name = "validatingadmissionpolicy-status-controller"

    def __init__(self, clients: ClientSet, schemas: SchemaCatalog) -> None:
        super().__init__()
        self.clients = clients
        self.schemas = schemas
        self.policies = Informer(clients.client(GROUP, "validatingadmissionpolicies"))
        self.client = clients.client(GROUP, "validatingadmissionpolicies")
        self.informers.append(self.policies)
        self.policies.add_handler(self._event)

    def _event(self, etype: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if etype != "DELETED":
            self.queue.add(str((obj.get("metadata") or {}).get("name") or ""))

    async def on_synced(self) -> None:
        for obj in self.policies.items():
            self.queue.add(str(obj["metadata"]["name"]))

    async def _kinds(self, policy: dict[str, Any]) -> dict[tuple[str, str, str], tuple[str, dict[str, Any]]]:
        """The kinds the policy's rules name explicitly, with their schemas."""
        found: dict[tuple[str, str, str], tuple[str, dict[str, Any]]] = {}
        served = {(r.group, r.version, r.plural): r.kind for r in self.clients.resources()}

        def want(group: str, version: str, resource: str) -> None:
            found.setdefault((group, version, resource), ("", {}))

        typecheck.types_to_check(policy, want)  # only collects what the rules name
        for (group, version, resource) in list(found):
            kind = served.get((group, version, resource))
            schema: dict[str, Any] | None = None
            if kind is not None:
                root = self.schemas.root_schema(group, version, kind)
                if root is not None:
                    schema = typecheck.inline(self.schemas, root)
            if schema is None and group:
                schema, kind = await self._crd_schema(group, version, resource)
            if schema is None or not kind:
                del found[(group, version, resource)]
            else:
                found[(group, version, resource)] = (kind, schema)
        return found

    async def _crd_schema(self, group: str, version: str, resource: str) -> tuple[dict[str, Any] | None, str]:
        # Read as kube-controller-manager's shared informers read (its role lists everything; the
        # controller's own role has no rights on CRDs).
        crds = self.clients.shared.client("apiextensions.k8s.io", "customresourcedefinitions")
        try:
            found, _rv, _c = await crds.list(field_selector=f"metadata.name={resource}.{group}")
        except (APIError, KeyError, LookupError):
            return None, ""
        if not found:
            return None, ""
        crd = found[0]
        spec = crd.get("spec") or {}
        for v in spec.get("versions") or []:
            if isinstance(v, dict) and v.get("name") == version:
                schema = (v.get("schema") or {}).get("openAPIV3Schema")
                if isinstance(schema, dict):
                    return schema, str((spec.get("names") or {}).get("kind") or "")
        return None, ""

    async def reconcile(self, key: Hashable) -> None:
        policy = self.policies.get("", str(key))
        if policy is None:
            return
        meta = policy.get("metadata") or {}
        generation = int(meta.get("generation") or 0)
        if generation <= int((policy.get("status") or {}).get("observedGeneration") or 0):
            return
        kinds = await self._kinds(policy)
        warnings = typecheck.check(policy, lambda g, v, r: kinds.get((g, v, r)))
        # As kube's controller: ApplyStatus, forced, by "validatingadmissionpolicy-status"; no
        # warnings is an empty typeChecking (the apply configuration omits the empty list).
        type_checking: dict[str, Any] = {}
        if warnings:
            type_checking["expressionWarnings"] = [w.to_dict() for w in warnings]
        config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                  "metadata": {"name": str(key)},
                  "status": {"observedGeneration": generation, "typeChecking": type_checking}}
        try:
            await self.client.apply("", str(key), config, field_manager=FIELD_MANAGER, force=True,
                                    subresource="status")
        except APIError as err:
            if err.code != 404:
                raise
