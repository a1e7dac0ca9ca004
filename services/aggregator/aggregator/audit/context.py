"""Where a request's audit record lives in the ASGI scope, so other filters can add to it.

kube's filters add audit annotations through the request context (``audit.AddAuditAnnotation``):
authorization records its decision and reason this way. This module is only that hand-off (scope
keys and ``add_annotation``), kept apart from the audit filter so that filters.py can import it
without importing the filter that imports filters.py.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

#: The request's Audit-ID (kube's WithAuditInit: the client's ``Audit-ID`` header, else a new UUID).
AUDIT_ID = "kubechain.audit_id"
#: When the request was received (time.time()).
RECEIVED = "kubechain.audit_received"
#: The request's event.Event, while one is being recorded (absent at level None).
EVENT = "kubechain.audit_event"

#: kube's authorization annotations (k8s.io/apiserver/pkg/endpoints/filters/authorization.go).
DECISION_ANNOTATION = "authorization.k8s.io/decision"
REASON_ANNOTATION = "authorization.k8s.io/reason"
DECISION_ALLOW, DECISION_FORBID = "allow", "forbid"


def add_annotation(scope: MutableMapping[str, Any], key: str, value: str) -> None:
    """kube's AddAuditAnnotation: the first value for a key wins; nothing when not audited."""
    event = scope.get(EVENT)
    if event is not None:
        event.annotations.setdefault(key, value)


def add_authorization(scope: MutableMapping[str, Any], allowed: bool, reason: str) -> None:
    """The decision and reason annotations kube's WithAuthorization adds."""
    event = scope.get(EVENT)
    if event is not None:
        event.annotations.setdefault(DECISION_ANNOTATION, DECISION_ALLOW if allowed else DECISION_FORBID)
        event.annotations.setdefault(REASON_ANNOTATION, reason)
