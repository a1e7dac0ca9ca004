"""``/readyz``, ``/livez`` and ``/healthz`` name kube-apiserver 1.33's checks, at the gateway and at
each backend, as a real 1.33 server lists them.

The reference is a kubeadm v1.33.1 control plane's ``kubectl get --raw='/readyz?verbose'`` (below).
kubechain splits kube-apiserver into links, so each link lists the checks of the work it does;
every name it prints is kube's, except the gateway's ``backends`` (the links behind it), which
kube has no equivalent for. Checks kubechain has no equivalent for (admission initializer, the
APF filter's own hook, identity leases, legacy token tracking, proxy client cert reloading) are
not listed. API Priority and Fairness is split as the chain is: core-api keeps the configuration
objects (the producer), the gateway classifies and queues (the consumer).
"""

from __future__ import annotations

import http.client
import socket

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

KUBE_1_33_READYZ = """\
[+]ping ok
[+]log ok
[+]etcd ok
[+]etcd-readiness ok
[+]informer-sync ok
[+]poststarthook/start-apiserver-admission-initializer ok
[+]poststarthook/generic-apiserver-start-informers ok
[+]poststarthook/priority-and-fairness-config-consumer ok
[+]poststarthook/priority-and-fairness-filter ok
[+]poststarthook/storage-object-count-tracker-hook ok
[+]poststarthook/start-apiextensions-informers ok
[+]poststarthook/start-apiextensions-controllers ok
[+]poststarthook/crd-informer-synced ok
[+]poststarthook/start-system-namespaces-controller ok
[+]poststarthook/start-cluster-authentication-info-controller ok
[+]poststarthook/start-kube-apiserver-identity-lease-controller ok
[+]poststarthook/start-kube-apiserver-identity-lease-garbage-collector ok
[+]poststarthook/start-legacy-token-tracking-controller ok
[+]poststarthook/start-service-ip-repair-controllers ok
[+]poststarthook/rbac/bootstrap-roles ok
[+]poststarthook/scheduling/bootstrap-system-priority-classes ok
[+]poststarthook/priority-and-fairness-config-producer ok
[+]poststarthook/bootstrap-controller ok
[+]poststarthook/start-kubernetes-service-cidr-controller ok
[+]poststarthook/aggregator-reload-proxy-client-cert ok
[+]poststarthook/start-kube-aggregator-informers ok
[+]poststarthook/apiservice-status-local-available-controller ok
[+]poststarthook/apiservice-status-remote-available-controller ok
[+]poststarthook/apiservice-registration-controller ok
[+]poststarthook/apiservice-discovery-controller ok
[+]poststarthook/kube-apiserver-autoregistration ok
[+]autoregister-completion ok
[+]poststarthook/apiservice-openapi-controller ok
[+]poststarthook/apiservice-openapiv3-controller ok
[+]shutdown ok
readyz check passed
"""
KUBE_NAMES = [line[3:-3] for line in KUBE_1_33_READYZ.splitlines() if line.startswith("[+]")]

#: What each link runs of kube-apiserver's list (in kube's order).
EXPECTED = {
    "aggregator": ["ping", "log", "etcd", "etcd-readiness", "informer-sync",
                   "poststarthook/priority-and-fairness-config-consumer",
                   "poststarthook/start-kube-aggregator-informers",
                   "poststarthook/apiservice-status-local-available-controller",
                   "poststarthook/apiservice-status-remote-available-controller",
                   "poststarthook/apiservice-registration-controller", "poststarthook/apiservice-discovery-controller",
                   "poststarthook/kube-apiserver-autoregistration", "autoregister-completion",
                   "poststarthook/apiservice-openapi-controller", "poststarthook/apiservice-openapiv3-controller",
                   "shutdown"],
    "core-api": ["ping", "log", "etcd", "etcd-readiness", "informer-sync",
                 "poststarthook/generic-apiserver-start-informers", "poststarthook/start-system-namespaces-controller",
                 "poststarthook/start-service-ip-repair-controllers", "poststarthook/rbac/bootstrap-roles",
                 "poststarthook/scheduling/bootstrap-system-priority-classes",
                 "poststarthook/priority-and-fairness-config-producer", "poststarthook/bootstrap-controller",
                 "poststarthook/start-kubernetes-service-cidr-controller", "shutdown"],
    "extensions-api": ["ping", "log", "etcd", "etcd-readiness", "informer-sync",
                       "poststarthook/generic-apiserver-start-informers",
                       "poststarthook/start-apiextensions-informers", "poststarthook/start-apiextensions-controllers",
                       "poststarthook/crd-informer-synced", "shutdown"],
}
#: The gateway's own check: its links answer (kube-apiserver is one process).
KUBECHAIN_ONLY = {"backends"}


class _Unix(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=10)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


def get(chain: ChainHandle, link: str, path: str) -> tuple[int, str]:
    if link == "aggregator":
        status, _h, body = chain.request("GET", path)  # named checks: system:masters only, as on kube
        return status, body.decode()
    url = chain.chain.backend_urls[link]
    assert url.startswith("unix://")
    conn = _Unix(url.removeprefix("unix://"))
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def names(body: str) -> list[str]:
    return [line[3:].rsplit(" ", 1)[0] for line in body.splitlines() if line.startswith("[+]")]


@pytest.mark.parametrize("link", sorted(EXPECTED))
def test_each_link_lists_kubes_checks_in_kubes_order(chain: ChainHandle, link: str) -> None:
    status, body = get(chain, link, "/readyz?verbose")
    assert status == 200 and body.endswith("readyz check passed\n"), body
    listed = names(body)
    assert set(listed) - KUBECHAIN_ONLY <= set(KUBE_NAMES), body
    assert sorted(set(listed) - KUBECHAIN_ONLY) == sorted(EXPECTED[link])
    ours = [n for n in listed if n in KUBE_NAMES]
    assert ours == sorted(ours, key=KUBE_NAMES.index), ours


@pytest.mark.parametrize("link", sorted(EXPECTED))
def test_liveness_has_the_post_start_hooks_but_no_readiness_only_checks(chain: ChainHandle, link: str) -> None:
    for kind in ("livez", "healthz"):
        status, body = get(chain, link, f"/{kind}?verbose")
        assert status == 200 and body.endswith(f"{kind} check passed\n"), body
        listed = names(body)
        assert not {"informer-sync", "etcd-readiness", "shutdown", "autoregister-completion"} & set(listed)
        assert [n for n in EXPECTED[link] if n.startswith("poststarthook/")] == \
            [n for n in listed if n.startswith("poststarthook/")]


def test_single_checks_exclusions_and_unknown_names(chain: ChainHandle) -> None:
    assert get(chain, "aggregator", "/readyz/poststarthook/apiservice-registration-controller") == (200, "ok")
    assert get(chain, "core-api", "/livez/poststarthook/rbac/bootstrap-roles") == (200, "ok")
    assert get(chain, "aggregator", "/readyz/shutdown") == (200, "ok")
    assert get(chain, "aggregator", "/readyz/no-such-check")[0] == 404
    status, body = get(chain, "aggregator", "/readyz?verbose&exclude=etcd&exclude=no-such-check")
    assert status == 200
    assert "[+]etcd excluded: ok\n" in body
    assert 'warn: some health checks cannot be excluded: no matches for "no-such-check"\n' in body
    assert get(chain, "extensions-api", "/readyz?exclude=etcd") == (200, "ok")
