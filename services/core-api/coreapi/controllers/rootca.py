"""The root CA publisher: a ``kube-root-ca.crt`` ConfigMap (key ``ca.crt``) in every namespace.

As kube-controller-manager's root-ca-cert-publisher: pods verify the API server with this
bundle. A namespace that appears or changes (while active) is checked, and so is the namespace
of a ``kube-root-ca.crt`` that is changed or deleted: a missing one is created, one whose data
or description annotation differs from the cluster CA is put back.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable
from typing import Any

from genericapi.apimachinery.errors import APIError
from genericapi.controllers import ClientSet, Informer
from genericapi.controllers.namespaces import PerNamespaceController, namespace_active, namespace_terminating

CONFIGMAP_NAME = "kube-root-ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
#: kube-controller-manager's wording, so clients that read it see the same.
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
               "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
               "distributions of Kubernetes clusters.")


class RootCAPublisher(PerNamespaceController):
    name = "root-ca-cert-publisher"

    def __init__(self, clients: ClientSet, root_ca: str) -> None:
        if not root_ca.strip():
            raise ValueError("the root CA bundle is empty")
        super().__init__(clients)
        self.root_ca = root_ca
        # Only kube-root-ca.crt of each namespace: the watch cache selects it by key (no decode), and
        # inside core-api no copy of every other ConfigMap is kept (kube's publisher filters in its
        # handler; its informer lives in another process).
        self.configmaps = Informer(clients.client("", "configmaps"), field_selector=f"metadata.name={CONFIGMAP_NAME}")
        self.cm_client = clients.client("", "configmaps")
        self.informers.append(self.configmaps)
        self.namespaces.add_handler(self._namespace_event)
        self.configmaps.add_handler(self._configmap_event)

    def _namespace_event(self, etype: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if etype == "ADDED" or (etype == "MODIFIED" and namespace_active(obj)):
            self.queue.add(obj["metadata"]["name"])

    def _configmap_event(self, etype: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("name") == CONFIGMAP_NAME:  # created, changed or deleted: check it
            self.queue.add(meta.get("namespace") or "")

    async def reconcile(self, key: Hashable) -> None:
        namespace = self.active_namespace(key)
        if namespace is None:
            return
        data = {"ca.crt": self.root_ca}
        current = self.configmaps.get(namespace, CONFIGMAP_NAME)
        if current is None:
            body = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": CONFIGMAP_NAME, "namespace": namespace,
                                 "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                    "data": data}
            try:
                await self.cm_client.create(namespace, body)
            except APIError as err:
                if err.code == 404 or namespace_terminating(err):
                    return  # the namespace is gone or ending: do not retry
                raise  # 409 included: the cache is behind; the retry sees the object and checks it
            return
        annotations = (current.get("metadata") or {}).get("annotations") or {}
        if current.get("data") == data and annotations.get(DESCRIPTION_ANNOTATION):
            return
        fixed = copy.deepcopy(current)  # cached objects are shared: change a copy
        fixed["data"] = data
        fixed["metadata"].setdefault("annotations", {})
        fixed["metadata"]["annotations"] = {**(fixed["metadata"]["annotations"] or {}),
                                            DESCRIPTION_ANNOTATION: DESCRIPTION}
        await self.cm_client.update(namespace, CONFIGMAP_NAME, fixed)  # 409 on a stale copy: retried

