"""The gateway labels request metrics with kube's verbs (CanonicalVerb + CleanVerb), from the one RequestInfo parse."""

from __future__ import annotations

import pytest
from genericapi.apimachinery.requestinfo import parse_request_info
from genericapi.server.metrics import metric_verb


@pytest.mark.parametrize(("method", "path", "query", "ctype", "verb"), [
    ("GET", "/api/v1/namespaces/d/pods", "", "", "LIST"),
    ("GET", "/api/v1/namespaces/d/pods", "watch=yes", "", "WATCH"),
    ("GET", "/api/v1/watch/namespaces/d/pods", "", "", "WATCH"),
    ("GET", "/api/v1/namespaces/d/pods/p", "", "", "GET"),
    ("POST", "/apis/apps/v1/namespaces/d/deployments", "", "application/json", "POST"),
    ("PUT", "/apis/apps/v1/namespaces/d/deployments/x/scale", "", "application/json", "PUT"),
    ("PATCH", "/api/v1/namespaces/d/configmaps/c", "", "application/merge-patch+json", "PATCH"),
    ("PATCH", "/api/v1/namespaces/d/configmaps/c", "", "application/apply-patch+yaml; charset=utf-8", "APPLY"),
    ("DELETE", "/api/v1/namespaces/d/configmaps", "", "", "DELETE"),  # kube: DELETE, not DELETECOLLECTION
    ("DELETE", "/api/v1/namespaces/d/configmaps/c", "", "", "DELETE"),
    ("GET", "/healthz", "", "", "GET"),
])
def test_metric_verbs(method: str, path: str, query: str, ctype: str, verb: str) -> None:
    assert metric_verb(parse_request_info(method, path, query), ctype) == verb
