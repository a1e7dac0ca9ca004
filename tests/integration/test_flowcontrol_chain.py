"""API Priority and Fairness end to end (issue 17): a chain whose gateway has 30 seats
(``--max-requests-inflight 20 --max-mutating-requests-inflight 10``), kube 1.33's bootstrap objects
kept by core-api, a flood from one user answered 429 while another user's requests succeed,
system:masters exempt, watches holding no seat once started, the PF headers, the
``apiserver_flowcontrol_*`` metrics and debug dumps, FlowSchemas added with kubectl 1.27 and 1.33
changing classification, mandatory objects restored, and kube's field errors for bad objects.

The flood is made slow with the gateway's fault injection (a latency rule for the flooding user,
applied behind the APF filter, so each flood request holds its seat for the delay)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.procs import ChainHandle, kubectl_params, start_chain
from support.waiting import eventually

from kubechain_cli.chain import Chain, free_port
from kubechain_cli.faults import FaultClient, latency

pytestmark = pytest.mark.integration

FS_UID = "x-kubernetes-pf-flowschema-uid"
PL_UID = "x-kubernetes-pf-prioritylevel-uid"
MANDATORY_FS = {"exempt", "catch-all"}
SUGGESTED_FS = {"probes", "system-leader-election", "endpoint-controller", "workload-leader-election",
                "system-node-high", "system-nodes", "kube-controller-manager", "kube-scheduler",
                "kube-system-service-accounts", "service-accounts", "global-default"}
LEVELS = {"exempt", "catch-all", "system", "node-high", "leader-election", "workload-high", "workload-low",
          "global-default"}
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"

FLOOD = """\
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: flood}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    borrowingLimitPercent: 0
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: flood}
spec:
  priorityLevelConfiguration: {name: flood}
  matchingPrecedence: 500
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: User, user: {name: flooder}}]
    resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], clusterScope: true, namespaces: ["*"]}]
"""


@pytest.fixture(scope="module")
def apf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChainHandle]:
    data: Path = tmp_path_factory.mktemp("apf")
    c = Chain(data, port=free_port(), flowcontrol_flags=["--max-requests-inflight", "20",
                                                          "--max-mutating-requests-inflight", "10"])
    handle = start_chain(c)
    handle.kubectl("create", "clusterrolebinding", "apf-view", "--clusterrole=view", "--user=flooder",
                   "--user=bystander")
    handle.kubectl("apply", "-f", "-", input=FLOOD)
    yield handle
    c.stop()


def as_user(chain: ChainHandle, user: str, path: str = CONFIGMAPS) -> tuple[int, dict[str, str], bytes]:
    return chain.request("GET", path, headers={"Impersonate-User": user})


def get_obj(chain: ChainHandle, kind: str, name: str) -> dict[str, Any] | None:
    status, doc = chain.json("GET", f"/apis/flowcontrol.apiserver.k8s.io/v1/{kind}/{name}")
    return doc if status == 200 else None


def wait_for(check: Any, timeout: float = 30.0, what: str = "") -> Any:
    """The shared ``eventually`` with this file's longer default (APF settles in many steps)."""
    return eventually(check, timeout=timeout, what=what)


def test_bootstrap_configuration_is_kubes(apf: ChainHandle) -> None:
    fss = json.loads(apf.kubectl("get", "flowschemas", "-o", "json").stdout)["items"]
    assert {f["metadata"]["name"] for f in fss} >= MANDATORY_FS | SUGGESTED_FS
    pls = json.loads(apf.kubectl("get", "prioritylevelconfigurations", "-o", "json").stdout)["items"]
    assert {p["metadata"]["name"] for p in pls} >= LEVELS
    by_name = {p["metadata"]["name"]: p for p in pls}
    assert by_name["workload-low"]["spec"] == {"type": "Limited", "limited": {
        "nominalConcurrencyShares": 100, "limitResponse": {"type": "Queue", "queuing": {
            "queues": 128, "handSize": 6, "queueLengthLimit": 50}}, "lendablePercent": 90}}
    assert by_name["exempt"]["spec"] == {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0,
                                                                       "lendablePercent": 0}}
    assert by_name["catch-all"]["spec"]["limited"]["limitResponse"] == {"type": "Reject"}
    for obj in fss + pls:
        if obj["metadata"]["name"] in MANDATORY_FS | SUGGESTED_FS | LEVELS:
            assert obj["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"] == "true"
    probes = next(f for f in fss if f["metadata"]["name"] == "probes")
    assert probes["spec"]["rules"] == [{
        "subjects": [{"kind": "Group", "group": {"name": "system:unauthenticated"}},
                     {"kind": "Group", "group": {"name": "system:authenticated"}}],
        "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]}]
    dangling = wait_for(lambda: (get_obj(apf, "flowschemas", "global-default") or {}).get("status"),
                        what="global-default's status")
    [cond] = dangling["conditions"]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "Dangling", "False", "Found",
        'This FlowSchema references the PriorityLevelConfiguration object named "global-default" and it exists')
    status, _h, body = apf.request("GET", "/readyz/poststarthook/priority-and-fairness-config-consumer")
    assert (status, body) == (200, b"ok")


def test_headers_name_the_matched_schema_and_level(apf: ChainHandle) -> None:
    uids = {name: (get_obj(apf, "flowschemas", name) or {}).get("metadata", {}).get("uid")
            for name in ("exempt", "global-default", "probes")}
    levels = {name: (get_obj(apf, "prioritylevelconfigurations", name) or {}).get("metadata", {}).get("uid")
              for name in ("exempt", "global-default")}
    status, headers, _ = apf.request("GET", CONFIGMAPS)  # kubernetes-admin, system:masters
    assert status == 200 and (headers[FS_UID], headers[PL_UID]) == (uids["exempt"], levels["exempt"])
    status, headers, _ = as_user(apf, "bystander")
    assert status == 200
    assert (headers[FS_UID], headers[PL_UID]) == (uids["global-default"], levels["global-default"])
    status, headers, _ = as_user(apf, "nobody")  # refused by RBAC, after flow control classified it
    assert status == 403 and headers[FS_UID] == uids["global-default"]
    status, headers, _ = apf.request("GET", "/readyz", auth=False)  # anonymous probe: exempt by "probes"
    assert status == 200 and (headers[FS_UID], headers[PL_UID]) == (uids["probes"], levels["exempt"])


def _concurrently(n: int, call: Any) -> list[Any]:
    results: list[Any] = []
    lock = threading.Lock()

    def run() -> None:
        out = call()
        with lock:
            results.append(out)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def test_a_flood_is_rejected_while_another_user_is_served(apf: ChainHandle) -> None:
    faults = FaultClient(apf.kubeconfig)
    faults.add(latency(1.5, users=["flooder"], verbs=["list"], name="slow-flooder"))
    try:
        bystander: list[tuple[int, float]] = []

        def by_stander() -> None:
            time.sleep(0.3)  # the flood holds its seat by now
            for _ in range(10):
                started = time.monotonic()
                status, _h, _b = as_user(apf, "bystander")
                bystander.append((status, time.monotonic() - started))

        side = threading.Thread(target=by_stander)
        side.start()
        flood = _concurrently(20, lambda: as_user(apf, "flooder"))
        side.join(120)
    finally:
        faults.remove("slow-flooder")
    codes = sorted(r[0] for r in flood)
    assert codes.count(429) >= 15, codes  # one seat, Reject: all but the one(s) holding it
    assert set(codes) <= {200, 429}
    _status, headers, body = next(r for r in flood if r[0] == 429)
    assert body == b"Too many requests, please try again later.\n"
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert headers["retry-after"].isdigit() and 1 <= int(headers["retry-after"]) <= 32
    assert headers[FS_UID] == get_obj(apf, "flowschemas", "flood")["metadata"]["uid"]  # type: ignore[index]
    assert [s for s, _ in bystander] == [200] * 10
    _, _, metrics = apf.request("GET", "/metrics")
    text = metrics.decode()
    rejected = [line for line in text.splitlines() if line.startswith(
        'apiserver_flowcontrol_rejected_requests_total{flow_schema="flood",priority_level="flood",'
        'reason="concurrency-limit"}')]
    assert rejected and float(rejected[0].split()[-1]) >= 15
    assert any(line.startswith("apiserver_request_total{") and 'code="429"' in line and 'resource="configmaps"'
               in line for line in text.splitlines())


def test_system_masters_are_exempt(apf: ChainHandle) -> None:
    faults = FaultClient(apf.kubeconfig)
    faults.add(latency(0.5, users=["kubernetes-admin"], resources=["configmaps"], verbs=["list"], name="slow-admin"))
    try:
        results = _concurrently(40, lambda: apf.request("GET", CONFIGMAPS))  # more than the 30 seats
    finally:
        faults.remove("slow-admin")
    assert [r[0] for r in results] == [200] * 40


def test_a_watch_holds_no_seat_once_started(apf: ChainHandle) -> None:
    """The flood level has one seat: a running watch of the flooder does not stop its next list."""
    req = urllib.request.Request(apf.url + CONFIGMAPS + "?watch=1", headers={"Impersonate-User": "flooder"})
    with urllib.request.urlopen(req, context=apf.ssl_context(), timeout=30) as watch:
        assert watch.status == 200
        status, _h, _b = as_user(apf, "flooder")
        assert status == 200
    _, _, dump = apf.request("GET", "/debug/api_priority_and_fairness/dump_priority_levels")
    flood = next(line for line in dump.decode().splitlines() if line.startswith("flood,"))
    assert flood.split(",")[5].strip() == "0"  # ExecutingRequests


def test_metrics_and_debug_dumps(apf: ChainHandle) -> None:
    as_user(apf, "bystander")
    _, _, metrics = apf.request("GET", "/metrics")
    text = metrics.decode()
    for name in ("apiserver_flowcontrol_request_concurrency_limit", "apiserver_flowcontrol_nominal_limit_seats",
                 "apiserver_flowcontrol_current_limit_seats", "apiserver_flowcontrol_current_executing_requests",
                 "apiserver_flowcontrol_dispatched_requests_total",
                 "apiserver_flowcontrol_request_wait_duration_seconds_bucket"):
        assert f"\n{name}{{" in text, name
    # 30 seats split by shares (sum 246 with the flood level): global-default ceil(30*20/246) = 3.
    assert 'apiserver_flowcontrol_nominal_limit_seats{priority_level="global-default"} 3.0' in text
    assert 'apiserver_flowcontrol_nominal_limit_seats{priority_level="workload-low"} 13.0' in text
    status, headers, body = apf.request("GET", "/debug/api_priority_and_fairness/dump_priority_levels")
    assert status == 200 and headers["content-type"] == "text/plain; charset=utf-8"
    lines = body.decode().splitlines()
    assert lines[0].startswith("PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing, WaitingRequests,")
    assert {line.split(",")[0] for line in lines[1:]} >= LEVELS | {"flood"}
    status, _h, body = apf.request("GET", "/debug/api_priority_and_fairness/dump_queues")
    assert status == 200 and body.decode().startswith("PriorityLevelName, Index,  PendingRequests,")
    status, _h, body = apf.request("GET", "/debug/api_priority_and_fairness/dump_requests?includeRequestDetails=1")
    assert status == 200 and "UserName," in body.decode().splitlines()[0]
    assert "kubernetes-admin," in body.decode()  # this very request, executing
    status, _h, body = as_user(apf, "bystander", "/debug/api_priority_and_fairness/dump_queues")
    assert status == 403
    assert json.loads(body)["message"] == ('forbidden: User "bystander" cannot get path '
                                           '"/debug/api_priority_and_fairness/dump_queues"')


@pytest.mark.parametrize("version", kubectl_params("1.27", "1.33"))
def test_a_flowschema_added_with_kubectl_changes_classification(apf: ChainHandle, version: str) -> None:
    name = f"bystander-{version.replace('.', '-')}"
    manifest = f"""\
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {{name: {name}}}
spec:
  priorityLevelConfiguration: {{name: workload-low}}
  matchingPrecedence: 300
  distinguisherMethod: {{type: ByNamespace}}
  rules:
  - subjects: [{{kind: User, user: {{name: bystander}}}}]
    resourceRules: [{{verbs: [list], apiGroups: [""], resources: [configmaps], namespaces: [default]}}]
"""
    apf.kubectl("apply", "-f", "-", input=manifest, version=version)
    try:
        uid = get_obj(apf, "flowschemas", name)["metadata"]["uid"]  # type: ignore[index]
        low = get_obj(apf, "prioritylevelconfigurations", "workload-low")["metadata"]["uid"]  # type: ignore[index]
        headers = wait_for(lambda: (lambda r: r[1] if r[1][FS_UID] == uid else None)(as_user(apf, "bystander")),
                           what="the new FlowSchema to classify")
        assert headers[PL_UID] == low
        # Other namespaces and other verbs are not in its rules.
        _, other, _ = as_user(apf, "bystander", "/api/v1/namespaces/kube-system/configmaps")
        assert other[FS_UID] != uid
        out = apf.kubectl("get", "flowschema", name, "-o", "jsonpath={.status.conditions[0].reason}",
                          version=version)
        assert wait_for(lambda: apf.kubectl("get", "flowschema", name, "-o",
                                            "jsonpath={.status.conditions[0].reason}").stdout == "Found"), out
    finally:
        apf.kubectl("delete", "flowschema", name, version=version)
    wait_for(lambda: as_user(apf, "bystander")[1][FS_UID] != uid, what="classification back to global-default")


def test_mandatory_objects_are_restored_and_suggested_ones_follow_autoupdate(apf: ChainHandle) -> None:
    old = {n: get_obj(apf, "flowschemas", n)["metadata"]["uid"] for n in ("exempt", "global-default")}  # type: ignore[index]
    old_pl = get_obj(apf, "prioritylevelconfigurations", "catch-all")["metadata"]["uid"]  # type: ignore[index]
    apf.kubectl("delete", "flowschema", "exempt", "global-default")
    apf.kubectl("delete", "prioritylevelconfiguration", "catch-all")
    for name in ("exempt", "global-default"):
        wait_for(lambda name=name: (get_obj(apf, "flowschemas", name) or {}).get("metadata", {}).get("uid")
                 not in (None, old[name]), what=f"{name} to come back")
    back = wait_for(lambda: get_obj(apf, "prioritylevelconfigurations", "catch-all"), what="catch-all level")
    assert back["metadata"]["uid"] != old_pl
    assert back["spec"]["limited"]["nominalConcurrencyShares"] == 5
    # A suggested object a user opts out of keeps the user's spec; opting back in restores kube's.
    apf.kubectl("annotate", "flowschema", "workload-leader-election", "apf.kubernetes.io/autoupdate-spec=false",
                "--overwrite")
    apf.kubectl("patch", "flowschema", "workload-leader-election", "--type=merge",
                "-p", '{"spec":{"matchingPrecedence":250}}')
    time.sleep(2)  # a pass runs after every change
    kept = get_obj(apf, "flowschemas", "workload-leader-election")
    assert kept is not None and kept["spec"]["matchingPrecedence"] == 250
    apf.kubectl("annotate", "flowschema", "workload-leader-election", "apf.kubernetes.io/autoupdate-spec=true",
                "--overwrite")
    wait_for(lambda: (get_obj(apf, "flowschemas", "workload-leader-election") or {}).get("spec", {})
             .get("matchingPrecedence") == 200, what="kube's spec back")


BAD_FLOWSCHEMA = """\
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: bad}
spec:
  matchingPrecedence: 10001
  priorityLevelConfiguration: {name: global-default}
  distinguisherMethod: {type: ByFoo}
  rules:
  - subjects: [{kind: User, user: {name: x}, group: {name: g}}, {kind: Robot}]
    resourceRules: [{verbs: [get, frob], apiGroups: ["*", apps], resources: ["*"], namespaces: [Bad_NS]}]
    nonResourceRules: [{verbs: ["*"], nonResourceURLs: [healthz, /a/*/b]}]
  - subjects: []
"""

BAD_FLOWSCHEMA_ERRORS = 'The FlowSchema "bad" is invalid: \n' + """\
* spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000
* spec.distinguisherMethod.type: Unsupported value: &flowcontrol.FlowDistinguisherMethod{Type:"ByFoo"}: \
supported values: "ByNamespace", "ByUser"
* spec.rules[0].subjects[0].group: Forbidden: group is forbidden when subject kind is not 'Group'
* spec.rules[0].subjects[1].kind: Unsupported value: "Robot": supported values: "Group", "ServiceAccount", "User"
* spec.rules[0].resourceRules[0].verbs: Unsupported value: []string{"get", "frob"}: supported values: "create", \
"delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"
* spec.rules[0].resourceRules[0].apiGroups: Invalid value: []string{"*", "apps"}: if '*' is present, must not \
specify other api groups
* spec.rules[0].resourceRules[0].namespaces[0]: Invalid value: "Bad_NS": each member of this list must be '*' or a \
DNS-1123 label; a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must \
start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is \
'[a-z0-9]([-a-z0-9]*[a-z0-9])?')
* spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: "healthz": must start with slash
* spec.rules[0].nonResourceRules[0].nonResourceURLs[1]: Invalid value: "/a/*/b": wildcard can only do suffix matching
* spec.rules[1].subjects: Required value: subjects must contain at least one value
* spec.rules[1]: Required value: at least one of resourceRules and nonResourceRules has to be non-empty
"""


@pytest.mark.parametrize("version", kubectl_params("1.27", "1.33"))
def test_bad_objects_get_kubes_field_errors(apf: ChainHandle, version: str) -> None:
    out = apf.kubectl("apply", "-f", "-", input=BAD_FLOWSCHEMA, version=version, check=False)
    assert out.returncode == 1
    assert out.stderr == BAD_FLOWSCHEMA_ERRORS
    bad_level = """\
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: bad}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: -1
    lendablePercent: 101
    borrowingLimitPercent: -2
    limitResponse: {type: Queue, queuing: {queues: 4, handSize: 5}}
"""
    out = apf.kubectl("apply", "-f", "-", input=bad_level, version=version, check=False)
    assert out.stderr == (
        'The PriorityLevelConfiguration "bad" is invalid: \n'
        "* spec.limited.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer\n"
        "* spec.limited.limitResponse.queuing.handSize: Invalid value: 5: should not be greater than queues (4)\n"
        "* spec.limited.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive\n"
        "* spec.limited.borrowingLimitPercent: Invalid value: -2: if specified, must be a non-negative integer\n")
    out = apf.kubectl("patch", "flowschema", "catch-all", "--type=merge", "-p", '{"spec":{"matchingPrecedence":9000}}',
                      version=version, check=False)
    assert "spec of 'catch-all' must equal the fixed value" in out.stderr
    out = apf.kubectl("patch", "prioritylevelconfiguration", "exempt", "--type=merge",
                      "-p", '{"spec":{"exempt":{"lendablePercent":10}}}', version=version)
    assert get_obj(apf, "prioritylevelconfigurations", "exempt")["spec"]["exempt"]["lendablePercent"] == 10  # type: ignore[index]
    apf.kubectl("patch", "prioritylevelconfiguration", "exempt", "--type=merge",
                "-p", '{"spec":{"exempt":{"lendablePercent":0}}}', version=version)


def test_a_flowschema_naming_a_missing_level_is_dangling(apf: ChainHandle) -> None:
    apf.kubectl("apply", "-f", "-", input="""\
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: orphan}
spec:
  priorityLevelConfiguration: {name: no-such-level}
  matchingPrecedence: 600
  rules:
  - subjects: [{kind: User, user: {name: bystander}}]
    nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
""")
    try:
        cond = wait_for(lambda: next(iter((get_obj(apf, "flowschemas", "orphan") or {}).get("status", {})
                                          .get("conditions") or []), None), what="orphan's condition")
        assert (cond["status"], cond["reason"], cond["message"]) == (
            "True", "NotFound", 'This FlowSchema references the PriorityLevelConfiguration object named '
                                '"no-such-level" but there is no such object')
        _, headers, _ = as_user(apf, "bystander", "/version")  # a dangling schema is skipped
        assert headers[FS_UID] != get_obj(apf, "flowschemas", "orphan")["metadata"]["uid"]  # type: ignore[index]
    finally:
        apf.kubectl("delete", "flowschema", "orphan")
