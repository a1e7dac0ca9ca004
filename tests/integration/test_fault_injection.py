# The client's models declare every field Optional; the tests read fields the server fills.
# mypy: disable-error-code="union-attr,index,arg-type,operator"
"""Fault injection at the gateway (issue 16) against the real chain, seen by the official
``kubernetes`` Python client and kubectl: a watch that gets the 410 Expired ERROR first (the
client's Watch retries once, then raises), watches cut after N events or S seconds, a 429 with
Retry-After (and the client's client-go style retry honouring it), the optimistic-lock 409 on
update (and ``retry_on_conflict`` getting through), 500/503 Statuses, added latency measured,
rules scoped to users and groups, the admin path refused to a token user (403) and bad rule
bodies refused with 400 naming the field, every injected fault counted in ``/metrics``.

The rules go to a gateway of our own, started on the session chain with a ``--token-auth-file``,
so the shared chain's gateway (other test modules) never sees a fault. The ``kubechain_faults``
fixture (kubechain_cli.pytest_faults) is used as a plugin would: this module supplies the
``kubechain_kubeconfig`` and ``kubechain_gateway_urls`` fixtures it looks for.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.utils.retry import retry_on_conflict
from prometheus_client.parser import text_string_to_metric_families
from support.procs import ChainHandle, kubectl_binary

from kubechain_cli.chain import free_port
from kubechain_cli.faults import (
    FaultAPIError,
    FaultClient,
    conflict,
    internal_error,
    latency,
    service_unavailable,
    too_many_requests,
    watch_close,
    watch_expired,
)
from kubechain_cli.pytest_faults import kubechain_faults_fixture  # noqa: F401  (registers kubechain_faults)

pytestmark = pytest.mark.integration

ALICE_TOKEN = "alice-fault-token-0123456789"
ADMIN_PATH = "/debug/kubechain/faults"


# -- a gateway of our own ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def faults_gateway(chain: ChainHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One more aggregator on the session chain (same members, certificates and etcd) that also
    takes a static token for alice (groups devs, qa); its URL."""
    tokens: Path = tmp_path_factory.mktemp("fault-tokens") / "tokens.csv"
    tokens.write_text(f'{ALICE_TOKEN},alice,uid-alice,"devs,qa"\n')
    argv = list(chain.chain.commands["aggregator"])
    port = free_port()
    argv[argv.index("--secure-port") + 1] = str(port)
    argv += ["--token-auth-file", str(tokens)]
    name = f"aggregator-faults-{port}"
    proc = chain.chain.add_process(name, argv)
    url = f"https://127.0.0.1:{port}"
    ctx = chain.ssl_context()
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/readyz", context=ctx, timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} not ready in 60 s")
        time.sleep(0.1)
    yield url
    proc.terminate()
    try:
        # An idle keep-alive connection the client library leaked keeps uvicorn's graceful shutdown
        # waiting (10 s): this gateway is ours and has nothing left to finish.
        proc.wait(3)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@pytest.fixture(scope="module")
def kubechain_kubeconfig(chain: ChainHandle) -> str:
    return chain.kubeconfig


@pytest.fixture(scope="module")
def kubechain_gateway_urls(faults_gateway: str) -> list[str]:
    return [faults_gateway]


@pytest.fixture(scope="module")
def api(chain: ChainHandle, faults_gateway: str) -> Iterator[client.ApiClient]:
    """The admin (kubeconfig) client, talking to our gateway."""
    api_client = config.new_client_from_config(config_file=chain.kubeconfig)
    api_client.configuration.host = faults_gateway
    yield api_client
    api_client.close()


def alice_configuration(chain: ChainHandle, url: str) -> client.Configuration:
    cfg = client.Configuration(host=url)
    cfg.ssl_ca_cert = chain.chain.pki.ca
    cfg.api_key = {"BearerToken": ALICE_TOKEN}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    return cfg


@pytest.fixture(scope="module")
def alice(chain: ChainHandle, faults_gateway: str) -> Iterator[client.CoreV1Api]:
    api_client = client.ApiClient(alice_configuration(chain, faults_gateway))
    yield client.CoreV1Api(api_client)
    api_client.close()


@pytest.fixture(scope="module")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="module")
def ns(core: client.CoreV1Api) -> Iterator[str]:
    name = f"faults-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    # The chain enforces RBAC: alice edits this namespace, as a team member would be granted.
    client.RbacAuthorizationV1Api(core.api_client).create_namespaced_role_binding(name, client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="alice-edit"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="edit"),
        subjects=[client.RbacV1Subject(kind="User", name="alice", api_group="rbac.authorization.k8s.io")]))
    yield name
    try:
        core.delete_namespace(name)
    except ApiException:
        pass


def make_cm(core: client.CoreV1Api, ns: str, name: str, **data: str) -> client.V1ConfigMap:
    return core.create_namespaced_config_map(ns, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name), data=data or {"k": "v"}))


def status_of(err: ApiException) -> dict[str, Any]:
    body = json.loads(err.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    return body  # type: ignore[no-any-return]


def raw(url: str, method: str, path: str, *, ctx: ssl.SSLContext, body: Any = None,
        headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


def injected_metric(url: str, ctx: ssl.SSLContext, **labels: str) -> float:
    """``kubechain_injected_faults_total`` for exactly these labels (0 when not yet counted)."""
    # A scrape merges every process's exposition: seconds on a loaded machine (10 s was once too short).
    with urllib.request.urlopen(url + "/metrics", context=ctx, timeout=60) as r:
        text = r.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "kubechain_injected_faults_total" and sample.labels == labels:
                return float(sample.value)
    return 0.0


# -- management --------------------------------------------------------------------------------
def test_admin_path_is_for_system_masters_only(chain: ChainHandle, faults_gateway: str,
                                               kubechain_faults: FaultClient) -> None:
    alice_ctx = ssl.create_default_context(cafile=chain.chain.pki.ca)
    bearer = {"Authorization": f"Bearer {ALICE_TOKEN}"}
    for method, body in (("GET", None), ("POST", {"effect": {"type": "Conflict"}}), ("DELETE", None)):
        code, headers, data = raw(faults_gateway, method, ADMIN_PATH, ctx=alice_ctx, body=body, headers=bearer)
        assert code == 403, data
        assert headers["content-type"] == "application/json"
        assert json.loads(data) == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'forbidden: User "alice" cannot {method.lower()} path "{ADMIN_PATH}"',
            "reason": "Forbidden", "details": {}, "code": 403}
    code, _h, data = raw(faults_gateway, "GET", ADMIN_PATH, ctx=alice_ctx)  # no credentials: anonymous
    assert code == 403 and json.loads(data)["message"] == \
        f'forbidden: User "system:anonymous" cannot get path "{ADMIN_PATH}"'
    assert kubechain_faults.rules() == []
    # the admin path stays out of discovery
    code, _h, data = raw(faults_gateway, "GET", "/apis", ctx=chain.ssl_context())
    assert code == 200 and b"kubechain.io/fault" not in data and b"faults" not in data


def test_bad_rule_bodies_get_400_naming_the_field(chain: ChainHandle, faults_gateway: str,
                                                  kubechain_faults: FaultClient) -> None:
    cases = [
        ({"probability": 2, "effect": {"type": "Conflict"}}, "probability",
         "invalid fault rule: probability: Invalid value: 2: must be between 0 and 1, inclusive"),
        ({"effect": {"type": "Explode"}}, "effect.type",
         'invalid fault rule: effect.type: Unsupported value: "Explode": supported values: "TooManyRequests", '
         '"InternalError", "ServiceUnavailable", "Conflict", "WatchExpired", "WatchClose", "Latency"'),
        ([{"effect": {"type": "Conflict"}}, {"verbs": ["get"], "effect": {"type": "WatchClose", "afterEvents": 1}}],
         "[1].verbs", 'invalid fault rule: [1].verbs: Invalid value: ["get"]: effect WatchClose applies to watch '
                      "requests only"),
        ({"effect": {"type": "Latency", "seconds": "slow"}}, "effect.seconds",
         'invalid fault rule: effect.seconds: Invalid value: "slow": must be a number of seconds'),
        ({"effect": {"type": "TooManyRequests"}, "firstN": 0}, "firstN",
         "invalid fault rule: firstN: Invalid value: 0: must be greater than or equal to 1"),
    ]
    for body, field, message in cases:
        if isinstance(body, list):  # through the Python API
            with pytest.raises(FaultAPIError) as caught:
                kubechain_faults.set(body)
            code, status = caught.value.status, caught.value.body
        else:  # one rule object, posted as is
            code, _h, data = raw(faults_gateway, "POST", ADMIN_PATH, ctx=chain.ssl_context(), body=body)
            status = json.loads(data)
        assert code == 400
        assert status["kind"] == "Status" and status["reason"] == "BadRequest" and status["code"] == 400
        assert status["message"] == message
        assert field in [c["field"] for c in status["details"]["causes"]]
    code, _h, data = raw(faults_gateway, "POST", ADMIN_PATH, ctx=chain.ssl_context(), body=b"{nope")
    assert code == 400 and json.loads(data)["message"].startswith("invalid fault rule: the body is not JSON")
    assert kubechain_faults.rules() == []  # nothing half-applied


def test_rules_listed_with_counters_and_removed(core: client.CoreV1Api, ns: str,
                                                kubechain_faults: FaultClient) -> None:
    make_cm(core, ns, "counted")
    stored = kubechain_faults.add(internal_error(name="boom", verbs=["get"], resources=["configmaps"],
                                                 namespaces=[ns], every_nth=2))
    assert stored == [{"name": "boom", "verbs": ["get"], "resources": ["configmaps"], "namespaces": [ns],
                       "probability": 1.0, "everyNth": 2, "effect": {"type": "InternalError"},
                       "status": {"matched": 0, "injected": 0}}]
    outcomes = []
    for _ in range(4):
        try:
            core.read_namespaced_config_map("counted", ns)
            outcomes.append(200)
        except ApiException as err:
            outcomes.append(err.status)
            body = status_of(err)
            assert body["reason"] == "InternalError"
            assert body["message"] == 'Internal error occurred: injected by kubechain fault rule "boom"'
    assert outcomes == [200, 500, 200, 500]
    core.list_namespaced_config_map(ns)  # a list is not a get
    assert kubechain_faults.get("boom")["status"] == {"matched": 4, "injected": 2}
    assert kubechain_faults.remove("boom")["name"] == "boom"
    with pytest.raises(FaultAPIError) as caught:
        kubechain_faults.remove("boom")
    assert caught.value.status == 404 and caught.value.body["reason"] == "NotFound"
    core.read_namespaced_config_map("counted", ns)


# -- watches -------------------------------------------------------------------------------------
def test_watch_sees_410_expired_first(core: client.CoreV1Api, ns: str, kubechain_faults: FaultClient) -> None:
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    make_cm(core, ns, "w410")
    kubechain_faults.add(watch_expired(name="expire", resources=["configmaps"], namespaces=[ns]))
    # With a timeout the client does not retry: the first event's 410 is raised.
    started = time.monotonic()
    with pytest.raises(ApiException) as caught:
        for _event in watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=rv,
                                           timeout_seconds=20):
            pytest.fail("no event may come before the 410")
    assert caught.value.status == 410
    assert caught.value.reason == f"Expired: too old resource version: {rv} ({int(rv) + 1})"
    assert time.monotonic() - started < 5
    # Without one it retries once after a 410, then raises: two injected.
    with pytest.raises(ApiException) as caught:
        for _event in watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=rv):
            pytest.fail("no event may come before the 410")
    assert caught.value.status == 410
    assert kubechain_faults.get("expire")["status"] == {"matched": 3, "injected": 3}
    # Only the first matching watch expires: the client's one retry then sees the stored events.
    kubechain_faults.set([watch_expired(name="expire-once", resources=["configmaps"], namespaces=[ns], first_n=1)])
    w = watch.Watch()
    seen = []
    for event in w.stream(core.list_namespaced_config_map, ns, resource_version=rv):
        seen.append((event["type"], event["object"].metadata.name))
        w.stop()
    assert seen == [("ADDED", "w410")]
    assert kubechain_faults.get("expire-once")["status"] == {"matched": 2, "injected": 1}
    # lists are not watches
    core.list_namespaced_config_map(ns)


def test_watch_closed_after_n_events(core: client.CoreV1Api, ns: str, kubechain_faults: FaultClient) -> None:
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    for i in range(5):
        make_cm(core, ns, f"ev-{i}")
    kubechain_faults.add(watch_close(name="cut2", after_events=2, resources=["configmaps"], namespaces=[ns]))
    started = time.monotonic()
    names = [e["object"].metadata.name for e in watch.Watch().stream(
        core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=30)]
    elapsed = time.monotonic() - started
    assert names == ["ev-0", "ev-1"]
    assert elapsed < 10, elapsed  # the stream ended, not the 30 s timeout
    # the same watch through the untouched gateway gets all five (the events are really there)
    kubechain_faults.clear()
    w = watch.Watch()
    names = []
    for event in w.stream(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=30):
        names.append(event["object"].metadata.name)
        if len(names) == 5:
            w.stop()
    assert names == [f"ev-{i}" for i in range(5)]


def test_watch_closed_after_seconds(core: client.CoreV1Api, ns: str, kubechain_faults: FaultClient) -> None:
    kubechain_faults.add(watch_close(name="cut-1s", after_seconds=1.0, resources=["configmaps"], namespaces=[ns]))
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    events: list[str] = []

    def later() -> None:
        time.sleep(0.3)
        make_cm(core, ns, "during-watch")

    writer = threading.Thread(target=later)
    started = time.monotonic()
    writer.start()
    for event in watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=30):
        events.append(event["object"].metadata.name)
    elapsed = time.monotonic() - started
    writer.join()
    assert events == ["during-watch"]  # the stream was live until it was cut
    assert 0.9 <= elapsed < 5, elapsed


# -- answers -----------------------------------------------------------------------------------
def test_429_with_retry_after(chain: ChainHandle, api: client.ApiClient, core: client.CoreV1Api, ns: str,
                              kubechain_faults: FaultClient) -> None:
    make_cm(core, ns, "busy")
    kubechain_faults.add(too_many_requests(2, name="throttle", verbs=["create"], resources=["configmaps"],
                                           namespaces=[ns], first_n=1))
    with pytest.raises(ApiException) as caught:  # a POST is not retried by the client
        make_cm(core, ns, "throttled")
    err = caught.value
    assert err.status == 429
    assert err.headers["Retry-After"] == "2"
    assert status_of(err) == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": "Too many requests, please try again later.", "reason": "TooManyRequests",
                              "details": {"retryAfterSeconds": 2}, "code": 429}
    assert make_cm(core, ns, "throttled").metadata.name == "throttled"  # first_n=1: only once
    # A GET: urllib3 under the client honours Retry-After on a 429 by itself, waits and asks again.
    kubechain_faults.set([too_many_requests(2, name="throttle-get", verbs=["get"], resources=["configmaps"],
                                            resource_names=["busy"], first_n=1)])
    started = time.monotonic()
    assert core.read_namespaced_config_map("busy", ns).metadata.name == "busy"
    waited = time.monotonic() - started
    assert 2.0 <= waited < 6, waited
    assert kubechain_faults.get("throttle-get")["status"] == {"matched": 2, "injected": 1}
    # So does the client's client-go style retry (Configuration.client_go_retries).
    kubechain_faults.set([too_many_requests(2, name="throttle-again", verbs=["get"], resources=["configmaps"],
                                            resource_names=["busy"], first_n=1)])
    cfg = client.Configuration()
    config.load_kube_config(config_file=chain.kubeconfig, client_configuration=cfg)
    cfg.host = api.configuration.host
    cfg.client_go_retries = True
    with client.ApiClient(cfg) as retrying:
        started = time.monotonic()
        got = client.CoreV1Api(retrying).read_namespaced_config_map("busy", ns)
        waited = time.monotonic() - started
    assert got.metadata.name == "busy"
    assert 2.0 <= waited < 6, waited
    assert kubechain_faults.get("throttle-again")["status"] == {"matched": 2, "injected": 1}


def test_409_conflict_on_update(faults_gateway: str, chain: ChainHandle, core: client.CoreV1Api, ns: str,
                                kubechain_faults: FaultClient) -> None:
    make_cm(core, ns, "x")
    kubechain_faults.add(conflict(name="clash", verbs=["update"], resources=["configmaps"], resource_names=["x"],
                                  first_n=3))
    before = injected_metric(faults_gateway, chain.ssl_context(), effect="Conflict", verb="update", group="",
                             resource="configmaps", subresource="")
    current = core.read_namespaced_config_map("x", ns)
    current.data = {"k": "changed"}
    with pytest.raises(ApiException) as caught:
        core.replace_namespaced_config_map("x", ns, current)
    assert caught.value.status == 409
    assert status_of(caught.value) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'Operation cannot be fulfilled on configmaps "x": the object has been modified; please apply '
                   "your changes to the latest version and try again",
        "reason": "Conflict", "details": {"name": "x", "kind": "configmaps"}, "code": 409}
    # patches are not updates
    core.patch_namespaced_config_map("x", ns, {"metadata": {"labels": {"patched": "yes"}}})
    attempts = 0

    def update() -> client.V1ConfigMap:
        nonlocal attempts
        attempts += 1
        fresh = core.read_namespaced_config_map("x", ns)
        fresh.data = {"k": f"attempt-{attempts}"}
        return core.replace_namespaced_config_map("x", ns, fresh)

    done = retry_on_conflict(update)
    assert attempts == 3 and done.data == {"k": "attempt-3"}
    assert core.read_namespaced_config_map("x", ns).data == {"k": "attempt-3"}
    after = injected_metric(faults_gateway, chain.ssl_context(), effect="Conflict", verb="update", group="",
                            resource="configmaps", subresource="")
    assert after - before == 3


def test_500_and_503(core: client.CoreV1Api, ns: str, kubechain_faults: FaultClient) -> None:
    kubechain_faults.add(
        service_unavailable(name="down", verbs=["create"], resources=["configmaps"], namespaces=[ns]),
        internal_error("disk on fire", name="fire", verbs=["deletecollection"], resources=["configmaps"],
                       namespaces=[ns]))
    with pytest.raises(ApiException) as caught:
        make_cm(core, ns, "never")
    assert caught.value.status == 503
    body = status_of(caught.value)
    assert body["reason"] == "ServiceUnavailable" and body["code"] == 503
    assert body["message"] == ('the server is currently unable to handle the request (injected by kubechain fault '
                               'rule "down")')
    with pytest.raises(ApiException) as caught:
        core.delete_collection_namespaced_config_map(ns)
    body = status_of(caught.value)
    assert (caught.value.status, body["reason"], body["message"], body["details"]) == (
        500, "InternalError", "Internal error occurred: disk on fire", {"causes": [{"message": "disk on fire"}]})
    kubechain_faults.clear()
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_config_map("never", ns)
    assert caught.value.status == 404  # the refused create never reached the backend


def test_latency_is_added(core: client.CoreV1Api, ns: str, kubechain_faults: FaultClient) -> None:
    make_cm(core, ns, "slow")

    def timed_get() -> float:
        started = time.monotonic()
        core.read_namespaced_config_map("slow", ns)
        return time.monotonic() - started

    baseline = min(timed_get() for _ in range(3))
    kubechain_faults.add(latency(0.5, name="lag", verbs=["get"], resources=["configmaps"], namespaces=[ns]))
    fixed = [timed_get() for _ in range(3)]
    assert all(0.5 <= t < 0.5 + baseline + 1.5 for t in fixed), (baseline, fixed)
    kubechain_faults.set([latency((0.2, 0.4), name="lag-range", verbs=["get"], resources=["configmaps"],
                                  namespaces=[ns])])
    ranged = [timed_get() for _ in range(4)]
    assert all(0.2 <= t < 0.4 + baseline + 1.5 for t in ranged), (baseline, ranged)
    kubechain_faults.clear()
    assert min(timed_get() for _ in range(3)) < 0.5


def test_rules_scoped_to_users_and_groups(core: client.CoreV1Api, alice: client.CoreV1Api, ns: str,
                                          kubechain_faults: FaultClient) -> None:
    make_cm(core, ns, "shared")
    # a rule for alice only
    kubechain_faults.add(internal_error(name="alice-only", users=["alice"], resources=["configmaps"],
                                        namespaces=[ns]))
    assert core.read_namespaced_config_map("shared", ns).metadata.name == "shared"
    with pytest.raises(ApiException) as caught:
        alice.read_namespaced_config_map("shared", ns)
    assert caught.value.status == 500
    # rules for another user or group leave alice alone
    kubechain_faults.set([
        internal_error(name="admin-only", users=["kubernetes-admin"], resources=["configmaps"], namespaces=[ns]),
        service_unavailable(name="masters-only", groups=["system:masters"], resources=["secrets"])])
    assert alice.read_namespaced_config_map("shared", ns).metadata.name == "shared"
    alice.list_namespaced_secret(ns)
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_config_map("shared", ns)
    assert caught.value.status == 500
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_secret(ns)
    assert caught.value.status == 503
    # by alice's token group
    kubechain_faults.set([conflict(name="qa", groups=["qa"], verbs=["patch"], resources=["configmaps"])])
    with pytest.raises(ApiException) as caught:
        alice.patch_namespaced_config_map("shared", ns, {"metadata": {"labels": {"a": "b"}}})
    assert caught.value.status == 409
    core.patch_namespaced_config_map("shared", ns, {"metadata": {"labels": {"a": "b"}}})


def test_kubectl_sees_injected_errors(chain: ChainHandle, faults_gateway: str, core: client.CoreV1Api, ns: str,
                                      kubechain_faults: FaultClient) -> None:
    make_cm(core, ns, "kc")
    kubechain_faults.add(conflict(name="kc-clash", verbs=["patch"], resources=["configmaps"], namespaces=[ns]))
    # the admin path is reachable with kubectl's raw verbs too
    proc = subprocess.run([kubectl_binary(), "--kubeconfig", chain.kubeconfig, "--server", faults_gateway,
                           "get", "--raw", ADMIN_PATH], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert [r["name"] for r in json.loads(proc.stdout)["rules"]] == ["kc-clash"]
    for version in ("1.33", "1.27"):
        proc = subprocess.run(
            [kubectl_binary(version), "--kubeconfig", chain.kubeconfig, "--server", faults_gateway, "-n", ns,
             "label", "configmap", "kc", "x=y"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1
        assert ('Error from server (Conflict): Operation cannot be fulfilled on configmaps "kc": the object has '
                "been modified; please apply your changes to the latest version and try again") in proc.stderr
    # kubectl (client-go) retries a 429 with Retry-After itself (up to 10 times), waiting as told
    kubechain_faults.set([too_many_requests(1, name="kc-busy-twice", verbs=["get"], resources=["configmaps"],
                                            namespaces=[ns], resource_names=["kc"], first_n=2)])
    started = time.monotonic()
    proc = subprocess.run(
        [kubectl_binary(), "--kubeconfig", chain.kubeconfig, "--server", faults_gateway, "-n", ns,
         "get", "configmap", "kc", "-o", "name"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "configmap/kc"
    assert time.monotonic() - started >= 2.0
    assert kubechain_faults.get("kc-busy-twice")["status"] == {"matched": 3, "injected": 2}


def test_metrics_count_every_injection(chain: ChainHandle, faults_gateway: str, core: client.CoreV1Api, ns: str,
                                       kubechain_faults: FaultClient) -> None:
    ctx = chain.ssl_context()
    labels = {"effect": "ServiceUnavailable", "verb": "list", "group": "", "resource": "configmaps",
              "subresource": ""}
    before = injected_metric(faults_gateway, ctx, **labels)
    kubechain_faults.add(service_unavailable(name="m", verbs=["list"], resources=["configmaps"], namespaces=[ns],
                                             first_n=4))
    for _ in range(6):
        try:
            core.list_namespaced_config_map(ns)
        except ApiException as err:
            assert err.status == 503
    assert injected_metric(faults_gateway, ctx, **labels) - before == 4
    with urllib.request.urlopen(faults_gateway + "/metrics", context=ctx, timeout=10) as r:
        text = r.read().decode()
    assert "# TYPE kubechain_injected_faults_total counter" in text
    # and the untouched gateway of the chain counted nothing of ours
    assert injected_metric(chain.url, ctx, **labels) == 0.0


def test_client_fans_out_to_every_gateway(chain: ChainHandle, faults_gateway: str, core: client.CoreV1Api,
                                          ns: str) -> None:
    """Rules live in each gateway process: FaultClient(servers=...) sends each change to all of them.
    (The rule is scoped to this module's namespace, so the chain's shared gateway affects nobody else.)"""
    both = FaultClient(chain.kubeconfig, servers=[chain.url, faults_gateway])
    make_cm(core, ns, "fan")
    try:
        both.add(conflict(name="everywhere", verbs=["update"], resources=["configmaps"], namespaces=[ns]))
        assert [r["name"] for r in both.rules(chain.url)] == ["everywhere"]
        assert [r["name"] for r in both.rules(faults_gateway)] == ["everywhere"]
        via_chain = config.new_client_from_config(config_file=chain.kubeconfig)  # the kubeconfig's gateway
        with via_chain:
            main = client.CoreV1Api(via_chain)
            for api_core in (core, main):
                cm = api_core.read_namespaced_config_map("fan", ns)
                with pytest.raises(ApiException) as caught:
                    api_core.replace_namespaced_config_map("fan", ns, cm)
                assert caught.value.status == 409
        assert both.injected("everywhere") == 2
    finally:
        both.clear()
    assert both.rules(chain.url) == [] and both.rules(faults_gateway) == []
