"""The backends' audit-annotations hook (genericapi.server.auditannotations.recorded): each request gets
its own records, filled through the context variables the admission chain writes; the response start
carries them as ``X-Kubechain-Audit-Annotations`` (leveled ones as ``[level, value]``, a plain one
winning over a leveled one of the same key, a delegated response's own header kept), nothing is added
when nothing was recorded, body messages pass untouched, and the context variables are restored."""

from __future__ import annotations

import asyncio
import json

from genericapi.apimachinery import auditannotations
from genericapi.server.auditannotations import HEADER, recorded
from starlette.types import Message, Receive, Scope, Send

_HEADER = HEADER.lower().encode()


def _app(plain: dict[str, str], leveled: dict[str, tuple[str, str]],
         headers: list[tuple[bytes, bytes]] | None = None) -> object:
    async def app(_scope: Scope, _receive: Receive, send: Send) -> None:
        auditannotations.add_all(plain)
        auditannotations.add_all_leveled(leveled)
        auditannotations.add("first", "wins")
        auditannotations.add("first", "loses")
        await send({"type": "http.response.start", "status": 201, "headers": list(headers or [])})
        await send({"type": "http.response.body", "body": b"{}", "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    return app


async def _serve(app: object) -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    await recorded(app, {"type": "http"}, receive, send)  # type: ignore[arg-type]
    return sent


def test_annotations_returned_in_the_header() -> None:
    sent = asyncio.run(_serve(_app({"pod-security.kubernetes.io/enforce-policy": "privileged:latest"},
                                   {"mutation.webhook.admission.k8s.io/round_0_index_0": ("Request", "{}"),
                                    "first": ("Request", "shadowed")},
                                   [(b"content-type", b"application/json")])))
    start = sent[0]
    assert start["status"] == 201
    assert start["headers"][0] == (b"content-type", b"application/json")
    name, value = start["headers"][-1]
    assert name == _HEADER
    assert json.loads(value) == {"pod-security.kubernetes.io/enforce-policy": "privileged:latest",
                                 "mutation.webhook.admission.k8s.io/round_0_index_0": ["Request", "{}"],
                                 "first": "wins"}
    assert sent[1:] == [{"type": "http.response.body", "body": b"{}", "more_body": True},
                        {"type": "http.response.body", "body": b""}]


def test_nothing_recorded_adds_nothing() -> None:
    async def app(_scope: Scope, _receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"a", b"b")]})
        await send({"type": "http.response.body", "body": b"x"})

    sent = asyncio.run(_serve(app))
    assert sent == [{"type": "http.response.start", "status": 200, "headers": [(b"a", b"b")]},
                    {"type": "http.response.body", "body": b"x"}]


def test_a_delegated_header_is_kept_beside_ours() -> None:
    sent = asyncio.run(_serve(_app({}, {}, [(_HEADER, b'{"from":"extensions-api"}')])))
    values = [v for k, v in sent[0]["headers"] if k == _HEADER]
    assert [json.loads(v) for v in values] == [{"from": "extensions-api"}, {"first": "wins"}]


def test_each_request_its_own_records_and_the_context_restored() -> None:
    async def run() -> None:
        outer: dict[str, str] = {"outer": "x"}
        token = auditannotations.current.set(outer)
        try:
            first, second = await asyncio.gather(_serve(_app({"a": "1"}, {})), _serve(_app({"b": "2"}, {})))
            assert json.loads(first[0]["headers"][-1][1]) == {"a": "1", "first": "wins"}
            assert json.loads(second[0]["headers"][-1][1]) == {"b": "2", "first": "wins"}
            assert auditannotations.current.get() is outer and outer == {"outer": "x"}
            assert auditannotations.leveled.get() is None
        finally:
            auditannotations.current.reset(token)
    asyncio.run(run())
