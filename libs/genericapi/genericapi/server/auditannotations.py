"""The response-header hook that returns a request's audit annotations to the gateway.

The gateway owns the one audit event per request (kube's WithAudit runs there); admission runs in
core-api or extensions-api. Each request a backend serves gets a fresh annotations record
(``genericapi.apimachinery.auditannotations.current``, filled by the admission chain); when it is not
empty, the response carries it as ``X-Kubechain-Audit-Annotations: {"<key>": "<value>", ...}`` (a
JSON object). The gateway merges it into the event and strips it, so clients never see it.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from genericapi.apimachinery import auditannotations

HEADER = "X-Kubechain-Audit-Annotations"
_HEADER = HEADER.lower().encode("latin-1")


async def recorded(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """Serve one request with its own annotations record, returned in ``HEADER``."""
    found: dict[str, str] = {}
    token = auditannotations.current.set(found)

    async def send_annotations(message: Message) -> None:
        if found and message["type"] == "http.response.start":
            # ASCII JSON (a header is latin-1); a delegated response's own header is kept: the
            # gateway merges every one.
            headers = [*message.get("headers", ()), (_HEADER, json.dumps(found).encode("ascii"))]
            message = {**message, "headers": headers}
        await send(message)

    try:
        await app(scope, receive, send_annotations)
    finally:
        auditannotations.current.reset(token)
