"""``/readyz`` turns ready only once the chain is whole, as kube-apiserver's boot-sequence checks.

A client that waited for ``/readyz`` must find every built-in APIService registered and
Available (kube's ``autoregister-completion`` check): before, right after ``ok`` under load,
``kubectl get apiservices`` could say "No resources found".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.procs import ChainHandle

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("attempt", [1, 2])
def test_apiservices_are_all_there_once_readyz_says_ok(tmp_path: Path, attempt: int) -> None:
    chain = Chain(tmp_path / f"data{attempt}", port=free_port())
    try:
        chain.start(timeout=60)  # returns when the gateway's /readyz answers 200
        handle = ChainHandle(chain)
        status, listed = handle.json("GET", "/apis/apiregistration.k8s.io/v1/apiservices")
        assert status == 200
        names = {item["metadata"]["name"]: item for item in listed["items"]}
        for expected in ("v1.", "v1.apps", "v1.batch", "v2.autoscaling", "v1.apiextensions.k8s.io",
                         "v1.rbac.authorization.k8s.io"):
            assert expected in names, sorted(names)
            conditions = {c["type"]: c["status"] for c in names[expected]["status"]["conditions"]}
            assert conditions.get("Available") == "True", names[expected]
        _s, _h, body = handle.request("GET", "/readyz?verbose", auth=False)
        assert b"[+]autoregister-completion ok" in body
        status, _h, body = handle.request("GET", "/readyz/autoregister-completion")  # named: not public on kube
        assert (status, body) == (200, b"ok")
    finally:
        chain.stop()
