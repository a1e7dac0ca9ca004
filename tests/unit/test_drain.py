"""While a server drains, new watches are refused with 429 and Retry-After; other requests pass."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson
from genericapi.server.apiserver import ServerConfig, _is_watch, _Lazy


def _scope(path: str, query: bytes = b"") -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": path, "query_string": query, "headers": []}


def test_what_counts_as_a_watch() -> None:
    assert _is_watch(_scope("/api/v1/watch/namespaces/x/pods"))
    assert _is_watch(_scope("/api/v1/pods", b"watch=true&resourceVersion=5"))
    assert _is_watch(_scope("/api/v1/pods", b"limit=5&watch=1"))
    assert not _is_watch(_scope("/api/v1/pods", b"watch=false"))
    assert not _is_watch(_scope("/api/v1/pods", b"fieldSelector=metadata.name%3Dwatch%3Dtrue"))


async def test_draining_refuses_new_watches_only() -> None:
    served: list[str] = []

    async def router(scope: dict[str, Any], _receive: Any, _send: Any) -> None:
        served.append(scope["path"])

    server: Any = SimpleNamespace(draining=True, router=router, config=ServerConfig("t", []))
    app = _Lazy(server)
    sent: list[dict[str, Any]] = []

    async def send(msg: dict[str, Any]) -> None:
        sent.append(msg)

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    await app(_scope("/api/v1/pods", b"watch=1"), receive, send)
    assert sent[0]["status"] == 429 and (b"retry-after", b"5") in sent[0]["headers"]
    body = orjson.loads(sent[1]["body"])
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "The apiserver is shutting down, please try again later."
    await app(_scope("/api/v1/pods"), receive, send)
    assert served == ["/api/v1/pods"]
