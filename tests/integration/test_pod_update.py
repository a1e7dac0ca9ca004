"""Pod updates through the real chain: kube-apiserver 1.33 lets a client change images, deadlines,
tolerations (additions) and metadata of a Pod, and rejects other spec changes with 422 Invalid."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.procs import ChainHandle

pytestmark = pytest.mark.integration

NS = "pod-update"
FIRST_LINE = ("pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
              "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
              "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)")
TOLERATION = {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}


def path(name: str = "") -> str:
    return f"/api/v1/namespaces/{NS}/pods" + (f"/{name}" if name else "")


@pytest.fixture(scope="module")
def ns(chain: ChainHandle) -> str:
    chain.kubectl("create", "namespace", NS)
    return NS


def make(chain: ChainHandle, name: str, **spec: Any) -> dict[str, Any]:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}], **spec}}
    status, created = chain.json("POST", path(), body)
    assert status == 201, created
    return created  # type: ignore[no-any-return]


def patch(chain: ChainHandle, name: str, body: dict[str, Any], check: bool = True) -> Any:
    return chain.kubectl("patch", "pod", name, "-n", NS, "--type=merge", "-p", json.dumps(body), check=check)


def test_image_change_via_set_image(chain: ChainHandle, ns: str) -> None:
    make(chain, "img")
    chain.kubectl("set", "image", "pod/img", "web=nginx:1.26", "-n", ns)
    assert chain.json("GET", path("img"))[1]["spec"]["containers"][0]["image"] == "nginx:1.26"
    proc = chain.kubectl("set", "image", "pod/img", "web= nginx:1.27", "-n", ns, check=False)
    assert proc.returncode != 0


def test_env_change_rejected_with_kubes_message(chain: ChainHandle, ns: str) -> None:
    pod = make(chain, "env")
    proc = patch(chain, "env", {"spec": {"containers": [{"name": "web", "image": "nginx:1.25",
                                                         "env": [{"name": "A", "value": "1"}]}]}}, check=False)
    assert proc.returncode != 0
    assert f'The Pod "env" is invalid: spec: Forbidden: {FIRST_LINE}\n' in proc.stderr
    pod["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    status, body = chain.json("PUT", path("env"), pod)
    assert status == 422, body
    assert body["reason"] == "Invalid" and body["kind"] == "Status"
    assert body["message"].startswith(f'Pod "env" is invalid: spec: Forbidden: {FIRST_LINE}\n')
    causes = body["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec"]
    assert causes[0]["reason"] == "FieldValueForbidden"
    assert causes[0]["message"].split("\n")[0] == f"Forbidden: {FIRST_LINE}"
    assert "spec.containers[0].env" in causes[0]["message"]
    live = chain.json("GET", path("env"))[1]
    assert "env" not in live["spec"]["containers"][0]
    assert live["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"]


def test_tolerations_only_grow(chain: ChainHandle, ns: str) -> None:
    created = make(chain, "tol", tolerations=[TOLERATION])
    keys = [t.get("key") for t in created["spec"]["tolerations"]]  # admission adds the not-ready/unreachable ones
    both = [TOLERATION, {"key": "extra", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]
    patch(chain, "tol", {"spec": {"tolerations": both}})
    assert [t.get("key") for t in chain.json("GET", path("tol"))[1]["spec"]["tolerations"]] == ["k", "extra", *keys[1:]]
    proc = patch(chain, "tol", {"spec": {"tolerations": [both[1]]}}, check=False)
    assert proc.returncode != 0
    assert ("spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
            in proc.stderr)
    assert [t.get("key") for t in chain.json("GET", path("tol"))[1]["spec"]["tolerations"]] == ["k", "extra", *keys[1:]]


def test_active_deadline_seconds(chain: ChainHandle, ns: str) -> None:
    make(chain, "deadline")
    patch(chain, "deadline", {"spec": {"activeDeadlineSeconds": 600}})
    patch(chain, "deadline", {"spec": {"activeDeadlineSeconds": 300}})
    assert chain.json("GET", path("deadline"))[1]["spec"]["activeDeadlineSeconds"] == 300
    proc = patch(chain, "deadline", {"spec": {"activeDeadlineSeconds": 900}}, check=False)
    assert proc.returncode != 0
    assert ('The Pod "deadline" is invalid: spec.activeDeadlineSeconds: Invalid value: 900: must be less than or '
            "equal to previous value") in proc.stderr
    proc = patch(chain, "deadline", {"spec": {"activeDeadlineSeconds": None}}, check=False)
    assert 'spec.activeDeadlineSeconds: Invalid value: "null": must not update from a positive integer to nil value' \
        in proc.stderr
    assert chain.json("GET", path("deadline"))[1]["spec"]["activeDeadlineSeconds"] == 300


def test_metadata_changes_allowed(chain: ChainHandle, ns: str) -> None:
    make(chain, "meta")
    chain.kubectl("label", "pod", "meta", "tier=front", "-n", ns)
    chain.kubectl("annotate", "pod", "meta", "note=hello", "-n", ns)
    live = chain.json("GET", path("meta"))[1]
    assert live["metadata"]["labels"] == {"tier": "front"}
    assert live["metadata"]["annotations"]["note"] == "hello"
    proc = chain.kubectl("annotate", "pod", "meta", "kubernetes.io/config.mirror=x", "-n", ns, check=False)
    assert "metadata.annotations[kubernetes.io/config.mirror]: Forbidden: may not add mirror pod annotation" \
        in proc.stderr


def test_status_update_is_not_a_spec_update(chain: ChainHandle, ns: str) -> None:
    pod = make(chain, "stat", activeDeadlineSeconds=60)
    pod["status"]["phase"] = "Running"
    pod["spec"]["containers"][0]["env"] = [{"name": "IGNORED", "value": "1"}]  # spec is ignored on /status
    status, body = chain.json("PUT", path("stat") + "/status", pod)
    assert status == 200, body
    assert body["status"]["phase"] == "Running"
    assert "env" not in body["spec"]["containers"][0]
