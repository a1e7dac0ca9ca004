"""Anonymous requests as kube-apiserver 1.33 with ``--anonymous-auth=true`` (its default) answers them.

No credentials: ``system:anonymous`` in ``system:unauthenticated``, then authorized. With RBAC
(``kubechain up``) the bootstrap policy lets it read version and health only; everything else is
kube's 403 naming ``system:anonymous`` (discovery, resources, ``/metrics``, whoami), with kubectl
1.27 and 1.33 too; a ClusterRoleBinding to ``system:unauthenticated`` opens issuer discovery, as
kube's docs suggest. Credentials that do not authenticate stay a 401; a non-bearer Authorization
header is no credential. ``--anonymous-auth=false`` refuses every request without credentials (401),
health and version too: kube's authentication filter has no exception for them (hence KEP-4633's
anonymous paths); under AlwaysAllow anonymous may do everything, as on kube.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from support.procs import ChainHandle, kubectl_binary

from kubechain_cli.chain import free_port

pytestmark = pytest.mark.integration


def anonymous(chain: ChainHandle, path: str, method: str = "GET", headers: dict[str, str] | None = None,
              body: Any = None) -> tuple[int, Any]:
    status, _h, data = chain.request(method, path, body, headers=headers, auth=False)
    try:
        return status, json.loads(data)
    except ValueError:
        return status, data


def forbidden(message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": "Forbidden", "details": {}, "code": 403}


def test_anonymous_reads_version_and_health_only(chain: ChainHandle) -> None:
    for path in ("/version", "/version/", "/healthz", "/livez", "/readyz", "/readyz?verbose"):
        assert anonymous(chain, path)[0] == 200, path
    # system:public-info-viewer names exact URLs: a named check or another trailing slash is not one.
    for path in ("/readyz/etcd", "/livez/ping", "/healthz/", "/readyz/no-such-check"):
        refused = forbidden(f'forbidden: User "system:anonymous" cannot get path "{path}"')
        assert anonymous(chain, path) == (403, refused), path
    for path, code in (("/readyz/etcd", 200), ("/livez/ping", 200), ("/readyz/no-such-check", 404)):
        assert chain.request("GET", path)[0] == code, path  # the admin (system:masters) may
    assert anonymous(chain, "/api") == (403, forbidden('forbidden: User "system:anonymous" cannot get path "/api"'))
    assert anonymous(chain, "/apis")[0] == 403
    assert anonymous(chain, "/metrics") == (403, forbidden(
        'forbidden: User "system:anonymous" cannot get path "/metrics"'))
    status, body = anonymous(chain, "/api/v1/namespaces")
    assert (status, body["message"]) == (403, 'namespaces is forbidden: User "system:anonymous" cannot list '
                                              'resource "namespaces" in API group "" at the cluster scope')
    assert body["details"] == {"kind": "namespaces"}
    status, body = anonymous(chain, "/api/v1/namespaces/default/configmaps", "POST",
                             body={"metadata": {"name": "x"}})
    assert (status, body["message"]) == (403, 'configmaps is forbidden: User "system:anonymous" cannot create '
                                              'resource "configmaps" in API group "" in the namespace "default"')
    # system:basic-user is bound to system:authenticated only: anonymous may not even ask who it is.
    status, body = anonymous(chain, "/apis/authentication.k8s.io/v1/selfsubjectreviews", "POST",
                             body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert status == 403 and 'User "system:anonymous" cannot create resource "selfsubjectreviews"' in body["message"]


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_kubectl_with_basic_credentials_is_anonymous(chain: ChainHandle, version: str, tmp_path: Path) -> None:
    # kubectl prompts for a user name without credentials; given basic-auth ones it sends them, and
    # kube 1.33 (no basic auth since 1.19) ignores them: the request is anonymous.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "anon",
        "clusters": [{"name": "c", "cluster": {"server": chain.url, "certificate-authority": chain.chain.pki.ca}}],
        "users": [{"name": "anon", "user": {"username": "someone", "password": "secret"}}],
        "contexts": [{"name": "anon", "context": {"cluster": "c", "user": "anon"}}]}))
    base = [kubectl_binary(version), f"--kubeconfig={kubeconfig}"]
    listed = subprocess.run([*base, "get", "namespaces"], capture_output=True, text=True, timeout=60)
    # Discovery (/api) is refused first; kubectl's discovery client prints kube's 403 this way.
    assert listed.returncode != 0 and "Error from server (Forbidden)" in listed.stderr, listed.stderr
    raw = subprocess.run([*base, "get", "--raw", "/api/v1/namespaces"], capture_output=True, text=True, timeout=60)
    assert raw.returncode != 0
    assert 'User "system:anonymous" cannot list resource "namespaces"' in raw.stderr, raw.stderr
    shown = subprocess.run([*base, "version", "-o", "json"], capture_output=True, text=True, timeout=60)
    assert json.loads(shown.stdout)["serverVersion"]["gitVersion"].startswith("v1.33.")


def test_python_client_without_credentials(chain: ChainHandle) -> None:
    configuration = client.Configuration()
    configuration.host = chain.url
    configuration.ssl_ca_cert = chain.chain.pki.ca
    with client.ApiClient(configuration) as api:
        with pytest.raises(client.ApiException) as raised:
            client.CoreV1Api(api).list_namespaced_config_map("default")
        assert raised.value.status == 403
        assert json.loads(raised.value.body)["message"] == (
            'configmaps is forbidden: User "system:anonymous" cannot list resource "configmaps" in API group "" '
            'in the namespace "default"')
        assert client.VersionApi(api).get_code().git_version.startswith("v1.33.")


UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


def test_bad_credentials_stay_401_and_basic_is_no_credential(chain: ChainHandle) -> None:
    unauthorized = UNAUTHORIZED
    for token in ("abc123", "a.b.c", "abcdef.0123456789abcdef"):
        for path in ("/version", "/api/v1/namespaces"):
            assert anonymous(chain, path, headers={"Authorization": f"Bearer {token}"}) == (401, unauthorized)
    # The scheme in any case, the token the second space-separated field (here abc123): refused.
    assert anonymous(chain, "/version", headers={"Authorization": "bearer abc123 trailing"}) == (401, unauthorized)
    # kube's bearer authenticator ignores other schemes and an empty token: the request is anonymous.
    # Split on single spaces as kube splits, "Bearer  abc123" has an empty token: no credential either.
    for header in ("Basic YWxpY2U6c2VjcmV0", "Bearer ", "Bearer", "Bearer  abc123"):
        assert anonymous(chain, "/version", headers={"Authorization": header})[0] == 200, header
        assert anonymous(chain, "/api", headers={"Authorization": header})[0] == 403, header


def test_a_binding_to_unauthenticated_opens_issuer_discovery(chain: ChainHandle) -> None:
    assert anonymous(chain, "/openid/v1/jwks") == (403, forbidden(
        'forbidden: User "system:anonymous" cannot get path "/openid/v1/jwks"'))
    name = f"oidc-anonymous-{uuid.uuid4().hex[:6]}"
    chain.kubectl("create", "clusterrolebinding", name, "--clusterrole=system:service-account-issuer-discovery",
                  "--group=system:unauthenticated")
    try:
        deadline = time.monotonic() + 10
        while anonymous(chain, "/openid/v1/jwks")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        status, body = anonymous(chain, "/openid/v1/jwks")
        assert status == 200 and body["keys"][0]["use"] == "sig"
        assert anonymous(chain, "/.well-known/openid-configuration")[0] == 200
        assert anonymous(chain, "/api")[0] == 403  # that binding grants nothing else
    finally:
        chain.kubectl("delete", "clusterrolebinding", name)
    deadline = time.monotonic() + 10
    while anonymous(chain, "/openid/v1/jwks")[0] != 403 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert anonymous(chain, "/openid/v1/jwks")[0] == 403


def _gateway(chain: ChainHandle, *flags: str) -> Iterator[str]:
    """One more aggregator on the session chain with its own flags; its URL."""
    argv = list(chain.chain.commands["aggregator"])
    port = free_port()
    argv[argv.index("--secure-port") + 1] = str(port)
    for flag in flags:
        name = flag.split("=", 1)[0]
        if name in argv:  # replace "--flag value"
            at = argv.index(name)
            del argv[at:at + 2]
        argv.append(flag)
    proc = chain.chain.add_process(f"aggregator-anon-{port}", argv)
    url = f"https://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, f"gateway exited with {proc.returncode}"
        try:
            with urllib.request.urlopen(url + "/readyz", context=chain.ssl_context(), timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        assert time.monotonic() < deadline, "gateway not ready in 60 s"
        time.sleep(0.1)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture(scope="module")
def no_anonymous_gateway(chain: ChainHandle) -> Iterator[str]:
    yield from _gateway(chain, "--anonymous-auth=false")


@pytest.fixture(scope="module")
def always_allow_gateway(chain: ChainHandle) -> Iterator[str]:
    yield from _gateway(chain, "--authorization-mode=AlwaysAllow")


def _get(chain: ChainHandle, url: str, path: str) -> tuple[int, Any]:
    ctx = ssl.create_default_context(cafile=chain.chain.pki.ca)
    try:
        with urllib.request.urlopen(url + path, context=ctx, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_anonymous_auth_false_is_a_401(chain: ChainHandle, no_anonymous_gateway: str) -> None:
    status, body = _get(chain, no_anonymous_gateway, "/api/v1/namespaces")
    assert (status, body["reason"]) == (401, "Unauthorized")
    for path in ("/metrics", "/version", "/healthz", "/livez", "/readyz", "/api"):
        assert _get(chain, no_anonymous_gateway, path) == (401, UNAUTHORIZED), path
    # A client certificate still authenticates.
    ctx = chain.ssl_context()
    with urllib.request.urlopen(no_anonymous_gateway + "/api/v1/namespaces/default", context=ctx, timeout=30) as r:
        assert r.status == 200


def test_always_allow_gives_anonymous_everything(chain: ChainHandle, always_allow_gateway: str) -> None:
    status, body = _get(chain, always_allow_gateway, "/api/v1/namespaces")
    assert status == 200 and any(ns["metadata"]["name"] == "default" for ns in body["items"])
    ctx = ssl.create_default_context(cafile=chain.chain.pki.ca)
    req = urllib.request.Request(always_allow_gateway + "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                 data=b'{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}',
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
        review = json.loads(r.read())
    assert review["status"]["userInfo"] == {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
