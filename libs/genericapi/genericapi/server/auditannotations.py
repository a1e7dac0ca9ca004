"""The response-header hook that returns a request's audit annotations to the gateway.

The gateway owns the one audit event per request (kube's WithAudit runs there); admission runs in
core-api or extensions-api. Each request a backend serves gets a fresh annotations record
(``genericapi.apimachinery.auditannotations.current``, filled by the admission chain); when it is not
empty, the response carries it as ``X-Kubechain-Audit-Annotations: {"<key>": "<value>", ...}`` (a
JSON object; an annotation only events at a higher audit level show, kube's AddAnnotationWithLevel,
is ``"<key>": ["<level>", "<value>"]``). The gateway merges it into the event and strips it, so clients never see it.

Every request a backend serves passes here, so the record is one slotted object that is also the
wrapped ``send`` (no closure and cells per request), and a message goes straight on while nothing
was recorded.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from genericapi.apimachinery import auditannotations

HEADER = "X-Kubechain-Audit-Annotations"
_HEADER = HEADER.lower().encode("latin-1")


class _AnnotatingSend:
    """One request's annotations (plain and leveled) and the ``send`` that adds them to its response."""

    __slots__ = ("found", "leveled", "send")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.found: dict[str, str] = {}
        self.leveled: dict[str, tuple[str, str]] = {}

    async def __call__(self, message: Message) -> None:
        if (self.found or self.leveled) and message["type"] == "http.response.start":
            message = self._annotated(message)
        await self.send(message)

    def _annotated(self, message: Message) -> Message:
        # ASCII JSON (a header is latin-1); a delegated response's own header is kept: the
        # gateway merges every one. An annotation above Metadata is ["<level>", "<value>"].
        found = self.found
        both: dict[str, Any] = {k: [level, v] for k, (level, v) in self.leveled.items() if k not in found}
        both.update(found)
        headers = [*message.get("headers", ()), (_HEADER, json.dumps(both).encode("ascii"))]
        return {**message, "headers": headers}


async def recorded(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """Serve one request with its own annotations record, returned in ``HEADER``."""
    record = _AnnotatingSend(send)
    token = auditannotations.current.set(record.found)
    leveled_token = auditannotations.leveled.set(record.leveled)
    try:
        await app(scope, receive, record)
    finally:
        auditannotations.current.reset(token)
        auditannotations.leveled.reset(leveled_token)
