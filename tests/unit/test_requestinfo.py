"""kube's RequestInfoFactory in Python: the verb, resource, namespace and name of a request.

Expected values follow ``k8s.io/apiserver/pkg/endpoints/request/requestinfo_test.go`` and the
factory's code: a collection GET is list or watch (``?watch`` with Go's bool conversion, or the
``/watch/`` path), a DELETE without a name is deletecollection, ``fieldSelector=metadata.name=x``
names the object, a bad selector or integer falls back to reading ``watch`` alone.
"""

from __future__ import annotations

import pytest
from genericapi.apimachinery.requestinfo import RequestInfoError, parse_request_info


@pytest.mark.parametrize(("method", "path", "query", "expected"), [
    ("GET", "/api/v1/namespaces", "", ("list", "", "v1", "", "namespaces", "", "")),
    ("GET", "/api/v1/namespaces/other", "", ("get", "", "v1", "other", "namespaces", "other", "")),
    ("GET", "/api/v1/namespaces/other/pods", "", ("list", "", "v1", "other", "pods", "", "")),
    ("GET", "/api/v1/namespaces/other/pods/foo", "", ("get", "", "v1", "other", "pods", "foo", "")),
    ("HEAD", "/api/v1/namespaces/other/pods/foo", "", ("get", "", "v1", "other", "pods", "foo", "")),
    ("GET", "/api/v1/pods", "", ("list", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/namespaces/other/pods/foo/status", "", ("get", "", "v1", "other", "pods", "foo", "status")),
    ("GET", "/api/v1/watch/pods", "", ("watch", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/pods", "watch=true", ("watch", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/pods", "watch=false", ("list", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/pods", "watch=0", ("list", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/pods", "watch=FALSE", ("list", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/pods", "watch=1", ("watch", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/pods", "watch=", ("list", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/watch/namespaces/other/pods", "", ("watch", "", "v1", "other", "pods", "", "")),
    ("GET", "/api/v1/watch/namespaces/other/pods/foo", "", ("watch", "", "v1", "other", "pods", "foo", "")),
    ("POST", "/api/v1/namespaces/other/pods", "", ("create", "", "v1", "other", "pods", "", "")),
    ("PUT", "/api/v1/namespaces/other/pods/foo", "", ("update", "", "v1", "other", "pods", "foo", "")),
    ("PATCH", "/api/v1/namespaces/other/pods/foo", "", ("patch", "", "v1", "other", "pods", "foo", "")),
    ("DELETE", "/api/v1/namespaces/other/pods/foo", "", ("delete", "", "v1", "other", "pods", "foo", "")),
    ("DELETE", "/api/v1/namespaces/other/pods", "", ("deletecollection", "", "v1", "other", "pods", "", "")),
    ("PUT", "/api/v1/namespaces/other/finalize", "", ("update", "", "v1", "other", "namespaces", "other", "finalize")),
    ("PUT", "/api/v1/namespaces/other/status", "", ("update", "", "v1", "other", "namespaces", "other", "status")),
    ("GET", "/apis/apps/v1/namespaces/ns/deployments/web/scale", "",
     ("get", "apps", "v1", "ns", "deployments", "web", "scale")),
    ("GET", "/apis/apps/v1/deployments", "", ("list", "apps", "v1", "", "deployments", "", "")),
    ("GET", "/api/v1/namespaces/other/pods/foo/proxy/a/b", "",
     ("get", "", "v1", "other", "pods", "foo", "proxy")),
    ("GET", "/api/v1/proxy/namespaces/other/pods/foo/a/b", "", ("proxy", "", "v1", "other", "pods", "foo", "")),
    ("OPTIONS", "/api/v1/namespaces/other/pods/foo", "", ("", "", "v1", "other", "pods", "foo", "")),
    # the name from a field selector (list and watch of one object)
    ("GET", "/api/v1/namespaces/ns/configmaps", "fieldSelector=metadata.name%3Dcm1",
     ("list", "", "v1", "ns", "configmaps", "cm1", "")),
    ("GET", "/api/v1/namespaces/ns/configmaps", "watch=1&fieldSelector=metadata.name%3D%3Dcm1",
     ("watch", "", "v1", "ns", "configmaps", "cm1", "")),
    ("GET", "/api/v1/namespaces/ns/configmaps", "fieldSelector=metadata.name!%3Dcm1",
     ("list", "", "v1", "ns", "configmaps", "", "")),
    ("GET", "/api/v1/namespaces/ns/configmaps", "fieldSelector=metadata.name%3Da%25b",
     ("list", "", "v1", "ns", "configmaps", "", "")),
    ("GET", "/api/v1/namespaces/ns/configmaps", "fieldSelector=metadata.name%3D..",
     ("list", "", "v1", "ns", "configmaps", "", "")),
    # a bad selector or integer: kube keeps only watch (any value but false/0, even "")
    ("GET", "/api/v1/pods", "watch=&limit=x", ("watch", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/pods", "watch=false&timeoutSeconds=1.5", ("list", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/pods", "watch=yes&labelSelector=a%20in", ("watch", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/pods", "fieldSelector=bogus&watch=true", ("watch", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/pods", "fieldSelector=metadata.name%3Dx,bogus", ("list", "", "v1", "", "pods", "", "")),
])
def test_resource_requests(method: str, path: str, query: str, expected: tuple[str, ...]) -> None:
    info = parse_request_info(method, path, query)
    assert info.is_resource_request
    assert (info.verb, info.api_group, info.api_version, info.namespace, info.resource, info.name,
            info.subresource) == expected


@pytest.mark.parametrize(("method", "path", "verb"), [
    ("GET", "/", "get"),
    ("GET", "/api", "get"),
    ("GET", "/api/v1", "get"),
    ("GET", "/apis", "get"),
    ("GET", "/apis/apps", "get"),
    ("GET", "/apis/apps/v1", "get"),
    ("POST", "/debug/kubechain/faults", "post"),
    ("GET", "/healthz/etcd", "get"),
    ("GET", "/other/a/b/c", "get"),
    ("PUT", "/apis/apps/", "put"),
])
def test_non_resource_requests(method: str, path: str, verb: str) -> None:
    info = parse_request_info(method, path)
    assert not info.is_resource_request
    assert info.verb == verb
    assert info.path == path


def test_special_verb_without_a_resource_is_an_error() -> None:
    with pytest.raises(RequestInfoError, match="unable to determine kind and namespace from url"):
        parse_request_info("GET", "/api/v1/watch")
    with pytest.raises(RequestInfoError):
        parse_request_info("GET", "/apis/apps/v1/proxy/")
