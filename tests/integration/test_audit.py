"""Audit logging end to end, as kube-apiserver's ``--audit-*`` flags give it: the gateway writes the
one event of each request, whatever the number of hops.

The session chain runs ``kubechain up``'s default policy (Metadata for everything, nothing for
health probes, RequestReceived omitted): a custom resource through extensions-api is one event, a
watch has ResponseStarted, failed authentication and impersonation are recorded as kube records them,
kubectl's user agent is kept, Secrets never get bodies, admission annotations from core-api arrive.
A chain of its own runs a policy with every level, omitStages and omitManagedFields, a 1 MB log
that rotates, and a webhook backend delivering to a test receiver over real HTTP.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.procs import ChainHandle, kubectl_params, start_chain

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration

Event = dict[str, Any]


def read_events(paths: list[Path]) -> list[Event]:
    """Every complete event in ``paths``. A line the writer thread is still appending (a 300 kB
    RequestResponse event reaches the page cache in pieces) has no newline yet and is left for the
    next read, as a log shipper tailing the file would."""
    out: list[Event] = []
    for path in paths:
        if path.exists():
            text = path.read_text()
            complete = text[:text.rfind("\n") + 1]
            out.extend(json.loads(line) for line in complete.splitlines() if line.strip())
    return out


def wait_events(log: Callable[[], list[Event]], match: Callable[[Event], bool], count: int = 1,
                timeout: float = 20) -> list[Event]:
    """The events ``match`` selects, once at least ``count`` are written (the writer is asynchronous)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [e for e in log() if match(e)]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def by_id(audit_id: str) -> Callable[[Event], bool]:
    return lambda e: e["auditID"] == audit_id


def session_log(chain: ChainHandle) -> Callable[[], list[Event]]:
    return lambda: read_events([chain.chain.audit_log(0)])


CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.audit.a17.example.com}
spec:
  group: audit.a17.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


def test_a_custom_resource_through_two_hops_is_one_event(chain: ChainHandle) -> None:
    chain.kubectl("apply", "-f", "-", input=CRD)
    chain.kubectl("wait", "--for", "condition=Established", "crd/widgets.audit.a17.example.com", "--timeout=20s")
    audit_id = f"a17-cr-{uuid.uuid4()}"
    body = {"apiVersion": "audit.a17.example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
            "spec": {"size": 3}}
    status, headers, _ = chain.request("POST", "/apis/audit.a17.example.com/v1/namespaces/default/widgets", body,
                                       headers={"Audit-ID": audit_id})
    assert status == 201
    assert headers["audit-id"] == audit_id  # a client's Audit-ID is kept, as kube keeps it
    assert "x-kubechain-audit-annotations" not in headers
    time.sleep(1.0)  # a second event, if any hop wrote one, would have been written by now
    events = wait_events(session_log(chain), by_id(audit_id))
    assert len(events) == 1, events
    [event] = events
    assert event["stage"] == "ResponseComplete" and event["level"] == "Metadata" and event["verb"] == "create"
    assert event["objectRef"] == {"resource": "widgets", "namespace": "default", "name": "w1",
                                  "apiGroup": "audit.a17.example.com", "apiVersion": "v1"}
    assert event["responseStatus"] == {"metadata": {}, "code": 201}
    assert event["requestURI"] == "/apis/audit.a17.example.com/v1/namespaces/default/widgets"
    assert event["user"]["username"] == "kubernetes-admin"
    assert event["sourceIPs"] == ["127.0.0.1"]
    assert "requestObject" not in event and "responseObject" not in event
    assert event["annotations"]["authorization.k8s.io/decision"] == "allow"


def test_every_response_has_an_audit_id(chain: ChainHandle) -> None:
    status, headers, _ = chain.request("GET", "/healthz")  # level None: no event, still the header
    assert status == 200 and uuid.UUID(headers["audit-id"])
    status, headers, _ = chain.request("GET", "/api/v1/namespaces/default", auth=False,
                                       headers={"Authorization": "Bearer not-a-token"})
    assert status == 401 and uuid.UUID(headers["audit-id"])
    # No credentials: system:anonymous refused by authorization (kube's --anonymous-auth=true, 403) or
    # by authentication (false, 401); the header either way.
    status, headers, _ = chain.request("GET", "/api/v1/namespaces/default", auth=False)
    assert status in (401, 403) and uuid.UUID(headers["audit-id"])
    first = chain.request("GET", "/version")[1]["audit-id"]
    assert first != chain.request("GET", "/version")[1]["audit-id"]


def test_failed_authentication_as_kube_records_it(chain: ChainHandle) -> None:
    audit_id = f"a17-401-{uuid.uuid4()}"
    status, headers, _ = chain.request("GET", "/api/v1/namespaces/default/pods", auth=False,
                                       headers={"Authorization": "Bearer not-a-token", "Audit-ID": audit_id,
                                                "X-Forwarded-For": "203.0.113.9"})
    assert status == 401 and headers["audit-id"] == audit_id
    [event] = wait_events(session_log(chain), by_id(audit_id))
    assert event["stage"] == "ResponseStarted"  # kube's WithFailedAuthenticationAudit: one event, this stage
    assert event["user"] == {} and event["verb"] == "list"
    assert event["responseStatus"] == {"metadata": {}, "message": "Authentication failed, attempted: bearer",
                                       "code": 401}
    assert event["sourceIPs"] == ["203.0.113.9", "127.0.0.1"]
    assert "annotations" not in event


def test_an_impersonated_request(chain: ChainHandle) -> None:
    proc = chain.kubectl("get", "configmaps", "a17-imp", "-n", "default", "--as=a17-someone", "--as-group=a17-team",
                         check=False)
    assert "forbidden" in proc.stderr
    [event] = wait_events(session_log(chain), lambda e: e["requestURI"] == "/api/v1/namespaces/default/configmaps/"
                          "a17-imp" and "impersonatedUser" in e)
    assert event["user"]["username"] == "kubernetes-admin"  # the policy and the event name who authenticated
    assert event["impersonatedUser"] == {"username": "a17-someone", "groups": ["a17-team", "system:authenticated"]}
    assert event["responseStatus"]["code"] == 403 and event["responseStatus"]["reason"] == "Forbidden"
    assert event["annotations"]["authorization.k8s.io/decision"] == "forbid"


def test_a_watch_has_response_started(chain: ChainHandle) -> None:
    audit_id = f"a17-watch-{uuid.uuid4()}"
    status, _, _ = chain.request("GET", "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1",
                                 headers={"Audit-ID": audit_id})
    assert status == 200
    events = wait_events(session_log(chain), by_id(audit_id), count=2)
    assert [e["stage"] for e in events] == ["ResponseStarted", "ResponseComplete"]
    assert all(e["verb"] == "watch" and e["responseStatus"] == {"metadata": {}, "code": 200} for e in events)
    assert events[0]["stageTimestamp"] < events[1]["stageTimestamp"]
    assert events[0]["requestReceivedTimestamp"] == events[1]["requestReceivedTimestamp"]


@pytest.mark.parametrize("version", kubectl_params("1.33", "1.27"))
def test_kubectl_requests_appear_with_their_user_agent(chain: ChainHandle, version: str) -> None:
    name = f"a17-ua-{version.replace('.', '-')}"
    chain.kubectl("create", "configmap", name, "-n", "default", "--from-literal=k=v", version=version)
    chain.kubectl("get", "configmap", name, "-n", "default", "-o", "name", version=version)
    minor = version.split(".")[1]

    def mine(e: Event) -> bool:
        ref = e.get("objectRef") or {}
        return ref.get("resource") == "configmaps" and (ref.get("name") == name or
                                                        f"/configmaps/{name}" in e["requestURI"])

    events = wait_events(session_log(chain), mine, count=2)
    assert [e["verb"] for e in events] == ["create", "get"]
    for e in events:
        assert e["userAgent"].startswith("kubectl") and f"/v1.{minor}." in e["userAgent"], e["userAgent"]
    # kubectl 1.33 sends the create as protobuf: the name still completes objectRef, as kube decodes it
    assert events[0]["objectRef"]["name"] == name


def test_secrets_never_get_bodies_with_the_default_policy(chain: ChainHandle) -> None:
    secret_value = f"a17-{uuid.uuid4()}"
    chain.kubectl("create", "secret", "generic", "a17-secret", "-n", "default", f"--from-literal=token={secret_value}")
    out = chain.kubectl("get", "secret", "a17-secret", "-n", "default", "-o", "json").stdout
    assert base64.b64encode(secret_value.encode()).decode() in out
    events = wait_events(session_log(chain), lambda e: (e.get("objectRef") or {}).get("resource") == "secrets"
                         and (e.get("objectRef") or {}).get("name") == "a17-secret", count=2)
    assert {e["verb"] for e in events} >= {"create", "get"}
    assert all(e["level"] == "Metadata" and "requestObject" not in e and "responseObject" not in e for e in events)
    text = chain.chain.audit_log(0).read_text()
    assert secret_value not in text and base64.b64encode(secret_value.encode()).decode() not in text


POLICY_WITH_AUDIT_ANNOTATIONS = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: a17-audit-annotations}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  auditAnnotations:
  - {key: seen, valueExpression: "'configmap ' + object.metadata.name"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: a17-audit-annotations}
spec:
  policyName: a17-audit-annotations
  validationActions: [Audit]
  matchResources:
    namespaceSelector: {matchLabels: {a17-audit: "yes"}}
"""


def test_admission_annotations_from_core_api_join_the_event(chain: ChainHandle) -> None:
    chain.kubectl("create", "namespace", "a17-vap")
    chain.kubectl("label", "namespace", "a17-vap", "a17-audit=yes")
    chain.kubectl("apply", "-f", "-", input=POLICY_WITH_AUDIT_ANNOTATIONS)
    annotated: list[Event] = []
    deadline = time.monotonic() + 30
    n = 0
    while not annotated and time.monotonic() < deadline:  # the policy takes effect once core-api has read it
        n += 1
        audit_id = f"a17-vap-{uuid.uuid4()}"
        status, headers, _ = chain.request("POST", "/api/v1/namespaces/a17-vap/configmaps",
                                           {"metadata": {"name": f"c{n}"}}, headers={"Audit-ID": audit_id})
        assert status == 201 and "x-kubechain-audit-annotations" not in headers  # stripped at the gateway
        [event] = wait_events(session_log(chain), by_id(audit_id))
        if "a17-audit-annotations/seen" in event.get("annotations", {}):
            annotated.append(event)
        else:
            time.sleep(0.5)
    assert annotated, "the ValidatingAdmissionPolicy's audit annotation never reached the event"
    assert annotated[0]["annotations"]["a17-audit-annotations/seen"] == f"configmap c{n}"
    assert annotated[0]["annotations"]["authorization.k8s.io/decision"] == "allow"
    chain.kubectl("delete", "-f", "-", input=POLICY_WITH_AUDIT_ANNOTATIONS)


# -- a chain of its own: levels, stages, rotation, webhook ------------------------------------------

CUSTOM_POLICY = """
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: None
    users: ["system:apiserver"]
  - level: RequestResponse
    namespaces: ["a17-rr"]
    omitManagedFields: true
  - level: Request
    namespaces: ["a17-req"]
    omitStages: [ResponseComplete]
  - level: Metadata
    namespaces: ["a17-meta"]
  - level: None
"""


class Receiver(BaseHTTPRequestHandler):
    """The audit webhook: every EventList POSTed is kept."""

    lists: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Receiver.lists.append(json.loads(body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ChainHandle, Path]]:
    data = tmp_path_factory.mktemp("audited-chain")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    (data / "policy.yaml").write_text(CUSTOM_POLICY)
    (data / "webhook.kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: audit\n"
        f"clusters: [{{name: sink, cluster: {{server: 'http://127.0.0.1:{server.server_address[1]}/events'}}}}]\n"
        "users: [{name: gw, user: {}}]\ncontexts: [{name: audit, context: {cluster: sink, user: gw}}]\n")
    log = data / "audit" / "audit.log"
    chain = Chain(data / "chain", port=free_port(), audit_policy=str(data / "policy.yaml"),
                  audit_flags=["--audit-log-path", str(log), "--audit-log-maxsize", "1", "--audit-log-maxbackup", "2",
                               "--audit-webhook-config-file", str(data / "webhook.kubeconfig"),
                               "--audit-webhook-batch-max-wait", "500ms"])
    handle = start_chain(chain)
    for ns in ("a17-rr", "a17-req", "a17-meta"):
        handle.kubectl("create", "namespace", ns)
    yield handle, log
    chain.stop()
    server.shutdown()


def all_logs(log: Path) -> Callable[[], list[Event]]:
    return lambda: read_events([*sorted(log.parent.glob("audit-*.log")), log])


def test_levels_and_stages(audited: tuple[ChainHandle, Path]) -> None:
    chain, log = audited
    ids = {}
    for ns in ("a17-rr", "a17-req", "a17-meta", "default"):
        ids[ns] = f"a17-{ns}-{uuid.uuid4()}"
        status, _, _ = chain.request("POST", f"/api/v1/namespaces/{ns}/configmaps",
                                     {"metadata": {"name": "levels"}, "data": {"k": "v"}},
                                     headers={"Audit-ID": ids[ns]})
        assert status == 201
    rr = wait_events(all_logs(log), by_id(ids["a17-rr"]), count=2)
    assert [e["stage"] for e in rr] == ["RequestReceived", "ResponseComplete"]
    assert "requestObject" not in rr[0] and "responseStatus" not in rr[0]  # the body is read later
    done = rr[1]
    assert done["level"] == "RequestResponse"
    assert done["requestObject"] == {"metadata": {"name": "levels"}, "data": {"k": "v"}}
    assert done["responseObject"]["metadata"]["name"] == "levels"
    assert "managedFields" not in done["responseObject"]["metadata"]  # omitManagedFields
    assert done["objectRef"]["name"] == "levels"
    req = wait_events(all_logs(log), by_id(ids["a17-req"]))
    time.sleep(1.0)
    req = [e for e in all_logs(log)() if e["auditID"] == ids["a17-req"]]
    assert [e["stage"] for e in req] == ["RequestReceived"]  # the rule omits ResponseComplete
    assert req[0]["level"] == "Request"
    meta = wait_events(all_logs(log), by_id(ids["a17-meta"]), count=2)
    assert [e["level"] for e in meta] == ["Metadata", "Metadata"]
    assert all("requestObject" not in e and "responseObject" not in e for e in meta)
    assert meta[1]["objectRef"]["name"] == "levels"  # completed from the body at Metadata too
    assert [e for e in all_logs(log)() if e["auditID"] == ids["default"]] == []  # level None
    # the webhook backend got the same events, as EventLists
    delivered = wait_events(lambda: [i for x in Receiver.lists for i in x["items"]],
                            lambda e: e["auditID"] in ids.values(), count=5)
    assert sorted((e["auditID"], e["stage"]) for e in delivered) == sorted(
        (e["auditID"], e["stage"]) for e in all_logs(log)() if e["auditID"] in ids.values())
    assert all(x["kind"] == "EventList" and x["apiVersion"] == "audit.k8s.io/v1" for x in Receiver.lists)


def test_the_log_rotates_with_kubes_names(audited: tuple[ChainHandle, Path]) -> None:
    chain, log = audited
    big = "x" * 300_000
    status, _, _ = chain.request("POST", "/api/v1/namespaces/a17-rr/configmaps",
                                 {"metadata": {"name": "big"}, "data": {"k": big}})
    assert status == 201
    ids = []
    for _ in range(6):  # ~300 kB per event at RequestResponse: several 1 MB files
        ids.append(f"a17-rotate-{uuid.uuid4()}")
        status, _, _ = chain.request("GET", "/api/v1/namespaces/a17-rr/configmaps/big", headers={"Audit-ID": ids[-1]})
        assert status == 200
    wait_events(all_logs(log), lambda e: e["auditID"] == ids[-1] and e["stage"] == "ResponseComplete")
    backups = sorted(p.name for p in log.parent.glob("audit-*.log"))
    assert 1 <= len(backups) <= 2, backups  # --audit-log-maxbackup 2
    for name in backups:
        assert re.fullmatch(r"audit-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}\.log", name), name
        assert (log.parent / name).stat().st_size <= 1024 * 1024
    assert log.stat().st_size <= 1024 * 1024
    assert ids[-1] in log.read_text() or any(ids[-1] in (log.parent / n).read_text() for n in backups)


def test_a_bad_policy_stops_the_gateway_with_kubes_message(tmp_path: Path) -> None:
    import subprocess
    import sys
    policy = tmp_path / "bad.yaml"
    policy.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n")
    proc = subprocess.run([sys.executable, "-m", "aggregator", "--secure-port", str(free_port()),
                           "--cert-dir", str(tmp_path / "pki"), "--audit-policy-file", str(policy),
                           "--audit-log-path", str(tmp_path / "a.log")], capture_output=True, text=True,
                          timeout=300)  # start-up (imports, certificates) is slow on a loaded machine
    assert proc.returncode != 0
    assert (f'loading audit policy file: rules[0].level: Unsupported value: "Loud": supported values: "Metadata", '
            f'"None", "Request", "RequestResponse": from file {policy}') in proc.stderr
