"""The gateway's fault rules: parsing (400 naming the field), matching, rates, the plan, and the
watch cutter that ends a forwarded stream after N events or S seconds."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import orjson
import pytest
from aggregator.faults import FaultInjector, Match, Rate, parse_rules
from aggregator.faults_http import WatchCutter, apply_plan, serve_admin
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.requestinfo import parse_request_info
from genericapi.apimachinery.user import UserInfo

ALICE = UserInfo("alice", ("devs", "system:authenticated"))
ADMIN = UserInfo("kubernetes-admin", ("system:masters", "system:authenticated"))


def info(method: str, path: str, query: str = ""):  # type: ignore[no-untyped-def]
    return parse_request_info(method, path, query)


def one(body: dict[str, Any]):  # type: ignore[no-untyped-def]
    rules = parse_rules(body)
    assert len(rules) == 1
    return rules[0]


# -- parsing --------------------------------------------------------------------------------------
def test_a_full_rule_round_trips() -> None:
    rule = one({"name": "cm", "verbs": ["update"], "apiGroups": [""], "resources": ["configmaps"],
                "resourceNames": ["x"], "namespaces": ["default"], "users": ["alice"], "groups": ["devs"],
                "probability": 0.5, "firstN": 3, "everyNth": 2,
                "effect": {"type": "TooManyRequests", "retryAfterSeconds": 7}})
    out = rule.to_dict()
    assert out == {"name": "cm", "verbs": ["update"], "apiGroups": [""], "resources": ["configmaps"],
                   "resourceNames": ["x"], "namespaces": ["default"], "users": ["alice"], "groups": ["devs"],
                   "probability": 0.5, "firstN": 3, "everyNth": 2,
                   "effect": {"type": "TooManyRequests", "retryAfterSeconds": 7},
                   "status": {"matched": 0, "injected": 0}}
    again = one({k: v for k, v in out.items() if k != "status"})
    assert again.to_dict() == out


def test_list_and_rules_wrapper_forms() -> None:
    assert len(parse_rules([{"effect": {"type": "Conflict"}}, {"effect": {"type": "InternalError"}}])) == 2
    assert len(parse_rules({"rules": [{"effect": {"type": "Conflict"}}]})) == 1


@pytest.mark.parametrize(("body", "field", "text"), [
    ({}, "effect", "effect: Required value"),
    ({"effect": {"type": "Boom"}}, "effect.type", 'effect.type: Unsupported value: "Boom": supported values: '),
    ({"effect": {}}, "effect.type", "effect.type: Required value"),
    ({"effect": "Conflict"}, "effect", 'effect: Invalid value: "Conflict": must be an object'),
    ({"probability": 1.5, "effect": {"type": "Conflict"}}, "probability",
     "probability: Invalid value: 1.5: must be between 0 and 1, inclusive"),
    ({"probability": "half", "effect": {"type": "Conflict"}}, "probability",
     'probability: Invalid value: "half": must be a number'),
    ({"firstN": 0, "effect": {"type": "Conflict"}}, "firstN",
     "firstN: Invalid value: 0: must be greater than or equal to 1"),
    ({"everyNth": True, "effect": {"type": "Conflict"}}, "everyNth",
     "everyNth: Invalid value: true: must be an integer"),
    ({"verbs": ["fetch"], "effect": {"type": "Conflict"}}, "verbs[0]", 'verbs[0]: Unsupported value: "fetch"'),
    ({"verbs": "get", "effect": {"type": "Conflict"}}, "verbs", "verbs: Invalid value: \"get\": must be a list"),
    ({"namespaces": [1], "effect": {"type": "Conflict"}}, "namespaces[0]",
     "namespaces[0]: Invalid value: 1: must be a string"),
    ({"resources": ["pods/log/x"], "effect": {"type": "Conflict"}}, "resources[0]", "resources[0]: Invalid value"),
    ({"resources": [""], "effect": {"type": "Conflict"}}, "resources[0]", "resources[0]: Invalid value"),
    ({"colour": "red", "effect": {"type": "Conflict"}}, "colour", "colour: Forbidden: unknown field"),
    ({"effect": {"type": "Conflict", "message": "x"}}, "effect.message", "effect.message: Forbidden: unknown field"),
    ({"effect": {"type": "TooManyRequests", "retryAfterSeconds": 0}}, "effect.retryAfterSeconds",
     "effect.retryAfterSeconds: Invalid value: 0: must be greater than or equal to 1"),
    ({"effect": {"type": "WatchClose"}}, "effect", "effect: Required value: afterEvents or afterSeconds"),
    ({"effect": {"type": "WatchClose", "afterSeconds": 0}}, "effect.afterSeconds",
     "effect.afterSeconds: Invalid value: 0: must be greater than 0"),
    ({"verbs": ["get"], "effect": {"type": "WatchExpired"}}, "verbs",
     "effect WatchExpired applies to watch requests only"),
    ({"effect": {"type": "Latency"}}, "effect.seconds", "effect.seconds: Required value"),
    ({"effect": {"type": "Latency", "seconds": -1}}, "effect.seconds",
     "effect.seconds: Invalid value: -1: must be greater than or equal to 0"),
    ({"effect": {"type": "Latency", "seconds": 1e9}}, "effect.seconds", "must be less than or equal to 600"),
    ({"effect": {"type": "Latency", "minSeconds": 2, "maxSeconds": 1}}, "effect.maxSeconds",
     "effect.maxSeconds: Invalid value: 1: must be greater than or equal to minSeconds"),
    ({"effect": {"type": "Latency", "minSeconds": 1}}, "effect.maxSeconds", "effect.maxSeconds: Required value"),
    ({"effect": {"type": "Latency", "seconds": 1, "minSeconds": 1, "maxSeconds": 2}}, "effect.seconds",
     "effect.seconds: Forbidden"),
    ({"name": 5, "effect": {"type": "Conflict"}}, "name", "name: Invalid value: 5: must be a string"),
])
def test_bad_rules_get_400_naming_the_field(body: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(APIError) as caught:
        parse_rules(body)
    err = caught.value
    assert err.code == 400
    assert err.reason == "BadRequest"
    assert text in err.message
    assert err.message.startswith("invalid fault rule: ")
    assert field in [c["field"] for c in (err.details or {})["causes"]]


def test_list_errors_are_indexed_and_names_unique() -> None:
    with pytest.raises(APIError) as caught:
        parse_rules([{"name": "a", "effect": {"type": "Conflict"}}, {"name": "a", "effect": {"type": "Bad"}},
                     {"name": "a", "effect": {"type": "Conflict"}}])
    fields = [c["field"] for c in (caught.value.details or {})["causes"]]
    assert fields == ["[1].effect.type", "[1].name", "[2].name"]
    with pytest.raises(APIError) as caught:
        parse_rules({"rules": [{"effect": {"type": "Conflict"}, "firstN": -1}]})
    assert [c["field"] for c in (caught.value.details or {})["causes"]] == ["rules[0].firstN"]
    with pytest.raises(APIError):
        parse_rules({"rules": "x"})


# -- matching ---------------------------------------------------------------------------------
def test_match_by_verb_group_resource_namespace_name_user_group() -> None:
    upd = info("PUT", "/api/v1/namespaces/default/configmaps/x")
    assert Match().matches(upd, ALICE)
    assert Match(verbs=("update",)).matches(upd, ALICE)
    assert Match(verbs=("*",)).matches(upd, ALICE)
    assert not Match(verbs=("patch",)).matches(upd, ALICE)
    assert Match(api_groups=("",)).matches(upd, ALICE)
    assert not Match(api_groups=("apps",)).matches(upd, ALICE)
    assert Match(resources=("configmaps",)).matches(upd, ALICE)
    assert not Match(resources=("secrets",)).matches(upd, ALICE)
    assert Match(resource_names=("x",)).matches(upd, ALICE)
    assert not Match(resource_names=("y",)).matches(upd, ALICE)
    assert Match(namespaces=("default",)).matches(upd, ALICE)
    assert not Match(namespaces=("kube-system",)).matches(upd, ALICE)
    assert Match(users=("alice",)).matches(upd, ALICE)
    assert not Match(users=("bob",)).matches(upd, ALICE)
    assert Match(groups=("devs",)).matches(upd, ALICE)
    assert not Match(groups=("system:masters",)).matches(upd, ALICE)
    assert Match(groups=("system:masters",)).matches(upd, ADMIN)
    # non-resource requests never match
    assert not Match().matches(info("GET", "/apis"), ALICE)


def test_resources_follow_rbac_subresource_rules() -> None:
    status = info("PUT", "/apis/apps/v1/namespaces/ns/deployments/web/status")
    main = info("PUT", "/apis/apps/v1/namespaces/ns/deployments/web")
    assert Match(resources=("deployments",)).matches(main, ALICE)
    assert not Match(resources=("deployments",)).matches(status, ALICE)
    assert Match(resources=("deployments/status",)).matches(status, ALICE)
    assert not Match(resources=("deployments/status",)).matches(main, ALICE)
    assert Match(resources=("*/status",)).matches(status, ALICE)
    assert not Match(resources=("*/status",)).matches(main, ALICE)
    assert Match(resources=("*",)).matches(status, ALICE)
    # cluster-scoped: the namespace is ""
    assert Match(namespaces=("",)).matches(info("GET", "/api/v1/nodes/n1"), ALICE)


def test_watch_and_list_are_told_apart() -> None:
    rule = one({"verbs": ["watch"], "effect": {"type": "InternalError"}})
    assert rule.match.matches(info("GET", "/api/v1/pods", "watch=true"), ALICE)
    assert not rule.match.matches(info("GET", "/api/v1/pods"), ALICE)
    # watch effects imply the watch verb
    expired = one({"resources": ["pods"], "effect": {"type": "WatchExpired"}})
    assert expired.match.verbs == ("watch",)
    assert not expired.match.matches(info("GET", "/api/v1/pods"), ALICE)
    assert expired.match.matches(info("GET", "/api/v1/watch/pods"), ALICE)


# -- rates ------------------------------------------------------------------------------------
def test_rates() -> None:
    never = lambda: 0.99  # noqa: E731
    always = lambda: 0.0  # noqa: E731
    assert [Rate(first_n=2).fires(n, never) for n in range(1, 5)] == [True, True, False, False]
    assert [Rate(every_nth=3).fires(n, never) for n in range(1, 7)] == [False, False, True, False, False, True]
    assert [Rate(first_n=4, every_nth=2).fires(n, never) for n in range(1, 7)] == [False, True, False, True,
                                                                                  False, False]
    assert not Rate(probability=0.5).fires(1, never)
    assert Rate(probability=0.5).fires(1, always)
    assert not Rate(probability=0.0).fires(1, always)
    assert Rate(probability=1.0).fires(1, lambda: 0.999999)


def test_probability_is_roughly_honoured() -> None:
    injector = FaultInjector(random.Random(7))
    injector.add(parse_rules({"probability": 0.3, "effect": {"type": "InternalError"}}))
    get = info("GET", "/api/v1/namespaces/default/pods/p")
    hits = sum(injector.plan(get, ALICE) is not None for _ in range(2000))
    assert 500 < hits < 700
    assert injector.rules[0].matched == 2000
    assert injector.rules[0].injected == hits


# -- the injector and its plan ----------------------------------------------------------------
def test_plan_order_latency_adds_up_first_answer_wins() -> None:
    injector = FaultInjector()
    injector.add(parse_rules([
        {"name": "slow", "effect": {"type": "Latency", "seconds": 0.2}},
        {"name": "slower", "effect": {"type": "Latency", "minSeconds": 0.1, "maxSeconds": 0.3}},
        {"name": "busy", "firstN": 1, "effect": {"type": "TooManyRequests", "retryAfterSeconds": 3}},
        {"name": "boom", "effect": {"type": "InternalError"}},
    ]))
    get = info("GET", "/api/v1/namespaces/default/pods/p")
    first = injector.plan(get, ALICE)
    assert first is not None and first.answer is not None and first.answer.name == "busy"
    assert 0.3 <= first.latency <= 0.5
    second = injector.plan(get, ALICE)
    assert second is not None and second.answer is not None and second.answer.name == "boom"
    status = {r.name: (r.matched, r.injected) for r in injector.rules}
    assert status == {"slow": (2, 2), "slower": (2, 2), "busy": (2, 1), "boom": (1, 1)}


def test_names_generated_and_unique() -> None:
    injector = FaultInjector()
    made = injector.add(parse_rules([{"effect": {"type": "Conflict"}}, {"effect": {"type": "Conflict"}}]))
    assert [r.name for r in made] == ["fault-1", "fault-2"]
    with pytest.raises(APIError) as caught:
        injector.add(parse_rules({"name": "fault-1", "effect": {"type": "Conflict"}}))
    assert caught.value.code == 409 and caught.value.reason == "AlreadyExists"
    assert len(injector.rules) == 2
    assert injector.remove("fault-1").name == "fault-1"
    with pytest.raises(APIError) as caught:
        injector.get("fault-1")
    assert caught.value.code == 404
    assert [r.name for r in injector.replace(parse_rules({"effect": {"type": "Conflict"}}))] == ["fault-3"]


# -- on the wire (ASGI) -----------------------------------------------------------------------
class Recorder:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    @property
    def status(self) -> int:
        return int(self.messages[0]["status"])

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.messages[0]["headers"])

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages[1:])


def scope_of(method: str, path: str, query: bytes = b"") -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "query_string": query, "headers": []}


def body_receive(body: bytes):  # type: ignore[no-untyped-def]
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}
    return receive


async def test_admin_path_only_for_system_masters() -> None:
    injector = FaultInjector()
    out = Recorder()
    await serve_admin(injector, scope_of("POST", "/debug/kubechain/faults"),
                      body_receive(b'{"effect":{"type":"Conflict"}}'), out, ALICE)
    assert out.status == 403
    assert orjson.loads(out.body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'forbidden: User "alice" cannot post path "/debug/kubechain/faults"', "reason": "Forbidden",
        "details": {}, "code": 403}
    assert injector.rules == []
    out = Recorder()
    await serve_admin(injector, scope_of("POST", "/debug/kubechain/faults"),
                      body_receive(b'{"name":"c","effect":{"type":"Conflict"}}'), out, ADMIN)
    assert out.status == 201
    assert orjson.loads(out.body)["rules"][0]["name"] == "c"
    for method, path, body, status in [
        ("GET", "/debug/kubechain/faults", b"", 200),
        ("GET", "/debug/kubechain/faults/c", b"", 200),
        ("GET", "/debug/kubechain/faults/nope", b"", 404),
        ("PATCH", "/debug/kubechain/faults", b"", 405),
        ("POST", "/debug/kubechain/faults", b"{not json", 400),
        ("POST", "/debug/kubechain/faults", b"", 400),
        ("POST", "/debug/kubechain/faults", b'{"effect":{"type":"Conflict"},"probability":2}', 400),
        ("PUT", "/debug/kubechain/faults", b'[{"name":"d","effect":{"type":"InternalError"}}]', 200),
        ("DELETE", "/debug/kubechain/faults/d", b"", 200),
        ("DELETE", "/debug/kubechain/faults/d", b"", 404),
    ]:
        out = Recorder()
        await serve_admin(injector, scope_of(method, path), body_receive(body), out, ADMIN)
        assert out.status == status, (method, path, out.body)
        if status >= 400:
            assert orjson.loads(out.body)["kind"] == "Status"
    assert injector.rules == []


async def test_answers_are_kube_statuses() -> None:
    async def forward(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("an answered request is not forwarded")

    injector = FaultInjector()
    injector.add(parse_rules([
        {"verbs": ["update"], "effect": {"type": "Conflict"}},
        {"verbs": ["create"], "effect": {"type": "TooManyRequests", "retryAfterSeconds": 4}},
        {"verbs": ["get"], "effect": {"type": "ServiceUnavailable", "message": "down for tea"}},
        {"verbs": ["delete"], "effect": {"type": "InternalError"}},
        {"verbs": ["watch"], "effect": {"type": "WatchExpired"}},
    ]))
    cases = [
        ("PUT", "/apis/apps/v1/namespaces/ns/deployments/web/status", b"", 409, "Conflict",
         'Operation cannot be fulfilled on deployments.apps "web": the object has been modified; please apply '
         "your changes to the latest version and try again"),
        ("POST", "/api/v1/namespaces/ns/configmaps", b"", 429, "TooManyRequests",
         "Too many requests, please try again later."),
        ("GET", "/api/v1/namespaces/ns/configmaps/x", b"", 503, "ServiceUnavailable", "down for tea"),
        ("DELETE", "/api/v1/namespaces/ns/configmaps/x", b"", 500, "InternalError",
         'Internal error occurred: injected by kubechain fault rule "fault-4"'),
    ]
    for method, path, query, code, reason, message in cases:
        plan = injector.plan(info(method, path, query.decode()), ALICE)
        assert plan is not None
        out = Recorder()
        await apply_plan(plan, scope_of(method, path, query), body_receive(b""), out, forward)
        status = orjson.loads(out.body)
        assert (out.status, status["code"], status["reason"], status["message"]) == (code, code, reason, message)
        if code == 409:
            assert status["details"] == {"name": "web", "group": "apps", "kind": "deployments"}
        if code == 429:
            assert out.headers[b"retry-after"] == b"4"
            assert status["details"] == {"retryAfterSeconds": 4}
    plan = injector.plan(info("GET", "/api/v1/namespaces/ns/pods", "watch=1&resourceVersion=41"), ALICE)
    assert plan is not None
    out = Recorder()
    await apply_plan(plan, scope_of("GET", "/api/v1/namespaces/ns/pods", b"watch=1&resourceVersion=41"),
                     body_receive(b""), out, forward)
    assert out.status == 200
    event = orjson.loads(out.body)
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
    assert event["object"]["message"] == "too old resource version: 41 (42)"


async def fake_watch(scope: Any, receive: Any, send: Any) -> None:
    """Like the proxy relaying a watch: events until the client goes away, then the end."""
    await receive()  # the request body

    async def pump() -> None:
        n = 0
        while True:
            n += 1
            # two events per chunk, the second split across chunks
            await send({"type": "http.response.body", "body": b'{"type":"ADDED","n":%d}\n{"type":' % n,
                        "more_body": True})
            await send({"type": "http.response.body", "body": b'"MODIFIED","n":%d}\n' % n, "more_body": True})
            await asyncio.sleep(0.01)

    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    pump_task = asyncio.create_task(pump())
    while (await receive())["type"] != "http.disconnect":
        pass
    pump_task.cancel()
    await send({"type": "http.response.body", "body": b"", "more_body": False})


@pytest.mark.parametrize("events", [1, 2, 3, 5])
async def test_watch_cut_after_events(events: int) -> None:
    injector = FaultInjector()
    injector.add(parse_rules({"effect": {"type": "WatchClose", "afterEvents": events}}))
    plan = injector.plan(info("GET", "/api/v1/pods", "watch=1"), ALICE)
    assert plan is not None and plan.cut is not None
    out = Recorder()
    await asyncio.wait_for(apply_plan(plan, scope_of("GET", "/api/v1/pods", b"watch=1"), body_receive(b""),
                                      out, fake_watch), 5)
    lines = out.body.split(b"\n")
    assert lines[-1] == b""
    assert len(lines) - 1 == events
    assert all(orjson.loads(line)["type"] in ("ADDED", "MODIFIED") for line in lines[:-1])
    finals = [m for m in out.messages[1:] if not m.get("more_body")]
    assert len(finals) == 1 and out.messages[-1] is finals[0]


async def test_watch_cut_after_seconds() -> None:
    injector = FaultInjector()
    injector.add(parse_rules({"effect": {"type": "WatchClose", "afterSeconds": 0.3}}))
    plan = injector.plan(info("GET", "/api/v1/watch/pods"), ALICE)
    assert plan is not None
    out = Recorder()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(apply_plan(plan, scope_of("GET", "/api/v1/watch/pods"), body_receive(b""), out,
                                      fake_watch), 5)
    elapsed = loop.time() - started
    assert 0.25 < elapsed < 2
    assert out.body.count(b"\n") >= 2
    assert not out.messages[-1].get("more_body")


async def test_cutter_leaves_sized_answers_alone() -> None:
    injector = FaultInjector()
    injector.add(parse_rules({"effect": {"type": "WatchClose", "afterEvents": 1}}))
    plan = injector.plan(info("GET", "/api/v1/watch/pods"), ALICE)
    assert plan is not None and plan.cut is not None
    out = Recorder()
    cutter = WatchCutter(plan.cut, body_receive(b""), out)
    body = b'{"type":"ERROR","object":{}}\n{"x":1}\n'
    await cutter.send({"type": "http.response.start", "status": 200,
                       "headers": [(b"content-length", str(len(body)).encode())]})
    await cutter.send({"type": "http.response.body", "body": body, "more_body": False})
    assert out.body == body
