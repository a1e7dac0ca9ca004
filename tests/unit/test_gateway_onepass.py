"""The gateway's one-pass handler chain (aggregator/gatewaychain.py) against the nested ASGI filters it
replaced (filters.build_nested_chain), answer for answer: the same statuses, headers (Audit-ID and the
X-Kubernetes-PF-* headers once each), bodies and audit events for a plain GET, a bad token (401,
audited as failed authentication), impersonation refused (403) or malformed (400), a request APF
refuses (429 with Retry-After), authorization refused (403), a watch (not counted in flight, its seat
given back when its response starts), exec (not limited by APF), backends' audit annotations and
Audit-ID headers, and a handler that raises (Panic). Plus the order of the checks: who is refused
where never reaches the steps after it.

Real parts: the gateway's Authenticator, kube's privileged-groups authorizer, APF's controller with
kube's mandatory configuration, the audit policy and sink; the mux behind them is a small ASGI app.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from aggregator import filters
from aggregator.audit import policy, sink
from aggregator.audit.filter import Auditor
from aggregator.auth import Authenticator
from aggregator.flowcontrol.wiring import PriorityAndFairness
from genericapi.apimachinery.authorization import PrivilegedGroups
from genericapi.apimachinery.user import UserInfo
from genericapi.server.auditannotations import HEADER as ANNOTATIONS_HEADER
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKENS = {"admin-token": UserInfo("admin", ("system:masters",)), "alice-token": UserInfo("alice", ("devs",))}
POLICY = b"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Request}]\n"
PF_HEADERS = (b"x-kubernetes-pf-flowschema-uid", b"x-kubernetes-pf-prioritylevel-uid")


class Collected:
    name = "collected"

    def __init__(self) -> None:
        self.docs: list[dict[str, Any]] = []

    def write(self, docs: Any) -> None:
        self.docs.extend(docs)

    def close(self) -> None:
        pass


class Mux:
    """The handler behind the chain: answers 200 (a watch: a chunked stream, held open until told),
    and notes what the chain looked like while it ran (in flight, seats in use)."""

    def __init__(self, chain: Callable[[], Any], extra_headers: list[tuple[bytes, bytes]] | None = None,
                 fail: bool = False) -> None:
        self.chain = chain
        self.extra = extra_headers or []
        self.fail = fail
        self.calls = 0
        self.inflight: list[list[int]] = []
        self.hold = asyncio.Event()
        self.entered = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.calls += 1
        self.inflight.append(list(self.chain().watermark.current))
        body = (await receive()).get("body", b"")
        if self.fail:
            raise RuntimeError("boom")
        self.entered.set()
        info = filters.request_info_of(scope)
        if info is not None and info.verb == "watch":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked"),
                                    *self.extra]})
            await send({"type": "http.response.body", "body": b'{"type":"ADDED"}\n', "more_body": True})
            await self.hold.wait()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        if not self.hold.is_set() and scope["path"].endswith("/held"):
            await self.hold.wait()
        out = orjson.dumps({"user": scope[filters.USER].name, "got": body.decode()})
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(out)),
                                *self.extra]})
        await send({"type": "http.response.body", "body": out})


class Chain:
    """One chain (one-pass or nested) with its own authenticator, APF, audit sink and mux."""

    def __init__(self, build: Callable[..., ASGIApp], seats: int = 600, allowed: tuple[str, ...] = ("system:masters",),
                 **mux_options: Any) -> None:
        self.backend = Collected()
        self.auditor = Auditor(policy.load_policy(POLICY), sink.AuditSink([self.backend]))
        self.apf = PriorityAndFairness.build(None, "/registry", seats, 60.0)
        self.apf.controller.refresh()
        self.mux = Mux(lambda: self.watermark_holder, **mux_options)
        self.app = build(self.mux, Authenticator(dict(TOKENS), anonymous=True), PrivilegedGroups(*allowed),
                         self.apf, None, self.auditor)
        self.watermark_holder = _find_watermark(self.app)

    def seats_in_use(self) -> int:
        return sum(level.queues.executing for level in self.apf.controller.levels.values())


def _find_watermark(app: Any) -> Any:
    """The chain's in-flight watermark (an attribute of the one-pass chain, of a filter when nested)."""
    seen = app
    while seen is not None:
        if hasattr(seen, "watermark"):
            return seen
        seen = getattr(seen, "app", None)
    raise AssertionError("no watermark")


def scope_of(path: str, query: str = "", method: str = "GET", token: str = "admin-token",
             headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    hs = [(b"user-agent", b"kubectl/v1.33.1"), (b"audit-id", b"11111111-2222-4333-8444-555555555555")]
    if token:
        hs.append((b"authorization", b"Bearer " + token.encode()))
    return {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": query.encode(),
            "headers": hs + (headers or []), "client": ("10.0.0.7", 40000), "scheme": "https",
            "http_version": "1.1"}


async def call(chain: Chain, scope: dict[str, Any], body: bytes = b"") -> list[Message]:
    sent: list[Message] = []
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await chain.app(scope, receive, send)
    return sent


def comparable(sent: list[Message]) -> list[Any]:
    return [(m["type"], m.get("status"), m.get("headers"), m.get("body"), m.get("more_body")) for m in sent]


def events(chain: Chain) -> list[dict[str, Any]]:
    chain.auditor.sink.stop()
    docs = []
    for doc in chain.backend.docs:
        doc = dict(doc)
        doc.pop("requestReceivedTimestamp", None)
        doc.pop("stageTimestamp", None)
        docs.append(doc)
    return docs


def both(**options: Any) -> tuple[Chain, Chain]:
    one, nested = Chain(filters.build_handler_chain, **options), Chain(filters.build_nested_chain, **options)
    one.auditor.sink.start()
    nested.auditor.sink.start()
    return one, nested


SIMPLE = [
    pytest.param(scope_of("/api/v1/namespaces/default/configmaps/c"), id="get"),
    pytest.param(scope_of("/api/v1/namespaces/default/configmaps", method="POST"), id="create"),
    pytest.param(scope_of("/api/v1/namespaces", token="wrong"), id="bad-token-401"),
    pytest.param(scope_of("/version", token="wrong"), id="bad-token-401-on-version"),
    pytest.param(scope_of("/api/v1/namespaces", token="alice-token"), id="forbidden-403"),
    pytest.param(scope_of("/version", token=""), id="anonymous-public-path"),
    pytest.param(scope_of("/api/v1/namespaces", token=""), id="anonymous-forbidden"),
    pytest.param(scope_of("/api/v1/namespaces", token="alice-token", headers=[(b"impersonate-user", b"bob")]),
                 id="impersonation-refused-403"),
    pytest.param(scope_of("/api/v1/namespaces", headers=[(b"impersonate-group", b"g")]),
                 id="impersonation-malformed-400"),
    pytest.param(scope_of("/api/v1/namespaces", headers=[(b"impersonate-user", b"bob")]), id="impersonated"),
    pytest.param(scope_of("/api/v1/namespaces/default/pods/p/exec", method="POST"), id="exec-not-limited"),
    pytest.param(scope_of("/no/such/thing"), id="non-resource-path"),
    pytest.param(scope_of("/api/v1/namespaces/default/configmaps/c",
                          headers=[(ANNOTATIONS_HEADER.lower().encode(), b'{"forged": "by the client"}')]),
                 id="client-annotations-dropped"),
]


@pytest.mark.parametrize("scope", SIMPLE)
def test_one_pass_answers_and_audits_as_the_nested_filters(scope: dict[str, Any]) -> None:
    async def go() -> tuple[list[Any], list[Any], Chain, Chain]:
        one, nested = both()
        a = await call(one, dict(scope, headers=list(scope["headers"])), b"{}")
        b = await call(nested, dict(scope, headers=list(scope["headers"])), b"{}")
        return a, b, one, nested

    a, b, one, nested = asyncio.run(go())
    assert comparable(a) == comparable(b)
    assert events(one) == events(nested)
    start = a[0]
    names = [k for k, _ in start["headers"]]
    assert names.count(b"audit-id") == 1 and dict(start["headers"])[b"audit-id"] == \
        b"11111111-2222-4333-8444-555555555555"
    assert all(names.count(h) <= 1 for h in PF_HEADERS)
    assert one.mux.calls == nested.mux.calls


def test_a_401_carries_the_audit_id_and_is_audited_before_anything_else_runs() -> None:
    async def go() -> tuple[list[Message], Chain]:
        one, _ = both()
        return await call(one, scope_of("/api/v1/namespaces", token="wrong")), one

    sent, one = asyncio.run(go())
    assert sent[0]["status"] == 401
    assert (b"audit-id", b"11111111-2222-4333-8444-555555555555") in sent[0]["headers"]
    assert not any(k in PF_HEADERS for k, _ in sent[0]["headers"])  # refused before flow control
    assert orjson.loads(sent[1]["body"])["reason"] == "Unauthorized"
    assert one.mux.calls == 0 and one.seats_in_use() == 0
    docs = events(one)
    assert [(d["stage"], d["responseStatus"]) for d in docs] == [
        ("ResponseStarted", {"metadata": {}, "message": "Authentication failed, attempted: bearer", "code": 401})]
    assert "user" not in docs[0] or not docs[0]["user"]


def test_headers_are_added_once_and_the_backends_audit_headers_never_reach_the_client() -> None:
    upstream = [(b"audit-id", b"from-the-backend"),
                (ANNOTATIONS_HEADER.lower().encode(), b'{"example.com/a": "1", "x": ["RequestResponse", "2"]}')]

    async def go_admin() -> tuple[list[Message], list[Message], Chain, Chain]:
        one, nested = both(extra_headers=upstream)
        scope = scope_of("/api/v1/namespaces/default/configmaps/c")
        a = await call(one, dict(scope, headers=list(scope["headers"])))
        b = await call(nested, dict(scope, headers=list(scope["headers"])))
        return a, b, one, nested

    for _ in range(2):  # the second time the audit policy's decision is a kept one
        a, b, one, nested = asyncio.run(go_admin())
        assert comparable(a) == comparable(b)
        headers = a[0]["headers"]
        names = [k for k, _ in headers]
        assert names.count(b"audit-id") == 1 and (b"audit-id", b"from-the-backend") not in headers
        assert ANNOTATIONS_HEADER.lower().encode() not in names
        assert [names.count(h) for h in PF_HEADERS] == [1, 1]
        assert names[-3:] == [*PF_HEADERS, b"audit-id"]  # flow control's, then the Audit-ID, last
        one_docs, nested_docs = events(one), events(nested)
        assert one_docs == nested_docs
    # Request level: the backend's plain annotation is kept, the RequestResponse-bound one is not.
    assert one_docs[-1]["annotations"]["example.com/a"] == "1" and "x" not in one_docs[-1]["annotations"]


def test_a_429_carries_retry_after_and_flow_control_headers_and_is_audited() -> None:
    async def go(build: Callable[..., ASGIApp]) -> tuple[list[Message], Chain]:
        chain = Chain(build, seats=1, allowed=("devs",))
        chain.auditor.sink.start()
        held = asyncio.create_task(call(chain, scope_of("/api/v1/namespaces/default/configmaps/held",
                                                        token="alice-token")))
        await chain.mux.entered.wait()
        refused = await call(chain, scope_of("/api/v1/namespaces/default/configmaps/c", token="alice-token"))
        chain.mux.hold.set()
        await held
        return refused, chain

    a, one = asyncio.run(go(filters.build_handler_chain))
    b, nested = asyncio.run(go(filters.build_nested_chain))
    assert comparable(a) == comparable(b)
    start = dict(a[0]["headers"])
    assert a[0]["status"] == 429 and int(start[b"retry-after"]) >= 1
    assert all(h in start for h in PF_HEADERS) and b"audit-id" in start
    assert a[1]["body"] == b"Too many requests, please try again later.\n"
    assert one.mux.calls == 1  # only the held request reached the mux
    one_docs, nested_docs = events(one), events(nested)
    assert one_docs == nested_docs
    assert [d["responseStatus"]["code"] for d in one_docs if d["stage"] == "ResponseComplete"] == [429, 200]


def test_a_permitted_watch_streams_without_a_seat_and_outside_the_inflight_count() -> None:
    async def go(build: Callable[..., ASGIApp]) -> tuple[list[Message], Chain, int, list[int]]:
        chain = Chain(build, allowed=("devs",))
        chain.auditor.sink.start()
        watch = asyncio.create_task(call(chain, scope_of("/api/v1/namespaces/default/configmaps",
                                                         query="watch=1", token="alice-token")))
        await chain.mux.entered.wait()
        for _ in range(5):
            await asyncio.sleep(0)
        seats = chain.seats_in_use()
        current = list(chain.watermark_holder.watermark.current)
        chain.mux.hold.set()
        return await watch, chain, seats, current

    a, one, seats_a, inflight_a = asyncio.run(go(filters.build_handler_chain))
    b, nested, seats_b, inflight_b = asyncio.run(go(filters.build_nested_chain))
    assert comparable(a) == comparable(b)
    assert events(one) == events(nested)
    assert a[0]["status"] == 200 and [names for names, _ in a[0]["headers"]].count(PF_HEADERS[0]) == 1
    assert one.mux.inflight == nested.mux.inflight == [[0, 0]]  # not counted in flight
    assert seats_a == seats_b == 0  # released once the response started
    assert inflight_a == inflight_b == [0, 0]
    stages = [d["stage"] for d in events(one)]
    assert stages == ["RequestReceived", "ResponseStarted", "ResponseComplete"]


def test_a_get_is_counted_in_flight_while_it_runs() -> None:
    async def go() -> Chain:
        one, _ = both()
        await call(one, scope_of("/api/v1/namespaces/default/configmaps/c"))
        await call(one, scope_of("/api/v1/namespaces/default/configmaps", method="POST"))
        return one

    one = asyncio.run(go())
    assert one.mux.inflight == [[1, 0], [0, 1]]
    assert one.watermark_holder.watermark.current == [0, 0]


def test_a_handler_that_raises_is_kubes_panic_stage_in_both() -> None:
    async def go(build: Callable[..., ASGIApp]) -> tuple[Chain, int]:
        chain = Chain(build, fail=True)
        chain.auditor.sink.start()
        with pytest.raises(RuntimeError, match="boom"):
            await call(chain, scope_of("/api/v1/namespaces/default/configmaps/c"))
        return chain, chain.seats_in_use()

    one, seats_one = asyncio.run(go(filters.build_handler_chain))
    nested, seats_nested = asyncio.run(go(filters.build_nested_chain))
    assert events(one) == events(nested)
    assert [d["stage"] for d in events(one)] == ["RequestReceived", "Panic"]
    assert seats_one == seats_nested == 0
    assert one.watermark_holder.watermark.current == [0, 0]


def test_order_of_checks_impersonation_before_flow_control_before_authorization() -> None:
    """An impersonation refusal takes no APF seat and carries no PF headers; an authorization
    refusal comes after flow control (it carries the PF headers)."""
    async def go() -> tuple[list[Message], list[Message]]:
        one, _ = both()
        imp = await call(one, scope_of("/api/v1/namespaces", token="alice-token",
                                        headers=[(b"impersonate-user", b"bob")]))
        authz = await call(one, scope_of("/api/v1/namespaces", token="alice-token"))
        return imp, authz

    imp, authz = asyncio.run(go())
    assert imp[0]["status"] == 403 and not any(k in PF_HEADERS for k, _ in imp[0]["headers"])
    assert orjson.loads(imp[1]["body"])["message"].startswith('users "bob" is forbidden')
    assert authz[0]["status"] == 403 and all(h in dict(authz[0]["headers"]) for h in PF_HEADERS)


def test_non_http_scopes_pass_to_the_mux() -> None:
    seen: list[str] = []

    async def mux(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["type"])

    app = filters.build_handler_chain(mux, Authenticator({}), None)

    async def nothing() -> Message:
        return {}

    async def drop(_message: Message) -> None:
        pass

    asyncio.run(app({"type": "lifespan"}, nothing, drop))
    assert seen == ["lifespan"]
