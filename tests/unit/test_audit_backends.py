"""Audit events and backends without a chain: kube's Event JSON, source IPs, the legacy line, log
rotation named as lumberjack names it, the bounded queue's drops, and webhook batching and retries
against a real HTTP receiver."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aggregator.audit import event as ev
from aggregator.audit import logbackend, sink, webhook
from aiohttp import web
from genericapi.apimachinery.user import UserInfo

ADMIN = UserInfo("admin", ("system:masters", "system:authenticated"))


def make_event(level: str = "Metadata", **changes: Any) -> ev.Event:
    event = ev.Event(level, "id-1", "/api/v1/namespaces/default/configmaps", "create", ADMIN, ["10.0.0.1"],
                     "kubectl/v1.33.1", ("configmaps", "default", "", "", "v1", ""), 1_700_000_000.5)
    for key, value in changes.items():
        setattr(event, key, value)
    return event


def test_event_json_in_kubes_field_order() -> None:
    event = make_event(response_status={"code": 201}, annotations={"authorization.k8s.io/decision": "allow"},
                       request_body=b'{"metadata":{"name":"c1","resourceVersion":"7","uid":"u1"}}',
                       request_type="application/json", complete_ref=True)
    doc = ev.render(event.snapshot("ResponseComplete"))
    assert list(doc) == ["kind", "apiVersion", "level", "auditID", "stage", "requestURI", "verb", "user", "sourceIPs",
                         "userAgent", "objectRef", "responseStatus", "requestReceivedTimestamp", "stageTimestamp",
                         "annotations"]
    assert doc["kind"] == "Event" and doc["apiVersion"] == "audit.k8s.io/v1"
    assert doc["user"] == {"username": "admin", "groups": ["system:masters", "system:authenticated"]}
    # the request body completes objectRef (kube's LogRequestObject), at Metadata without logging the body
    assert list(doc["objectRef"].items()) == [("resource", "configmaps"), ("namespace", "default"), ("name", "c1"),
                                              ("uid", "u1"), ("apiVersion", "v1"), ("resourceVersion", "7")]
    assert "requestObject" not in doc
    assert doc["responseStatus"] == {"metadata": {}, "code": 201}
    assert doc["requestReceivedTimestamp"] == "2023-11-14T22:13:20.500000Z"
    assert doc["stageTimestamp"].endswith("Z") and len(doc["stageTimestamp"]) == 27


def test_bodies_by_level_and_managed_fields_omitted() -> None:
    body = b'{"kind":"ConfigMap","metadata":{"name":"c1","managedFields":[{"manager":"kubectl"}]}}'
    listing = b'{"kind":"ConfigMapList","items":[{"metadata":{"name":"a","managedFields":[]}}]}'
    request = make_event("Request", request_body=body, request_type="application/json", response_body=listing,
                         response_type="application/json", response_status={"code": 200})
    doc = ev.render(request.snapshot("ResponseComplete"))
    assert doc["requestObject"]["metadata"]["managedFields"] == [{"manager": "kubectl"}]
    assert "responseObject" not in doc  # Request level: the request's body only
    full = make_event("RequestResponse", request_body=body, request_type="application/json", response_body=listing,
                      response_type="application/json; charset=utf-8", response_status={"code": 200},
                      omit_managed_fields=True)
    doc = ev.render(full.snapshot("ResponseComplete"))
    assert doc["requestObject"]["metadata"] == {"name": "c1"}
    assert doc["responseObject"]["items"] == [{"metadata": {"name": "a"}}]


def test_failure_status_is_copied_from_the_body() -> None:
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "nope",
              "reason": "NotFound", "details": {"name": "x", "kind": "configmaps"}, "code": 404}
    event = make_event(response_status={"code": 404}, response_body=orjson.dumps(status),
                       response_type="application/json", status_from_body=True)
    doc = ev.render(event.snapshot("ResponseComplete"))
    assert doc["responseStatus"] == {"metadata": {}, "status": "Failure", "message": "nope", "reason": "NotFound",
                                     "details": {"name": "x", "kind": "configmaps"}, "code": 404}
    assert "responseObject" not in doc


def test_source_ips_as_kube_reads_them() -> None:
    assert ev.source_ips([], "127.0.0.1") == ["127.0.0.1"]
    headers = [(b"x-forwarded-for", b"203.0.113.7, bogus, 10.1.1.1"), (b"x-real-ip", b"10.1.1.1")]
    assert ev.source_ips(headers, "10.1.1.1") == ["203.0.113.7", "10.1.1.1"]  # no repeats at the end
    assert ev.source_ips([(b"x-real-ip", b"::1")], "127.0.0.1") == ["::1", "127.0.0.1"]


def test_user_agent_is_truncated_as_kube_does() -> None:
    long = b"x" * 2000
    assert ev.user_agent([(b"user-agent", long)]) == "x" * 1024 + "...TRUNCATED"


def test_legacy_line() -> None:
    doc = ev.render(make_event(response_status={"code": 201}).snapshot("ResponseComplete"))
    assert ev.legacy_line(doc) == (
        '2023-11-14T22:13:20.5Z AUDIT: id="id-1" stage="ResponseComplete" ip="10.0.0.1" method="create" '
        'user="admin" groups="\\"system:masters\\",\\"system:authenticated\\"" as="<self>" asgroups="<lookup>" '
        'user-agent="kubectl/v1.33.1" namespace="default" uri="/api/v1/namespaces/default/configmaps" '
        'response="201"')


def test_rotation_names_backups_and_prunes_them(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    rotating = logbackend.RotatingFile(str(path), max_size_mb=1, max_backups=2)
    line = b"x" * 1023 + b"\n"
    for _ in range(4):  # 4 MiB through a 1 MiB file: 3 rotations
        for _ in range(1024):
            rotating.write(line)
        time.sleep(0.002)  # backup names differ by the millisecond
    rotating.close()
    backups = sorted(p.name for p in tmp_path.iterdir() if p.name != "audit.log")
    assert len(backups) == 2  # --audit-log-maxbackup
    for name in backups:
        assert logbackend.re.fullmatch(r"audit-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}\.log", name), name
        assert (tmp_path / name).stat().st_size == 1024 * 1024
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_rotation_by_age_and_compression(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    old = logbackend.backup_name(path, time.time() - 3 * 86400)
    old.write_text("old\n")
    rotating = logbackend.RotatingFile(str(path), max_size_mb=1, max_age_days=1, compress=True)
    path.write_bytes(b"y" * (1024 * 1024 - 10))
    rotating.write(b"z" * 100)  # the existing file is full: rotated first
    rotating.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert old.name not in names  # older than --audit-log-maxage
    [gz] = [n for n in names if n.endswith(".log.gz")]
    assert gzip.decompress((tmp_path / gz).read_bytes()) == b"y" * (1024 * 1024 - 10)
    assert path.read_bytes() == b"z" * 100


def test_log_backend_writes_json_lines(tmp_path: Path) -> None:
    backend = logbackend.LogBackend(str(tmp_path / "a.log"))
    audit = sink.AuditSink([backend])
    audit.start()
    for i in range(3):
        audit.process(make_event(audit_id=f"id-{i}", response_status={"code": 200}).snapshot("ResponseComplete"))
    audit.stop()
    lines = (tmp_path / "a.log").read_bytes().splitlines()
    assert [orjson.loads(line)["auditID"] for line in lines] == ["id-0", "id-1", "id-2"]
    with pytest.raises(ValueError, match='invalid audit log format yaml, allowed formats are "json,legacy"'):
        logbackend.LogBackend(str(tmp_path / "b.log"), "yaml")


def test_a_full_queue_drops_and_counts() -> None:
    audit = sink.AuditSink([], buffer_size=2)  # never started: nothing takes events off
    before_events = sink.EVENTS.value
    before_errors = sink.BUFFERED_ERRORS._value.get()
    for _ in range(5):
        audit.process(make_event().snapshot("ResponseComplete"))
    assert sink.EVENTS.value - before_events == 5  # apiserver_audit_event_total counts every event
    assert sink.BUFFERED_ERRORS._value.get() - before_errors == 3  # apiserver_audit_error_total{plugin="buffered"}


class Receiver:
    """A real HTTP audit webhook: records EventLists, fails the first ``fail`` posts with 503."""

    def __init__(self, fail: int = 0) -> None:
        self.lists: list[dict[str, Any]] = []
        self.fail = fail
        self.posts = 0
        self.auth: list[str] = []
        self.changed = asyncio.Event()

    async def until(self, done: Callable[[], bool]) -> None:
        """Wait (at most 10 s) until ``done()`` holds, re-checking after every post."""
        deadline = time.monotonic() + 10.0
        while not done() and time.monotonic() < deadline:
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), max(0.0, deadline - time.monotonic()))

    async def handle(self, request: web.Request) -> web.Response:
        self.changed.set()
        self.posts += 1
        self.auth.append(request.headers.get("Authorization", ""))
        if self.posts <= self.fail:
            return web.Response(status=503)
        self.lists.append(await request.json())
        return web.Response(status=200)


async def _serve(receiver: Receiver) -> tuple[web.AppRunner, int]:
    app = web.Application()
    app.router.add_post("/audit", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port


def _kubeconfig(tmp_path: Path, port: int) -> str:
    path = tmp_path / "webhook.kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: audit, cluster: {{server: "http://127.0.0.1:{port}/audit"}}}}]
users: [{{name: gateway, user: {{token: s3cret}}}}]
contexts: [{{name: default, context: {{cluster: audit, user: gateway}}}}]
current-context: default
""")
    return str(path)


def test_webhook_batches_by_size_and_wait(tmp_path: Path) -> None:
    async def scenario() -> Receiver:
        receiver = Receiver()
        runner, port = await _serve(receiver)
        hook = webhook.WebhookBackend(webhook.load_kubeconfig(_kubeconfig(tmp_path, port)), max_size=3,
                                      max_wait=0.3, throttle=False)
        await hook.start()
        audit = sink.AuditSink([hook])
        audit.start()
        for i in range(4):
            audit.process(make_event(audit_id=f"id-{i}", response_status={"code": 200}).snapshot("ResponseComplete"))
        await receiver.until(lambda: sum(len(x["items"]) for x in receiver.lists) >= 4)
        await asyncio.to_thread(audit.stop)
        await hook.stop()
        await runner.cleanup()
        return receiver

    receiver = asyncio.run(scenario())
    assert [len(x["items"]) for x in receiver.lists] == [3, 1]  # full batch at once, the rest after max-wait
    first = receiver.lists[0]
    assert (first["kind"], first["apiVersion"], first["metadata"]) == ("EventList", "audit.k8s.io/v1", {})
    assert [i["auditID"] for x in receiver.lists for i in x["items"]] == ["id-0", "id-1", "id-2", "id-3"]
    assert set(receiver.auth) == {"Bearer s3cret"}


def test_webhook_retries_then_counts_a_lost_batch(tmp_path: Path) -> None:
    async def scenario(fail: int) -> tuple[Receiver, float]:
        receiver = Receiver(fail=fail)
        runner, port = await _serve(receiver)
        hook = webhook.WebhookBackend(webhook.load_kubeconfig(_kubeconfig(tmp_path, port)), max_size=1,
                                      max_wait=0.1, throttle=False, initial_backoff=0.05)
        await hook.start()
        errors = sink.ERRORS.labels("webhook")._value.get()
        hook.write([ev.render(make_event(response_status={"code": 200}).snapshot("ResponseComplete"))])
        await receiver.until(lambda: receiver.posts >= min(fail + 1, webhook.RETRY_STEPS))
        await asyncio.sleep(0.3)
        await hook.stop()
        await runner.cleanup()
        return receiver, sink.ERRORS.labels("webhook")._value.get() - errors

    receiver, lost = asyncio.run(scenario(fail=2))
    assert receiver.posts == 3 and len(receiver.lists) == 1 and lost == 0  # two 503s, then delivered
    receiver, lost = asyncio.run(scenario(fail=100))
    assert receiver.posts == webhook.RETRY_STEPS and receiver.lists == [] and lost == 1


def test_webhook_kubeconfig_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.kubeconfig"
    empty.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    with pytest.raises(webhook.WebhookConfigError, match="no configuration has been provided"):
        webhook.load_kubeconfig(str(empty))
    with pytest.raises(webhook.WebhookConfigError, match="invalid configuration"):
        webhook.load_kubeconfig(str(tmp_path / "missing"))


def test_webhook_throttle_spaces_batches() -> None:
    async def scenario() -> float:
        throttle = webhook._Throttle(qps=20, burst=2)
        started = time.monotonic()
        for _ in range(6):  # 2 at once, then 4 at 20/s
            await throttle.accept()
        return time.monotonic() - started

    assert asyncio.run(scenario()) >= 0.18


def test_options_validation_messages() -> None:
    from aggregator.audit.options import AuditOptions, build_audit
    bad = AuditOptions(policy_file="x", log_path="/tmp/x", log_maxage=-1, log_format="xml", log_mode="sometimes")
    assert bad.validate() == ["--audit-log-maxage -1 can't be a negative number",
                              'invalid audit log format xml, allowed formats are "json,legacy"',
                              'invalid audit log mode sometimes, allowed modes are "batch,blocking,blocking-strict"']
    with pytest.raises(SystemExit, match=r"^invalid audit options: --audit-log-maxage -1"):
        build_audit(bad, always_allow=True)
    assert build_audit(AuditOptions(log_path="/tmp/x"), always_allow=True) is None  # no policy: no auditing
