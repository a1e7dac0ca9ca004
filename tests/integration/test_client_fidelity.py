"""What client libraries' own test suites (kr8s's, run by ``./dev clients``) rely on, checked on the wire.

Each test is one request a client made while its suite ran against kubechain, with what kube-apiserver
1.33 answers to it. Some pin behaviour kubechain already matches and the client's suite depends on (a
watch from an object's own resourceVersion starts *after* it, which is why kr8s's ``pod.watch()`` tests
need a kubelet to change the pod); the ones marked xfail are kubechain gaps still open, with kube's answer
written down so the test turns green (and strict xfail fails) once the gap is closed.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

NS = "default"


def _bearer_json(chain: ChainHandle, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(chain.url + path, data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    ctx = ssl.create_default_context(cafile=chain.chain.pki.ca)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_watch_from_an_objects_resource_version_starts_after_it(chain: ChainHandle) -> None:
    """kr8s's ``obj.watch()`` watches ``fieldSelector=metadata.name=<name>`` from the object's own
    resourceVersion. kube sends only events newer than that version: nothing until the object changes,
    then MODIFIED (in kind the scheduler and kubelet make that change; kubechain has neither)."""
    name = f"watch-{uuid.uuid4().hex[:8]}"
    status, cm = chain.json("POST", f"/api/v1/namespaces/{NS}/configmaps",
                            {"metadata": {"name": name}, "data": {"a": "1"}})
    assert status == 201
    rv = cm["metadata"]["resourceVersion"]
    path = (f"/api/v1/namespaces/{NS}/configmaps?watch=true&fieldSelector=metadata.name%3D{name}"
            f"&resourceVersion={rv}&timeoutSeconds=2")
    status, _h, body = chain.request("GET", path)
    assert status == 200 and body == b""  # no ADDED replayed for the version the client already has
    status, patched = chain.json("PATCH", f"/api/v1/namespaces/{NS}/configmaps/{name}", {"data": {"a": "2"}},
                                 headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200
    status, _h, body = chain.request("GET", path)
    events = [json.loads(line) for line in body.splitlines()]
    assert status == 200
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in events] == \
        [("MODIFIED", patched["metadata"]["resourceVersion"])]
    chain.json("DELETE", f"/api/v1/namespaces/{NS}/configmaps/{name}")


def test_token_request_for_a_service_account_authenticates_as_it(chain: ChainHandle) -> None:
    """``kubectl create token pytest`` (kr8s's ``k8s_token`` fixture): POST a TokenRequest to the account's
    ``token`` subresource. kube-apiserver 1.33: 201 with ``status.token`` (a signed JWT) and
    ``status.expirationTimestamp``; the token then authenticates as ``system:serviceaccount:<ns>:<name>``
    (kr8s's test_token asserts whoami). kubechain before TokenRequest was served: 404 NotFound ("the server
    could not find the requested resource")."""
    name = f"sa-{uuid.uuid4().hex[:8]}"
    assert chain.json("POST", f"/api/v1/namespaces/{NS}/serviceaccounts", {"metadata": {"name": name}})[0] == 201
    status, review = chain.json("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/{name}/token",
                                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    assert status == 201, review
    assert review["kind"] == "TokenRequest" and review["apiVersion"] == "authentication.k8s.io/v1"
    assert review["status"]["token"] and review["status"]["expirationTimestamp"]
    assert review["spec"]["expirationSeconds"] == 3600
    status, who = _bearer_json(chain, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                               review["status"]["token"],
                               {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert status == 201, who
    assert who["status"]["userInfo"]["username"] == f"system:serviceaccount:{NS}:{name}"


def test_token_request_for_a_missing_service_account_is_not_found(chain: ChainHandle) -> None:
    """Same request for an account that does not exist. kube-apiserver 1.33 (the token REST checks the
    account first): 404 NotFound, ``serviceaccounts "<name>" not found``."""
    status, body = chain.json("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/no-such-account/token",
                              {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    assert status == 404
    assert body["kind"] == "Status" and body["reason"] == "NotFound" and body["code"] == 404
    assert body["message"] == 'serviceaccounts "no-such-account" not found'
