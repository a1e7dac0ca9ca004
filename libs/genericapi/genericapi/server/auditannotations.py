"""The response-header hook that returns a request's audit annotations to the gateway.

The gateway owns the one audit event per request (kube's WithAudit runs there); admission runs in
core-api or extensions-api. Each request a backend serves gets a fresh annotations record
(``genericapi.apimachinery.auditannotations.current``, filled by the admission chain); when it is not
empty, the response carries it as ``X-Kubechain-Audit-Annotations: {"<key>": "<value>", ...}`` (a
JSON object; an annotation only events at a higher audit level show, kube's AddAnnotationWithLevel,
is ``"<key>": ["<level>", "<value>"]``). The gateway merges it into the event and strips it, so clients never see it.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from genericapi.apimachinery import auditannotations

HEADER = "X-Kubechain-Audit-Annotations"
_HEADER = HEADER.lower().encode("latin-1")


async def recorded(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """Serve one request with its own annotations record, returned in ``HEADER``."""
    found: dict[str, str] = {}
    leveled: dict[str, tuple[str, str]] = {}
    token = auditannotations.current.set(found)
    leveled_token = auditannotations.leveled.set(leveled)

    async def send_annotations(message: Message) -> None:
        if (found or leveled) and message["type"] == "http.response.start":
            # ASCII JSON (a header is latin-1); a delegated response's own header is kept: the
            # gateway merges every one. An annotation above Metadata is ["<level>", "<value>"].
            both: dict[str, Any] = {k: [level, v] for k, (level, v) in leveled.items() if k not in found}
            both.update(found)
            headers = [*message.get("headers", ()), (_HEADER, json.dumps(both).encode("ascii"))]
            message = {**message, "headers": headers}
        await send(message)

    try:
        await app(scope, receive, send_annotations)
    finally:
        auditannotations.current.reset(token)
        auditannotations.leveled.reset(leveled_token)
