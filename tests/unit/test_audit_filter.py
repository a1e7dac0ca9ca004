"""The gateway's audit filters (WithAuditInit + WithAudit) around a plain ASGI app: kube's stages
(RequestReceived stamped with the receive time, ResponseStarted for watches, ResponseComplete, Panic
with kube's Status), each stage's event its own copy, the Audit-ID format, and policy decisions kept
per request shape without mixing users up."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from aggregator import filters
from aggregator.audit import policy, sink
from aggregator.audit.filter import Auditor, WithAudit, WithAuditInit, new_audit_id
from genericapi.apimachinery.requestinfo import parse_request_info
from genericapi.apimachinery.user import UserInfo
from starlette.types import Message, Receive, Scope, Send

ALICE = UserInfo("alice", ("devs", "system:authenticated"))
BOB = UserInfo("bob", ("system:authenticated",))


class Collected:
    """A backend keeping the rendered events."""

    name = "collected"

    def __init__(self) -> None:
        self.docs: list[dict[str, Any]] = []

    def write(self, docs: Any) -> None:
        self.docs.extend(docs)

    def close(self) -> None:
        pass


def make_auditor(policy_text: str) -> tuple[Auditor, Collected]:
    backend = Collected()
    loaded = policy.load_policy(f"apiVersion: audit.k8s.io/v1\nkind: Policy\n{policy_text}".encode())
    return Auditor(loaded, sink.AuditSink([backend])), backend


def run(app: Any, policy_text: str | Auditor, path: str, user: UserInfo = ALICE,
        query: str = "") -> list[dict[str, Any]]:
    """One GET through the two filters; the events it produced (the app's exception re-raised after)."""
    if isinstance(policy_text, Auditor):
        auditor, backend = policy_text, policy_text.sink.backends[0]
        assert isinstance(backend, Collected)
    else:
        auditor, backend = make_auditor(policy_text)
    before = len(backend.docs)
    auditor.sink.start()
    handler = WithAuditInit(WithAudit(app, auditor), auditor)
    scope: dict[str, Any] = {
        "type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": query.encode(),
        "headers": [(b"user-agent", b"kubectl/v1.33.1")], "client": ("10.0.0.7", 40000), filters.USER: user,
        filters.REQUEST_INFO: parse_request_info("GET", path, query)}

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        pass

    try:
        asyncio.run(handler(scope, receive, send))
    finally:
        auditor.sink.stop()
    return backend.docs[before:]


async def ok(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    scope[filters.USER] = scope[filters.USER]  # untouched: no impersonation
    await send({"type": "http.response.body", "body": b"{}"})


def test_stages_of_a_request_each_its_own_copy() -> None:
    async def annotating(scope: Scope, receive: Receive, send: Send) -> None:
        from aggregator.audit import context
        context.add_annotation(scope, "example.com/k", "v")  # after RequestReceived was recorded
        await ok(scope, receive, send)

    docs = run(annotating, "rules: [{level: Metadata}]", "/api/v1/namespaces/default/configmaps/c")
    assert [d["stage"] for d in docs] == ["RequestReceived", "ResponseComplete"]
    received, complete = docs
    assert received["auditID"] == complete["auditID"]
    # kube stamps RequestReceived with the time the request arrived, later stages with now.
    assert received["stageTimestamp"] == received["requestReceivedTimestamp"]
    assert complete["stageTimestamp"] >= complete["requestReceivedTimestamp"]
    assert "annotations" not in received and "responseStatus" not in received
    assert complete["annotations"] == {"example.com/k": "v"}
    assert complete["responseStatus"] == {"metadata": {}, "code": 200}
    assert complete["objectRef"] == {"resource": "configmaps", "namespace": "default", "name": "c",
                                     "apiVersion": "v1"}
    assert complete["sourceIPs"] == ["10.0.0.7"] and complete["user"]["username"] == "alice"


def test_a_watch_has_response_started() -> None:
    docs = run(ok, "omitStages: [RequestReceived]\nrules: [{level: Metadata}]", "/api/v1/configmaps", query="watch=1")
    assert [d["stage"] for d in docs] == ["ResponseStarted", "ResponseComplete"]
    assert docs[0]["responseStatus"] == {"metadata": {}, "code": 200}


def test_a_panic_is_kubes_panic_stage() -> None:
    async def broken(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("boom")

    auditor, backend = make_auditor("rules: [{level: Metadata}]")
    with pytest.raises(RuntimeError, match="boom"):  # recorded, then raised on (kube: panic(r) again)
        run(broken, auditor, "/api/v1/namespaces/default/pods")
    assert [d["stage"] for d in backend.docs] == ["RequestReceived", "Panic"]
    assert backend.docs[1]["responseStatus"] == {"metadata": {}, "status": "Failure",
                                                 "message": "APIServer panic'd: boom", "reason": "InternalError",
                                                 "code": 500}


def test_decisions_per_user_and_path_are_not_mixed_up() -> None:
    rules = ("rules:\n- {level: None, users: [bob]}\n- {level: Request, resources: [{group: '', resources: [secrets]}]}"
             "\n- {level: Metadata}")
    path = "/api/v1/namespaces/default/configmaps/c"
    auditor, _ = make_auditor(rules)
    for _ in range(2):  # the second round is answered from the kept decisions
        assert [d["level"] for d in run(ok, auditor, path)] == ["Metadata", "Metadata"]
        assert run(ok, auditor, path, user=BOB) == []
        assert [d["level"] for d in run(ok, auditor, "/api/v1/namespaces/default/secrets/s")] == ["Request", "Request"]
    assert len(auditor._decided) == 3


def test_audit_ids_are_version_4_uuids() -> None:
    ids = {new_audit_id() for _ in range(1000)}
    assert len(ids) == 1000
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_the_writer_keeps_up_with_a_busy_event_loop() -> None:
    """The writer yields the GIL now and then, not after every event: a thread that never blocks (a
    busy event loop) hands it back only every switch interval, and an event per turn would fill the
    queue and drop events (it did, one event per 5 ms)."""
    from aggregator.audit.event import Event

    backend = Collected()
    audit_sink = sink.AuditSink([backend])
    dropped = sink.BUFFERED_ERRORS._value.get()
    audit_sink.start()
    n = 20_000
    try:
        for i in range(n):
            sum(range(2500))  # the rest of a request's work (tens of µs), holding the GIL
            audit_sink.process(Event("Metadata", f"id-{i}", "/api", "get", ALICE, ["10.0.0.7"], "ua", None,
                                     1_700_000_000.0).final("ResponseComplete"))
    finally:
        audit_sink.stop(timeout=60)
    assert sink.BUFFERED_ERRORS._value.get() == dropped
    assert len(backend.docs) == n and backend.docs[-1]["auditID"] == f"id-{n - 1}"
