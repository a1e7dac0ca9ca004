"""While etcd is down: clean answers that tell clients to come back, and reads the cache can serve.

kube-apiserver interprets an unreachable etcd as ``ServerTimeout`` (``The create operation against
configmaps could not be completed at this time, please try again.``) with ``Retry-After``, which
client-go and kubectl retry on their own; ``resourceVersion=0`` reads and watches are served from
the watch cache. A chain of its own (no supervisor: the test decides when etcd comes back).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.procs import ChainHandle, kubectl_binary

from kubechain_cli.chain import Chain, free_port

pytestmark = pytest.mark.integration

CMS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
def outage_chain(tmp_path: Path) -> Iterator[ChainHandle]:
    chain = Chain(tmp_path / "data", port=free_port())
    try:
        chain.start(timeout=60)
        yield ChainHandle(chain)
    finally:
        chain.stop()


def stop_etcd(handle: ChainHandle) -> None:
    proc = handle.chain.processes["etcd"]
    proc.kill()
    proc.wait(10)


def test_requests_during_an_etcd_outage(outage_chain: ChainHandle) -> None:
    h = outage_chain
    h.kubectl("create", "configmap", "kept", "--from-literal=a=b")
    stop_etcd(h)

    status, headers, body = h.request("POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                                                    "metadata": {"name": "during"}})
    assert status == 500, body
    assert headers.get("retry-after") == "2"
    st = json.loads(body)
    assert st["reason"] == "ServerTimeout"
    assert st["message"] == ("The create operation against configmaps could not be completed at this time, "
                             "please try again.")
    assert st["details"] == {"name": "create", "kind": "configmaps", "retryAfterSeconds": 2}

    status, headers, body = h.request("GET", f"{CMS}/kept")
    assert status == 500 and headers.get("retry-after") == "2"
    assert json.loads(body)["message"].startswith("The get operation against configmaps")
    status, _h, body = h.request("GET", CMS)
    assert status == 500 and json.loads(body)["details"]["name"] == "list"

    # What the watch cache holds is still served, as kube's cacher does.
    status, _h, body = h.request("GET", f"{CMS}/kept?resourceVersion=0")
    assert status == 200 and json.loads(body)["data"] == {"a": "b"}
    status, _h, body = h.request("GET", f"{CMS}?resourceVersion=0")
    assert status == 200 and "kept" in {i["metadata"]["name"] for i in json.loads(body)["items"]}

    h.chain.respawn("etcd")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and h.request("GET", f"{CMS}/kept")[0] != 200:
        time.sleep(0.2)
    assert h.request("GET", f"{CMS}/kept")[0] == 200


def test_kubectl_rides_out_a_short_outage_by_itself(outage_chain: ChainHandle) -> None:
    h = outage_chain
    stop_etcd(h)
    env = dict(os.environ, KUBECONFIG=h.kubeconfig)
    proc = subprocess.Popen([kubectl_binary(""), "create", "configmap", "patient", "--from-literal=x=y"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)  # kubectl is waiting out Retry-After meanwhile
    assert proc.poll() is None, proc.communicate()
    h.chain.respawn("etcd")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "configmap/patient created" in out
