"""What controllers see of the API: served resources, watch events and one resource's client.

Every controller is written against ``ResourceClient`` alone, so it works the same whether the
resource lives in this process (``LocalClient``, straight onto the store) or behind the
delegate link (``HTTPClient``, e.g. custom resources of extensions-api).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from genericapi.apimachinery.user import UserInfo

#: A merge patch (an object) or a JSON patch (a list of operations).
Patch = dict[str, Any] | list[Any]

#: The field manager of kube-controller-manager's writes: kube derives it from the user agent
#: (``kube-controller-manager/v1.33.0 (linux/amd64) kubernetes/...``), for every controller there.
CONTROLLER_MANAGER = "kube-controller-manager"
CONTROLLER_USER_AGENT = "kube-controller-manager/v1.33.0 (linux/amd64) kubernetes/0000000"
#: kube-controller-manager's own user (its kubeconfig's certificate, kubeadm's): the shared
#: informers, leader election and the tokens controller act as it; not in system:masters, its
#: rights are the system:kube-controller-manager ClusterRole's.
CONTROLLER_USER = UserInfo("system:kube-controller-manager", ("system:authenticated",))
#: The namespace of the controllers' service accounts (``--use-service-account-credentials``).
CONTROLLER_NAMESPACE = "kube-system"


def controller_user(name: str) -> UserInfo:
    """The user a controller loop acts as: its service account in kube-system, as
    kube-controller-manager with ``--use-service-account-credentials=true`` runs it."""
    return UserInfo(f"system:serviceaccount:{CONTROLLER_NAMESPACE}:{name}",
                    ("system:serviceaccounts", f"system:serviceaccounts:{CONTROLLER_NAMESPACE}",
                     "system:authenticated"))


@dataclass(frozen=True)
class APIResource:
    """One served resource, as discovery describes it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    verbs: frozenset[str]
    subresources: frozenset[str] = frozenset()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` objects of this resource carry."""
        return self.group_version


@dataclass
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK | ERROR
    object: dict[str, Any]


class ResourceClient(Protocol):
    """The verbs of one resource. Errors are ``APIError`` (``.code`` 404/409/410/...)."""

    resource: APIResource

    async def list(self, namespace: str = "", *, label_selector: str = "", field_selector: str = "",
                   limit: int = 0, continue_token: str = "") -> tuple[list[dict[str, Any]], str, str]:
        """(items, list resourceVersion, continue token)."""
        ...

    def watch(self, resource_version: str, namespace: str = "", *,
              field_selector: str = "") -> AsyncIterator[WatchEvent]:
        """Events after ``resource_version`` (of the objects ``field_selector`` selects); raises
        APIError 410 when it is too old."""
        ...

    async def get(self, namespace: str, name: str) -> dict[str, Any]: ...

    async def create(self, namespace: str, obj: dict[str, Any]) -> dict[str, Any]: ...

    async def update(self, namespace: str, name: str, obj: dict[str, Any], *,
                     subresource: str = "") -> dict[str, Any]: ...

    async def patch(self, namespace: str, name: str, patch: Patch, *,
                    patch_type: str = "merge", subresource: str = "") -> dict[str, Any]: ...

    async def apply(self, namespace: str, name: str, config: dict[str, Any], *, field_manager: str,
                    force: bool = False, subresource: str = "") -> dict[str, Any]:
        """Server-side apply of ``config`` by ``field_manager`` (client-go's ``Apply``/``ApplyStatus``)."""
        ...

    async def delete(self, namespace: str, name: str, *, propagation_policy: str | None = None,
                     uid: str | None = None, resource_version: str | None = None,
                     grace_period_seconds: int | None = None) -> dict[str, Any] | None: ...

    async def delete_collection(self, namespace: str) -> None: ...
