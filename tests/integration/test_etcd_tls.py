"""etcd as kube-apiserver expects it: client TLS with a certificate the etcd CA signed.

``kubechain up`` starts etcd with ``--client-cert-auth`` and its own CA in the data dir (kubeadm's
``etcd/ca.crt``); the services get kube's ``--etcd-cafile/--etcd-certfile/--etcd-keyfile``. Nothing
reads etcd without that client certificate: not plain HTTP, not TLS without a certificate, not a
certificate of the API's CA (what ``kubechain kubeconfig user`` hands out to people).
"""

from __future__ import annotations

import subprocess

import pytest
from support.coreapi_procs import etcdctl
from support.procs import ChainHandle

from kubechain_cli.chain import etcd_binary

pytestmark = pytest.mark.integration


def etcdctl_as(endpoints: str, *flags: str) -> subprocess.CompletedProcess[bytes]:
    binary = etcd_binary().rsplit("/", 1)[0] + "/etcdctl"
    return subprocess.run([binary, "--endpoints", endpoints, "--command-timeout=3s", "--dial-timeout=2s", *flags,
                           "get", "/registry/", "--prefix", "--keys-only", "--limit=1"],
                          capture_output=True, timeout=30)


def test_etcd_needs_the_etcd_client_certificate(chain: ChainHandle) -> None:
    c = chain.chain
    assert c.etcd_endpoints.startswith("https://127.0.0.1:")
    pki = c.pki
    # the services' certificate reads (as the support helper does)
    assert etcdctl(c.etcd_endpoints, "get", "/registry/namespaces/default", "--keys-only").strip() \
        == b"/registry/namespaces/default"
    refused = {
        "plain HTTP": etcdctl_as(c.etcd_endpoints.replace("https://", "http://")),
        "TLS without a certificate": etcdctl_as(c.etcd_endpoints, "--cacert", pki.etcd_ca),
        "the API CA's admin certificate": etcdctl_as(c.etcd_endpoints, "--cacert", pki.etcd_ca,
                                                     "--cert", pki.pair("admin")[0], "--key", pki.pair("admin")[1]),
    }
    for how, proc in refused.items():
        assert proc.returncode != 0 and proc.stdout == b"", f"{how} read etcd: {proc.stdout!r}"
    no_cert = refused["TLS without a certificate"].stderr.decode()
    assert "bad certificate" in no_cert or "certificate required" in no_cert, no_cert


def test_services_are_given_kube_apiservers_etcd_flags(chain: ChainHandle) -> None:
    c = chain.chain
    for name, argv in c.commands.items():
        if name == "etcd":
            assert "--client-cert-auth" in argv and argv[argv.index("--trusted-ca-file") + 1] == c.pki.etcd_ca
            continue
        assert argv[argv.index("--etcd-cafile") + 1] == c.pki.etcd_ca, name
        assert argv[argv.index("--etcd-certfile") + 1] == c.pki.etcd_client[0], name
        assert argv[argv.index("--etcd-keyfile") + 1] == c.pki.etcd_client[1], name
