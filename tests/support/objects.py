"""Object helpers the integration tests share: create-and-check, 404 checks, owner references."""

from __future__ import annotations

from typing import Any, Protocol


class JSONClient(Protocol):
    """Anything with the ``json(method, path, body)`` call (``ChainHandle``, ``CoreAPIProcess``)."""

    def json(self, method: str, path: str, body: Any = None) -> tuple[int, Any]: ...


def create(client: JSONClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST ``body`` to ``path``, assert 201 and return the created object."""
    status, out = client.json("POST", path, body)
    assert status == 201, out
    return out  # type: ignore[no-any-return]


def gone(client: JSONClient, path: str) -> bool:
    """Whether GET ``path`` is a 404."""
    return client.json("GET", path)[0] == 404


def owner_ref(obj: dict[str, Any], *, block: bool = True, controller: bool | None = True) -> dict[str, Any]:
    """An ownerReference pointing at ``obj`` (``controller=None`` leaves the field out)."""
    meta = obj["metadata"]
    ref = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"]}
    if controller is not None:
        ref["controller"] = controller
    ref["blockOwnerDeletion"] = block
    return ref


def status_of(code: int, message: str, reason: str = "", details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A failure ``metav1.Status`` as kube-apiserver writes it (keys in its order)."""
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": message}
    if reason:
        out["reason"] = reason
    if details is not None:
        out["details"] = details
    out["code"] = code
    return out
