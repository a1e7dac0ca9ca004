"""kube-apiserver's metrics at the gateway's ``/metrics``, as dashboards and alerts expect them.

Requests of each kind (create, get, list in a namespace and across all, update, patch, apply,
dry-run create, delete, delete-collection, watch, a 404) are counted by the member that served
them with kube's labels and merged into the gateway's answer; a 401 and a 403 are counted where
kube counts them (``authentication_attempts``, ``authorization_attempts_total``, never in
``apiserver_request_total``); storage objects, etcd latencies, watch events, long-running requests
and in-flight watermarks come from every process; ``/metrics`` itself needs system:monitoring
under RBAC. Counters are compared before and after, so other tests' traffic cannot make these pass.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]

KUBE_LATENCY_BUCKETS = ["0.005", "0.025", "0.05", "0.1", "0.2", "0.4", "0.6", "0.8", "1.0", "1.25", "1.5", "2.0",
                        "3.0", "4.0", "5.0", "6.0", "8.0", "10.0", "15.0", "20.0", "30.0", "45.0", "60.0", "+Inf"]


def scrape(chain: ChainHandle) -> tuple[str, Series]:
    status, headers, body = chain.request("GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    text = body.decode()
    series: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in series, f"duplicate series {key}"
            series[key] = sample.value
    return text, series


def value(series: Series, name: str, **labels: str) -> float:
    return series.get((name, frozenset(labels.items())), 0.0)


def request_labels(verb: str, scope: str, dry_run: str = "", subresource: str = "") -> dict[str, str]:
    return {"verb": verb, "dry_run": dry_run, "group": "", "version": "v1", "resource": "configmaps",
            "subresource": subresource, "scope": scope, "component": "apiserver"}


@pytest.fixture
def namespace(chain: ChainHandle) -> Iterator[str]:
    ns = f"metrics-{uuid.uuid4().hex[:6]}"
    assert chain.json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": ns}})[0] == 201
    yield ns
    chain.json("DELETE", f"/api/v1/namespaces/{ns}")


def cm(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}}


def test_requests_of_each_kind_counted_with_kubes_labels(chain: ChainHandle, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    _text, before = scrape(chain)
    assert chain.json("POST", base, cm("one"))[0] == 201
    assert chain.json("POST", f"{base}?dryRun=All", cm("dry"))[0] == 201
    assert chain.json("GET", f"{base}/one")[0] == 200
    assert chain.json("GET", f"{base}/missing")[0] == 404
    assert chain.json("GET", base)[0] == 200
    assert chain.json("GET", "/api/v1/configmaps?limit=1")[0] == 200
    _s, obj = chain.json("GET", f"{base}/one")
    assert chain.json("PUT", f"{base}/one", obj)[0] == 200
    assert chain.request("PATCH", f"{base}/one", {"data": {"b": "2"}},
                         headers={"Content-Type": "application/merge-patch+json"})[0] == 200
    assert chain.request("PATCH", f"{base}/applied?fieldManager=metrics-test", raw=json.dumps(cm("applied")).encode(),
                         headers={"Content-Type": "application/apply-patch+yaml"})[0] == 201
    assert chain.request("GET", f"{base}?watch=1&timeoutSeconds=1")[0] == 200
    assert chain.json("DELETE", f"{base}/one")[0] == 200
    assert chain.json("DELETE", base)[0] == 200
    text, after = scrape(chain)

    def delta(verb: str, scope: str, code: str, dry_run: str = "") -> float:
        labels = {**request_labels(verb, scope, dry_run), "code": code}
        return value(after, "apiserver_request_total", **labels) - value(before, "apiserver_request_total", **labels)

    assert delta("POST", "resource", "201") >= 1
    assert delta("POST", "resource", "201", dry_run="All") >= 1
    assert delta("GET", "resource", "200") >= 2
    assert delta("GET", "resource", "404") >= 1
    assert delta("LIST", "namespace", "200") >= 1
    assert delta("LIST", "cluster", "200") >= 1  # all namespaces: kube's installer says cluster
    assert delta("PUT", "resource", "200") >= 1
    assert delta("PATCH", "resource", "200") >= 1
    assert delta("APPLY", "resource", "201") >= 1
    assert delta("WATCH", "namespace", "200") >= 1
    assert delta("DELETE", "resource", "200") >= 1
    assert delta("DELETE", "namespace", "200") >= 1  # kube reports a delete-collection as DELETE
    get = request_labels("GET", "resource")
    assert value(after, "apiserver_request_duration_seconds_count", **get) > \
        value(before, "apiserver_request_duration_seconds_count", **get)
    buckets = [dict(labels)["le"] for (name, labels), _v in after.items()
               if name == "apiserver_request_duration_seconds_bucket" and labels >= frozenset(get.items())]
    assert buckets == KUBE_LATENCY_BUCKETS
    sizes = {k: v for k, v in get.items() if k != "dry_run"}
    assert value(after, "apiserver_response_sizes_count", **sizes) > value(before, "apiserver_response_sizes_count",
                                                                           **sizes)
    assert ("# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run "
            "value, group, version, resource, scope, component, and HTTP response code.") in text
    assert "# TYPE apiserver_request_duration_seconds histogram" in text


def test_a_401_and_a_403_are_counted_where_kube_counts_them(chain: ChainHandle, namespace: str) -> None:
    chain.kubectl("create", "serviceaccount", "nobody", "-n", namespace)
    token = chain.kubectl("create", "token", "nobody", "-n", namespace).stdout.strip()
    _t, before = scrape(chain)
    assert chain.request("GET", f"/api/v1/namespaces/{namespace}/configmaps", auth=False,
                         headers={"Authorization": "Bearer not-a-token"})[0] == 401
    assert chain.request("GET", f"/api/v1/namespaces/{namespace}/configmaps", auth=False,
                         headers={"Authorization": f"Bearer {token}"})[0] == 403
    _t, after = scrape(chain)
    assert value(after, "authentication_attempts", result="failure") >= \
        value(before, "authentication_attempts", result="failure") + 1
    # RBAC has no opinion on what no rule allows (kube: NoOpinion from the union of authorizers -> 403).
    assert value(after, "authorization_attempts_total", result="no-opinion") >= \
        value(before, "authorization_attempts_total", result="no-opinion") + 1
    assert value(after, "authenticated_user_requests", username="other") >= \
        value(before, "authenticated_user_requests", username="other") + 1
    assert value(after, "authentication_duration_seconds_count", result="failure") >= 1
    for code in ("401", "403"):  # refused before any handler: not a request kube's handlers count
        labels = {**request_labels("LIST", "namespace"), "code": code}
        assert value(after, "apiserver_request_total", **labels) == value(before, "apiserver_request_total", **labels)


def test_every_process_contributes_one_merged_exposition(chain: ChainHandle, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    _t, before = scrape(chain)
    events: list[bytes] = []

    def watch() -> None:
        # Open until three events came (a scrape merges every member's metrics and may take seconds on
        # a loaded machine: a short server-side timeout could end the watch before a scrape sees it).
        req = urllib.request.Request(chain.url + f"{base}?watch=1&timeoutSeconds=60")
        with urllib.request.urlopen(req, context=chain.ssl_context(), timeout=60) as r:
            for line in r:
                if line.strip():
                    events.append(line)
                if len(events) >= 3:
                    break

    watcher = threading.Thread(target=watch)
    watcher.start()
    open_watch = {"verb": "WATCH", "group": "", "version": "v1", "resource": "configmaps", "subresource": "",
                  "scope": "namespace", "component": "apiserver"}
    deadline = time.monotonic() + 30
    while value(scrape(chain)[1], "apiserver_longrunning_requests", **open_watch) < 1:
        assert time.monotonic() < deadline, "the open watch never showed in apiserver_longrunning_requests"
        time.sleep(0.2)
    for i in range(3):
        assert chain.json("POST", base, cm(f"w{i}"))[0] == 201
    watcher.join(60)
    assert len(events) >= 3
    text, after = scrape(chain)
    kind = {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert value(after, "apiserver_watch_events_total", **kind) >= value(before, "apiserver_watch_events_total",
                                                                         **kind) + 3
    assert value(after, "apiserver_watch_events_sizes_count", **kind) >= 3
    assert value(after, "apiserver_storage_objects", resource="configmaps") >= 3
    # extensions-api's store, merged in: the CRDs resource exists there only.
    assert ("apiserver_storage_objects", frozenset({("resource", "customresourcedefinitions.apiextensions.k8s.io")})) \
        in after
    create = {"operation": "create", "type": "configmaps"}
    assert value(after, "etcd_request_duration_seconds_count", **create) >= \
        value(before, "etcd_request_duration_seconds_count", **create) + 3
    assert ("etcd_request_duration_seconds_bucket", frozenset({**create, "le": "0.005"}.items())) in after
    for request_kind in ("readOnly", "mutating"):
        assert ("apiserver_current_inflight_requests", frozenset({("request_kind", request_kind)})) in after
    # One family each, process series of the gateway only (the members' own stay on their links).
    families = Counter(line.split()[2] for line in text.splitlines() if line.startswith("# TYPE "))
    assert families["apiserver_request_total"] == 1 and max(families.values()) == 1
    assert "process_cpu_seconds_total" in text


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_metrics_need_system_monitoring_under_rbac(chain: ChainHandle, namespace: str, version: str) -> None:
    from support.procs import kubectl_binary
    account = f"scraper-{version.replace('.', '')}"
    chain.kubectl("create", "serviceaccount", account, "-n", namespace)
    token = chain.kubectl("create", "token", account, "-n", namespace).stdout.strip()
    assert chain.request("GET", "/metrics", auth=False, headers={"Authorization": "Bearer not-a-token"})[0] == 401
    status, _h, body = chain.request("GET", "/metrics", auth=False)  # no credentials
    if chain.chain.anonymous_auth:  # kube's default: system:anonymous, refused by RBAC
        assert status == 403
        assert json.loads(body)["message"] == 'forbidden: User "system:anonymous" cannot get path "/metrics"'
    else:
        assert status == 401
    status, _h, body = chain.request("GET", "/metrics", auth=False, headers={"Authorization": f"Bearer {token}"})
    assert status == 403
    assert json.loads(body)["message"] == (f'forbidden: User "system:serviceaccount:{namespace}:{account}" cannot get '
                                           'path "/metrics"')
    chain.kubectl("create", "clusterrolebinding", f"{namespace}-{account}", "--clusterrole=system:monitoring",
                  f"--serviceaccount={namespace}:{account}")
    try:
        import subprocess
        deadline = time.monotonic() + 15
        while True:
            proc = subprocess.run([kubectl_binary(version), "--kubeconfig=/dev/null", f"--server={chain.url}",
                                   f"--certificate-authority={chain.chain.pki.ca}", f"--token={token}",
                                   "get", "--raw", "/metrics"], capture_output=True, text=True, timeout=60)
            if proc.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert proc.returncode == 0, proc.stderr
        assert "apiserver_request_total{" in proc.stdout and 'component="apiserver"' in proc.stdout
    finally:
        chain.kubectl("delete", "clusterrolebinding", f"{namespace}-{account}")
