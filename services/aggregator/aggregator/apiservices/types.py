"""The APIService resource: its description, labels, and readers for its fields.

Objects are plain dicts as served (``apiregistration.k8s.io/v1``); these helpers read them the
way kube-aggregator's typed code does (``spec.service`` null means local, port defaults to 443).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from genericapi.apimachinery.resources import ResourceInfo

GROUP = "apiregistration.k8s.io"
VERSION = "v1"
RESOURCE = "apiservices"
KIND = "APIService"
#: etcd key prefix below ``--etcd-prefix`` (``<prefix>/apiregistration.k8s.io/apiservices/<name>``).
KEY_PREFIX = f"{GROUP}/{RESOURCE}"

#: kube-aggregator's label for APIServices it manages: ``onstart`` (built-ins, registered when
#: the aggregator starts) or ``true`` (kept in sync for as long as the source exists: CRDs).
AUTOMANAGED_LABEL = "kube-aggregator.kubernetes.io/automanaged"
AUTOMANAGED_ONSTART = "onstart"
AUTOMANAGED_ALWAYS = "true"

AVAILABLE = "Available"
DEFAULT_SERVICE_PORT = 443

INFO = ResourceInfo(
    GROUP, VERSION, KIND, RESOURCE, "apiservice", namespaced=False, categories=("api-extensions",),
    subresources=("status",), extra={"storageVersionHash": "InPBPD7+PqM="},
)


def api_service_name(group: str, version: str) -> str:
    """``<version>.<group>`` (``v1.`` for the core group)."""
    return f"{version}.{group}"


def spec(obj: dict[str, Any]) -> dict[str, Any]:
    value = obj.get("spec")
    return value if isinstance(value, dict) else {}


def name_of(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


@dataclass(frozen=True)
class ServiceRef:
    """``spec.service`` of a service-backed APIService."""

    namespace: str
    name: str
    port: int

    @property
    def server_name(self) -> str:
        """The TLS server name kube-aggregator verifies the backend's certificate against."""
        return f"{self.name}.{self.namespace}.svc"


def service_ref(obj: dict[str, Any]) -> ServiceRef | None:
    """The Service an APIService is backed by; None for a local APIService."""
    svc = spec(obj).get("service")
    if not isinstance(svc, dict):
        return None
    port = svc.get("port")
    return ServiceRef(str(svc.get("namespace") or ""), str(svc.get("name") or ""),
                      port if isinstance(port, int) and not isinstance(port, bool) else DEFAULT_SERVICE_PORT)


def ca_bundle(obj: dict[str, Any]) -> bytes:
    """``spec.caBundle`` decoded (it travels base64 in JSON); empty when absent or undecodable."""
    raw = spec(obj).get("caBundle")
    if not isinstance(raw, str) or not raw:
        return b""
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return b""


def condition(obj: dict[str, Any], kind: str = AVAILABLE) -> dict[str, Any] | None:
    for cond in ((obj.get("status") or {}).get("conditions") or []):
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None


def is_available(obj: dict[str, Any]) -> bool:
    cond = condition(obj)
    return cond is not None and cond.get("status") == "True"


def priorities(obj: dict[str, Any]) -> tuple[int, int]:
    s = spec(obj)
    gp, vp = s.get("groupPriorityMinimum"), s.get("versionPriority")
    return (gp if isinstance(gp, int) else 0, vp if isinstance(vp, int) else 0)


def set_condition(obj: dict[str, Any], new: dict[str, Any]) -> None:
    """kube's ``SetAPIServiceCondition``: add the condition, or update it in place, keeping its
    lastTransitionTime unless its status changes."""
    status = obj.get("status")
    if not isinstance(status, dict):
        status = obj["status"] = {}
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = status["conditions"] = []
    for cond in conditions:
        if isinstance(cond, dict) and cond.get("type") == new.get("type"):
            if cond.get("status") != new.get("status"):
                cond["status"] = new.get("status")
                cond["lastTransitionTime"] = new.get("lastTransitionTime")
            for key in ("reason", "message"):
                if new.get(key):
                    cond[key] = new[key]
                else:
                    cond.pop(key, None)
            return
    conditions.append(dict(new))


def local_available(now: str) -> dict[str, Any]:
    """The condition a local APIService always has (kube's ``NewLocalAvailableAPIServiceCondition``)."""
    return {"type": AVAILABLE, "status": "True", "lastTransitionTime": now, "reason": "Local",
            "message": "Local APIServices are always available"}
