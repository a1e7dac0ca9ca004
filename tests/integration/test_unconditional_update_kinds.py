"""Through the chain: the built-in kinds whose kube strategy refuses an unconditional update.

kube 1.33's ``Store.Update`` lets a PUT that names no resourceVersion replace the stored object only
when the kind's strategy answers true to AllowUnconditionalUpdate. These kinds answer false
(k8s.io/kubernetes v1.33 pkg/registry/**/strategy.go, kube-aggregator's apiservice strategy; their
status strategies embed the main one): Lease, PodDisruptionBudget (+status), the webhook
configurations, ValidatingAdmissionPolicy (+status) and its binding, RuntimeClass, CSIDriver, CSINode,
CSIStorageCapacity, VolumeAttachment (+status) and APIService (+status). For each, a PUT without a
version is kube's 422 (the whole Status compared), the current version is 200, a stale one is 409.
A kind whose strategy answers true (StorageClass) still takes the PUT without a version. kubectl
replace (1.27 and 1.33) fills in the version when the file has none, as its resource helper does,
and is refused with kube's wording when the file says "0".
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from support.procs import ChainHandle, kubectl_params

pytestmark = pytest.mark.integration

_NONE = {"nonexistent-unconditional-update-test": "1"}


def _kinds(n: str) -> list[tuple[str, str, str, dict[str, Any], bool]]:
    """(path of the collection, plural.group as kube words it, kind, body, has status)."""
    ar = "admissionregistration.k8s.io"
    return [
        ("/apis/coordination.k8s.io/v1/namespaces/default/leases", "leases.coordination.k8s.io", "Lease",
         {"spec": {"holderIdentity": "a"}}, False),
        ("/apis/policy/v1/namespaces/default/poddisruptionbudgets", "poddisruptionbudgets.policy",
         "PodDisruptionBudget", {"spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": n}}}}, True),
        (f"/apis/{ar}/v1/mutatingwebhookconfigurations", f"mutatingwebhookconfigurations.{ar}",
         "MutatingWebhookConfiguration", {}, False),
        (f"/apis/{ar}/v1/validatingwebhookconfigurations", f"validatingwebhookconfigurations.{ar}",
         "ValidatingWebhookConfiguration", {}, False),
        (f"/apis/{ar}/v1/validatingadmissionpolicies", f"validatingadmissionpolicies.{ar}",
         "ValidatingAdmissionPolicy", {"spec": {
             "matchConstraints": {"namespaceSelector": {"matchLabels": _NONE}, "resourceRules": [{
                 "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
             "validations": [{"expression": "true"}]}}, True),
        (f"/apis/{ar}/v1/validatingadmissionpolicybindings", f"validatingadmissionpolicybindings.{ar}",
         "ValidatingAdmissionPolicyBinding", {"spec": {
             "policyName": n, "validationActions": ["Deny"],
             "matchResources": {"namespaceSelector": {"matchLabels": _NONE}}}}, False),
        ("/apis/node.k8s.io/v1/runtimeclasses", "runtimeclasses.node.k8s.io", "RuntimeClass",
         {"handler": "runc"}, False),
        ("/apis/storage.k8s.io/v1/csidrivers", "csidrivers.storage.k8s.io", "CSIDriver",
         {"spec": {"attachRequired": True}}, False),
        ("/apis/storage.k8s.io/v1/csinodes", "csinodes.storage.k8s.io", "CSINode", {"spec": {"drivers": []}}, False),
        ("/apis/storage.k8s.io/v1/namespaces/default/csistoragecapacities", "csistoragecapacities.storage.k8s.io",
         "CSIStorageCapacity", {"storageClassName": "sc1"}, False),
        ("/apis/storage.k8s.io/v1/volumeattachments", "volumeattachments.storage.k8s.io", "VolumeAttachment",
         {"spec": {"attacher": "a.csi.example.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}}},
         True),
        ("/apis/apiregistration.k8s.io/v1/apiservices", "apiservices.apiregistration.k8s.io", "APIService",
         {"spec": {"group": f"{n}.example.com", "version": "v1", "groupPriorityMinimum": 100,
                   "versionPriority": 10, "service": {"namespace": "default", "name": n, "port": 443},
                   "insecureSkipTLSVerify": True}}, True),
    ]


def _invalid(qualified: str, name: str) -> dict[str, Any]:
    """kube's answer: NewInvalid(GroupKind{group, resource}, name, [Invalid(metadata.resourceVersion, 0)])."""
    plural, _, group = qualified.partition(".")
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'{qualified} "{name}" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
                       "must be specified for an update",
            "reason": "Invalid",
            "details": {"name": name, "group": group, "kind": plural, "causes": [{
                "reason": "FieldValueInvalid", "message": "Invalid value: 0x0: must be specified for an update",
                "field": "metadata.resourceVersion"}]},
            "code": 422}


def _labelled(obj: dict[str, Any], value: str, rv: str | None) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    meta["labels"] = {"t": value}
    if rv is not None:
        meta["resourceVersion"] = rv
    return {**obj, "metadata": meta}


def _put_current(chain: ChainHandle, path: str, value: str) -> dict[str, Any]:
    """PUT with the version just read; again on a 409 (a controller may write status meanwhile)."""
    for _ in range(10):
        status, current = chain.json("GET", path)
        assert status == 200, current
        status, body = chain.json("PUT", path, _labelled(current, value, current["metadata"]["resourceVersion"]))
        if status == 200:
            assert body["metadata"]["labels"] == {"t": value}, body
            return dict(body)
        assert status == 409 and body["reason"] == "Conflict", body
    raise AssertionError(f"PUT {path}: conflicts on every attempt")


@pytest.mark.parametrize("index", range(12))
def test_put_without_version_is_kubes_422(chain: ChainHandle, index: int) -> None:
    short = f"uu-{uuid.uuid4().hex[:8]}"
    base, qualified, kind, body, has_status = _kinds(short)[index]
    name = f"v1.{short}.example.com" if kind == "APIService" else short  # an APIService is <version>.<group>
    group_version = base.split("/")[2] + "/" + base.split("/")[3]
    status, created = chain.json("POST", base, {"apiVersion": group_version, "kind": kind,
                                                "metadata": {"name": name}, **body})
    assert status == 201, created
    path = f"{base}/{name}"
    try:
        status, answer = chain.json("PUT", path, _labelled(created, "none", None))
        assert (status, answer) == (422, _invalid(qualified, name))
        status, answer = chain.json("PUT", path, _labelled(created, "zero", "0"))
        assert (status, answer) == (422, _invalid(qualified, name))
        if has_status:
            status, answer = chain.json("PUT", f"{path}/status", _labelled(created, "none", None))
            assert (status, answer) == (422, _invalid(qualified, name))

        updated = _put_current(chain, path, "current")
        status, answer = chain.json("PUT", path, _labelled(updated, "stale", created["metadata"]["resourceVersion"]))
        assert status == 409 and answer["reason"] == "Conflict", answer
        assert answer["message"] == (f'Operation cannot be fulfilled on {qualified} "{name}": the object has been '
                                     "modified; please apply your changes to the latest version and try again")
        if has_status:
            _put_current(chain, f"{path}/status", "current")
    finally:
        chain.json("DELETE", path)


def test_kind_allowing_unconditional_update_still_takes_a_put_without_version(chain: ChainHandle) -> None:
    base = "/apis/storage.k8s.io/v1/storageclasses"
    name = f"uu-{uuid.uuid4().hex[:8]}"
    status, created = chain.json("POST", base, {"metadata": {"name": name}, "provisioner": "example.com/p"})
    assert status == 201, created
    try:
        status, body = chain.json("PUT", f"{base}/{name}", _labelled(created, "none", None))
        assert status == 200 and body["metadata"]["labels"] == {"t": "none"}, body
        assert int(body["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    finally:
        chain.json("DELETE", f"{base}/{name}")


@pytest.mark.parametrize("version", kubectl_params("1.27", "1.33"))
def test_kubectl_replace_lease(chain: ChainHandle, version: str) -> None:
    name = f"uu-{uuid.uuid4().hex[:8]}"
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": name, "namespace": "default"}, "spec": {"holderIdentity": "a"}}
    chain.kubectl("create", "-f", "-", version=version, input=json.dumps(lease))
    try:
        # No version in the file: kubectl's resource helper reads the current one and sends it.
        lease["spec"] = {"holderIdentity": "b"}
        chain.kubectl("replace", "-f", "-", version=version, input=json.dumps(lease))
        status, got = chain.json("GET", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{name}")
        assert status == 200 and got["spec"]["holderIdentity"] == "b", got
        # "0" is sent as is: kube's 422, as kubectl words an Invalid Status.
        zero = {**lease, "metadata": {**lease["metadata"], "resourceVersion": "0"}}
        out = chain.kubectl("replace", "-f", "-", version=version, input=json.dumps(zero), check=False)
        assert out.returncode != 0
        assert out.stderr == (f'The leases "{name}" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
                              "must be specified for an update\n")
    finally:
        chain.kubectl("delete", "lease", name, "-n", "default", "--wait=false", check=False)
