"""The per-request work core-api does once instead of on every request (issue 15), answering exactly
what the long way answers: the negotiated output remembered per Accept header, the UID made from
random bytes, the user read from X-Remote-* headers, and a create's schema walk reused when nothing
but server-set metadata changed since the request body's walk."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
from coreapi import catalog, strategies
from coreapi.kinds.base import BuiltinStrategy
from genericapi.apimachinery import user
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.schemas import SchemaCatalog
from genericapi.handlers import negotiation
from genericapi.registry import fieldvalidation
from genericapi.registry.admissionchain import RequestAdmission, request_admission
from genericapi.registry.fieldtracking import FieldTracker, Writer
from genericapi.registry.meta import SERVER_SET_METADATA, new_uid, same_but_server_metadata

SCHEMAS = SchemaCatalog.load()
ROWS = {(i.group, i.version, i.kind): i for i in catalog.BUILTIN_RESOURCES}


def strategy(group: str, kind: str) -> Any:
    return strategies.strategy_for(ROWS[(group, "v1", kind)], SCHEMAS)


# -- negotiation -------------------------------------------------------------------------------------

KUBECTL_GET = ("application/json;as=Table;v=v1;g=meta.k8s.io,"
               "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")


@pytest.mark.parametrize("accept,include", [
    ("", ""), ("*/*", ""), ("application/json", ""), ("application/yaml", ""), (KUBECTL_GET, ""),
    (KUBECTL_GET, "Object"), (KUBECTL_GET, "None"),
    ("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", ""),
])
def test_output_for_answers_as_negotiation_every_time(accept: str, include: str) -> None:
    negotiation._memo.clear()
    first = negotiation.output_for(accept, include)
    assert first == negotiation._output_for(accept, include)
    assert negotiation.output_for(accept, include) is first  # remembered


@pytest.mark.parametrize("accept,include", [
    ("application/vnd.kubernetes.protobuf", ""), ("text/html", ""),
    ("application/json;as=Foo;g=meta.k8s.io;v=v1", ""), (KUBECTL_GET, "Everything"),
])
def test_output_for_refuses_every_time_and_keeps_nothing(accept: str, include: str) -> None:
    negotiation._memo.clear()
    for _ in range(2):
        with pytest.raises(APIError) as err:
            negotiation.output_for(accept, include)
        assert err.value.code in (400, 406)
    assert (accept, include) not in negotiation._memo


def test_output_for_memo_is_bounded() -> None:
    negotiation._memo.clear()
    for i in range(negotiation._MEMO_SIZE + 50):
        assert negotiation.output_for(f"application/json;x={i}", "").mode == "object"
    assert len(negotiation._memo) == negotiation._MEMO_SIZE
    assert negotiation.output_for("application/yaml", "").yaml  # still answered, not kept
    assert ("application/yaml", "") not in negotiation._memo
    negotiation._memo.clear()


# -- uid and user ------------------------------------------------------------------------------------

def test_new_uid_is_a_random_version_4_uuid() -> None:
    seen = set()
    for _ in range(2000):
        uid = new_uid()
        parsed = uuid.UUID(uid)
        assert str(parsed) == uid and parsed.version == 4 and parsed.variant == uuid.RFC_4122
        seen.add(uid)
    assert len(seen) == 2000


def test_user_from_headers_reads_only_x_remote_headers_in_any_case() -> None:
    headers = [(b"host", b"x"), (b"X-Remote-User", b"alice"), (b"x-remote-group", b"dev"),
               (b"X-REMOTE-GROUP", b"system:authenticated"), (b"x-remote-uid", b"42"),
               (b"X-Remote-Extra-Scopes", b"a"), (b"x-remote-extra-scopes", b"b"), (b"x-remotely", b"no"),
               (b"x-remot", b"short"), (b"accept", b"*/*")]
    got = user.from_headers(headers)
    assert got == user.UserInfo("alice", ("dev", "system:authenticated"), "42", {"scopes": ["a", "b"]})
    assert user.from_headers([(b"x-remote-group", b"dev"), (b"host", b"x")]) is None  # no user: nobody


# -- a create's schema walk, once --------------------------------------------------------------------

def configmap(**data: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"},
            "data": data or {"k": "v"}}


def service(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"},
            "spec": spec or {"ports": [{"port": 80}]}}


def test_a_clean_body_is_clean() -> None:
    warnings, clean = fieldvalidation.check_fields_clean(strategy("", "ConfigMap"), configmap(), "Warn", [])
    assert warnings == [] and clean


@pytest.mark.parametrize("obj,mode", [
    ({**configmap(), "bogus": 1}, "Warn"),                                  # an unknown field (pruned)
    ({**configmap(), "bogus": 1}, "Ignore"),
    ({**configmap(), "metadata": {"name": "c", "labels": {}}}, "Warn"),    # rewritten (omitempty)
    (service(ports=[{"protocol": "TCP"}]), "Warn"),                         # spec.ports[0].port required
    ({**configmap(), "metadata": {"name": "c", "ownerReferences": [{"kind": "X"}]}}, "Warn"),  # its uid, ...
])
def test_a_body_the_walk_found_something_in_is_not_clean(obj: dict[str, Any], mode: str) -> None:
    kind = obj["kind"]
    _, clean = fieldvalidation.check_fields_clean(strategy("", kind), obj, mode, [])
    assert not clean


def test_a_custom_resource_strategy_is_never_clean() -> None:
    st = strategy("", "ConfigMap")

    class Own(type(st)):  # type: ignore[misc]
        def prune_unknown_fields(self, obj: dict[str, Any]) -> list[str] | None:
            return []

    own = Own(st.info, SCHEMAS)
    assert fieldvalidation.check_fields_clean(own, configmap(), "Warn", []) == ([], False)


def test_check_fields_still_answers_warnings_and_strict() -> None:
    st = strategy("", "ConfigMap")
    assert fieldvalidation.check_fields(st, {**configmap(), "bogus": 1}, "Warn", []) == ['unknown field "bogus"']
    with pytest.raises(APIError) as err:
        fieldvalidation.check_fields(st, {**configmap(), "bogus": 1}, "Strict", [])
    assert err.value.code == 400


def snapshot(obj: dict[str, Any]) -> Any:
    st = strategy("", obj["kind"])
    snap = FieldTracker(st).before_admission(obj, Writer("test"))
    assert snap is not None
    return snap


def test_same_but_metadata_ignores_only_server_set_metadata() -> None:
    body = configmap()
    snap = snapshot(body)
    created = copy.deepcopy(body)
    created["metadata"].update(uid=new_uid(), creationTimestamp="2026-01-01T00:00:00Z", resourceVersion="5",
                               managedFields=[{"manager": "test", "operation": "Update"}], name="other")
    assert snap.same_but_metadata(created)
    assert same_but_server_metadata(created, body)
    for change in (lambda o: o["data"].update(k="w"), lambda o: o["metadata"].update(labels={"a": "b"}),
                   lambda o: o.update(immutable=True), lambda o: o.pop("data"),
                   lambda o: o["metadata"].update(ownerReferences=[{"kind": "X"}]),
                   lambda o: o.update(metadata=[])):
        changed = copy.deepcopy(created)
        change(changed)
        assert not snap.same_but_metadata(changed)
        assert not same_but_server_metadata(changed, body)


def test_validate_schema_clean_is_validate_for_a_clean_object() -> None:
    for obj in (configmap(), service(), {**configmap(), "metadata": {"name": "Bad_Name", "namespace": "ns"}},
                {**configmap(), "data": {"bad key!": "v"}}):
        st = strategy("", obj["kind"])
        assert st.validate_schema_clean(obj) == st.validate(obj)


def test_validate_schema_clean_defers_to_a_kind_with_its_own_validate() -> None:
    st = strategy("batch", "Job")
    assert type(st).validate is not BuiltinStrategy.validate
    calls: list[dict[str, Any]] = []
    real = st.validate

    def validate(obj: dict[str, Any]) -> Any:
        calls.append(obj)
        return real(obj)

    st.validate = validate
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"}, "spec": {}}
    assert st.validate_schema_clean(job) == real(job) and calls == [job]


def test_the_request_records_its_clean_body_for_the_length_of_the_write() -> None:
    scope = RequestAdmission()
    assert scope.schema_clean is None
    token = request_admission.set(scope)
    try:
        body = configmap()
        scope.schema_clean = body
        got = request_admission.get()
        assert got is not None and got.schema_clean is body
    finally:
        request_admission.reset(token)
    assert request_admission.get() is None


def _manager_the_long_way(user_agent: str) -> str:
    """kube's prefixFromUserAgent, character by character (what the fast path must agree with)."""
    out, size = [], 0
    for ch in user_agent.split("/", 1)[0]:
        if not ch.isprintable():
            continue
        if size + len(ch.encode()) > 128:
            break
        out.append(ch)
        size += len(ch.encode())
    return "".join(out)


@pytest.mark.parametrize("agent", ["kubectl/v1.33.0 (linux/amd64) kubernetes/abc", "OpenAPI-Generator/33.1.0/python",
                                   "", "/x", "noslash", "a" * 128, "a" * 129 + "/v", "é" * 70 + "/x", "a\tb\x00c/d",
                                   "tab\there", "x" * 127 + "é"])
def test_manager_from_user_agent_fast_path_agrees(agent: str) -> None:
    from genericapi.apimachinery.fieldmanager.managers import manager_from_user_agent
    assert manager_from_user_agent(agent) == _manager_the_long_way(agent)


# -- reading the body --------------------------------------------------------------------------------

def _request(messages: list[dict[str, Any]], headers: list[tuple[bytes, bytes]] | None = None) -> Any:
    from starlette.requests import Request

    pending = list(messages)

    async def receive() -> dict[str, Any]:
        return pending.pop(0)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers or [], "query_string": b""}
    return Request(scope, receive)


def test_read_bytes_joins_the_chunks_and_keeps_them_for_body() -> None:
    import asyncio

    from genericapi.handlers.body import read_bytes

    async def run() -> None:
        request = _request([{"type": "http.request", "body": b'{"a":', "more_body": True},
                            {"type": "http.request", "body": b"", "more_body": True},
                            {"type": "http.request", "body": b"1}", "more_body": False}])
        assert await read_bytes(request) == b'{"a":1}'
        assert await read_bytes(request) == b'{"a":1}'  # kept: no second read of the transport
        assert await request.body() == b'{"a":1}'
        assert [c async for c in request.stream()] == [b'{"a":1}', b""]
        single = _request([{"type": "http.request", "body": b"x"}])  # more_body absent: the last
        assert await read_bytes(single) == b"x"

    asyncio.run(run())


def test_read_bytes_refuses_too_large_bodies_and_reports_disconnects() -> None:
    import asyncio

    from genericapi.handlers.body import MAX_BODY_BYTES, read_bytes
    from starlette.requests import ClientDisconnect

    async def run() -> None:
        big = b"x" * (MAX_BODY_BYTES // 2 + 1)
        request = _request([{"type": "http.request", "body": big, "more_body": True},
                            {"type": "http.request", "body": big, "more_body": True}])
        with pytest.raises(APIError) as err:
            await read_bytes(request)
        assert err.value.code == 413
        declared = _request([], headers=[(b"content-length", str(MAX_BODY_BYTES + 1).encode())])
        with pytest.raises(APIError) as err:
            await read_bytes(declared)
        assert err.value.code == 413
        gone = _request([{"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}])
        with pytest.raises(ClientDisconnect):
            await read_bytes(gone)
        consumed = _request([{"type": "http.request", "body": b"{}"}])
        assert [c async for c in consumed.stream()] == [b"{}", b""]  # read elsewhere and not kept
        with pytest.raises(RuntimeError, match="Stream consumed"):
            await read_bytes(consumed)

    asyncio.run(run())


def test_server_set_metadata_has_no_required_field_or_enum_in_the_schema() -> None:
    """What ``same_but_server_metadata`` may ignore: a walk can find no required or enum error in it."""
    defs = SCHEMAS.definitions
    meta = defs["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
    assert not meta.get("required")
    for key in SERVER_SET_METADATA:
        prop = meta["properties"][key]
        assert "enum" not in prop
        ref = (prop.get("items") or {}).get("$ref", "") or prop.get("$ref", "")
        if ref:
            target = defs[ref.rsplit("/", 1)[-1]]
            assert not target.get("required") and not any("enum" in p for p in target.get("properties", {}).values())


def test_validate_update_schema_clean_is_validate_update_for_a_clean_object() -> None:
    old = configmap()
    old["metadata"].update(uid="u", resourceVersion="3")
    for new in (configmap(k="w"), {**configmap(), "immutable": True},
                {**configmap(), "metadata": {"name": "c", "namespace": "ns", "labels": {"bad key!": "x"}}}):
        st = strategy("", "ConfigMap")
        assert st.validate_update_schema_clean(new, old) == st.validate_update(new, old)
    immutable = {**old, "immutable": True}
    st = strategy("", "ConfigMap")
    got = st.validate_update_schema_clean(configmap(k="changed"), immutable)
    assert got == st.validate_update(configmap(k="changed"), immutable) and got  # the kind's own rule still runs
