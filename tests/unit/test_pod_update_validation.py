"""Pod updates (coreapi.validation.podupdate): kube-apiserver 1.33's ValidatePodUpdate paths and messages,
on defaulted objects as the registry hands them over."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from coreapi import catalog
from coreapi.defaults import apply
from coreapi.validation import podupdate, validate_update
from genericapi.apimachinery.errors import FieldError

POD_INFO = next(i for i in catalog.BUILTIN_RESOURCES if (i.group, i.kind, i.version) == ("", "Pod", "v1"))
FIRST_LINE = ("pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
              "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
              "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)")


def pod(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"containers": [{"name": "web", "image": "nginx:1.25"}]}
    base.update(spec)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "u-1", "resourceVersion": "5",
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": base}


def errs(old: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> list[FieldError]:
    """Errors of updating ``old`` by ``change``; both defaulted first, as the registry does."""
    old = copy.deepcopy(old)
    apply(POD_INFO, old)
    new = copy.deepcopy(old)
    change(new)
    apply(POD_INFO, new)
    return validate_update(POD_INFO, new, old)


def msgs(old: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> list[str]:
    return [str(e) for e in errs(old, change)]


def spec_forbidden(found: list[FieldError]) -> FieldError:
    matches = [e for e in found if e.field == "spec" and e.reason == "FieldValueForbidden"]
    assert len(matches) == 1, [str(e) for e in found]
    return matches[0]


def test_first_line_is_kubes_list() -> None:
    assert podupdate.SPEC_FORBIDDEN == FIRST_LINE


def test_no_change_and_metadata_changes_are_allowed() -> None:
    assert msgs(pod(), lambda p: None) == []

    def relabel(p: dict[str, Any]) -> None:
        p["metadata"]["labels"] = {"tier": "front"}
        p["metadata"]["annotations"] = {"note": "x"}
        p["metadata"]["finalizers"] = ["example.com/hold"]
    assert msgs(pod(), relabel) == []


def test_image_change_allowed_but_not_empty_or_padded() -> None:
    def image(value: str) -> Callable[[dict[str, Any]], None]:
        def change(p: dict[str, Any]) -> None:
            p["spec"]["containers"][0]["image"] = value
        return change
    assert msgs(pod(), image("nginx:1.26")) == []
    assert "spec.containers[0].image: Required value" in msgs(pod(), image(""))
    padded = msgs(pod(), image(" nginx:1.26"))
    assert 'spec.containers[0].image: Invalid value: " nginx:1.26": must not have leading or trailing whitespace' \
        in padded
    inits = pod(initContainers=[{"name": "init", "image": "busybox:1.36"}])
    assert msgs(inits, lambda p: p["spec"]["initContainers"][0].update(image="busybox:1.37")) == []


def test_other_spec_changes_are_forbidden_with_a_field_list() -> None:
    found = errs(pod(), lambda p: p["spec"]["containers"][0].update(env=[{"name": "A", "value": "1"}]))
    err = spec_forbidden(found)
    first, *rest = err.detail.split("\n")
    assert first == FIRST_LINE
    assert rest == ["  + spec.containers[0].env"]
    assert str(err).startswith("spec: Forbidden: " + FIRST_LINE + "\n")
    found = errs(pod(nodeName="n1"), lambda p: p["spec"].update(nodeName="n2", hostname="h"))
    assert spec_forbidden(found).detail.split("\n")[1:] == ["  ~ spec.nodeName", "  + spec.hostname"]
    found = errs(pod(hostname="h"), lambda p: p["spec"].pop("hostname"))
    assert spec_forbidden(found).detail.split("\n")[1:] == ["  - spec.hostname"]


def test_resources_change_is_forbidden_in_a_plain_update() -> None:
    sized = pod(containers=[{"name": "web", "image": "nginx", "resources": {"limits": {"cpu": "1"}}}])
    found = errs(sized, lambda p: p["spec"]["containers"][0]["resources"].update(limits={"cpu": "2"}))
    assert "spec.containers[0].resources" in spec_forbidden(found).detail
    # The same quantity written differently is no change once defaulted.
    assert msgs(sized, lambda p: p["spec"]["containers"][0]["resources"].update(limits={"cpu": "1000m"})) == []


def test_adding_or_removing_containers() -> None:
    found = msgs(pod(), lambda p: p["spec"]["containers"].append({"name": "b", "image": "redis"}))
    assert "spec.containers: Forbidden: pod updates may not add or remove containers" in found
    assert not any(m.startswith("spec: Forbidden") for m in found)  # kube stops there


def test_active_deadline_seconds() -> None:
    def deadline(value: Any) -> Callable[[dict[str, Any]], None]:
        def change(p: dict[str, Any]) -> None:
            if value is None:
                p["spec"].pop("activeDeadlineSeconds", None)
            else:
                p["spec"]["activeDeadlineSeconds"] = value
        return change
    assert msgs(pod(), deadline(60)) == []
    assert msgs(pod(activeDeadlineSeconds=60), deadline(30)) == []
    assert msgs(pod(activeDeadlineSeconds=60), deadline(60)) == []
    assert msgs(pod(activeDeadlineSeconds=60), deadline(90)) == [
        "spec.activeDeadlineSeconds: Invalid value: 90: must be less than or equal to previous value"]
    assert msgs(pod(activeDeadlineSeconds=60), deadline(None)) == [
        'spec.activeDeadlineSeconds: Invalid value: "null": must not update from a positive integer to nil value']
    assert "spec.activeDeadlineSeconds: Invalid value: -1: must be between 0 and 2147483647, inclusive" \
        in msgs(pod(), deadline(-1))


TOLERATION = {"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30}


def test_tolerations_only_additions() -> None:
    base = pod(tolerations=[TOLERATION])
    extra = {"key": "other", "operator": "Exists"}
    assert msgs(base, lambda p: p["spec"]["tolerations"].append(extra)) == []
    assert msgs(base, lambda p: p["spec"]["tolerations"][0].update(tolerationSeconds=10)) == []
    forbidden = "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
    assert msgs(base, lambda p: p["spec"].pop("tolerations")) == [forbidden]
    assert msgs(base, lambda p: p["spec"]["tolerations"][0].update(value="w")) == [forbidden]


def test_new_tolerations_are_validated() -> None:
    bad = {"operator": "Equal", "value": "v"}
    found = msgs(pod(), lambda p: p["spec"].update(tolerations=[bad]))
    expected = ('spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty, '
                'which means "match all values and all keys"')
    assert found.count(expected) == 2  # kube reports it from the spec and from the update check
    found = msgs(pod(), lambda p: p["spec"].update(tolerations=[{"key": "k", "effect": "Never"}]))
    assert ('spec.tolerations[0].effect: Unsupported value: "Never": supported values: "NoSchedule", '
            '"PreferNoSchedule", "NoExecute"') in found


def test_termination_grace_period() -> None:
    negative = pod(terminationGracePeriodSeconds=-5)
    found = msgs(negative, lambda p: p["spec"].update(terminationGracePeriodSeconds=1))
    assert not any(m.startswith("spec: Forbidden") for m in found), found
    found = errs(negative, lambda p: p["spec"].update(terminationGracePeriodSeconds=2))
    assert "spec.terminationGracePeriodSeconds" in spec_forbidden(found).detail
    found = errs(pod(terminationGracePeriodSeconds=30), lambda p: p["spec"].update(terminationGracePeriodSeconds=1))
    assert spec_forbidden(found).detail.endswith("  ~ spec.terminationGracePeriodSeconds")


GATED = pod(schedulingGates=[{"name": "a"}, {"name": "b"}], nodeSelector={"zone": "z1"},
            affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}})


def test_scheduling_gates_only_removed() -> None:
    assert msgs(GATED, lambda p: p["spec"]["schedulingGates"].pop(0)) == []
    assert msgs(GATED, lambda p: p["spec"].pop("schedulingGates")) == []
    assert msgs(GATED, lambda p: p["spec"]["schedulingGates"].append({"name": "c"})) == [
        "spec.schedulingGates[2].name: Forbidden: only deletion is allowed, but found new scheduling gate 'c'"]


def test_gated_pod_may_add_node_constraints() -> None:
    assert msgs(GATED, lambda p: p["spec"]["nodeSelector"].update(rack="r1")) == []
    assert msgs(GATED, lambda p: p["spec"]["nodeSelector"].update(zone="z2")) == [
        'spec.nodeSelector: Invalid value: map[string]string{"zone":"z2"}: only additions to spec.nodeSelector are '
        "allowed (no mutations or deletions)"]
    more = {"key": "gpu", "operator": "Exists"}
    terms_path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"

    def terms(p: dict[str, Any]) -> list[Any]:
        return p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]  # type: ignore[no-any-return]
    assert msgs(GATED, lambda p: terms(p)[0]["matchExpressions"].append(more)) == []
    found = msgs(GATED, lambda p: terms(p)[0].update(matchExpressions=[more]))
    assert found == [f'{terms_path}[0]: Invalid value: core.NodeSelectorTerm{{MatchExpressions:'
                     f'[]core.NodeSelectorRequirement{{core.NodeSelectorRequirement{{Key:"gpu", Operator:"Exists", '
                     f'Values:[]string(nil)}}}}, MatchFields:[]core.NodeSelectorRequirement(nil)}}: only additions '
                     f'are allowed (no mutations or deletions)']
    found = msgs(GATED, lambda p: terms(p).append({"matchExpressions": [more]}))
    assert found[0].startswith(f"{terms_path}: Invalid value: []core.NodeSelectorTerm{{")
    assert found[0].endswith("no additions/deletions to non-empty NodeSelectorTerms list are allowed")


def test_ungated_pod_may_not_touch_node_constraints() -> None:
    ungated = copy.deepcopy(GATED)
    del ungated["spec"]["schedulingGates"]
    found = errs(ungated, lambda p: p["spec"]["nodeSelector"].update(rack="r1"))
    assert spec_forbidden(found).detail.endswith("  ~ spec.nodeSelector")
    # Removing the last gate and adding a selector in one update: the old Pod was gated, so it is allowed.
    def ungate_and_add(p: dict[str, Any]) -> None:
        p["spec"].pop("schedulingGates")
        p["spec"]["nodeSelector"]["rack"] = "r1"
    assert msgs(GATED, ungate_and_add) == []
    # A gated Pod without affinity may gain node affinity, but not pod affinity.
    plain = pod(schedulingGates=[{"name": "a"}])
    na = {"nodeAffinity": GATED["spec"]["affinity"]["nodeAffinity"]}
    assert msgs(plain, lambda p: p["spec"].update(affinity=na)) == []
    pa = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "zone"}]}}
    assert spec_forbidden(errs(plain, lambda p: p["spec"].update(affinity=pa))).detail.endswith("  + spec.affinity")


def test_metadata_update_rules() -> None:
    deleting = pod()
    deleting["metadata"].update(deletionTimestamp="2024-01-01T00:00:00Z", deletionGracePeriodSeconds=30,
                                finalizers=["a.io/x"])
    assert msgs(deleting, lambda p: p["metadata"].update(finalizers=[])) == []
    assert msgs(deleting, lambda p: p["metadata"].update(finalizers=["a.io/x", "b.io/y", "a.io/z"])) == [
        'metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new '
        'finalizers []string{"a.io/z", "b.io/y"}']
    assert msgs(pod(), lambda p: p["metadata"].update(uid="u-2")) == [
        'metadata.uid: Invalid value: "u-2": field is immutable']
    assert msgs(pod(), lambda p: p["metadata"].update(name="q")) == [
        'metadata.name: Invalid value: "q": field is immutable']


@pytest.mark.parametrize("key", ["kubernetes.io/config.mirror", "container.apparmor.security.beta.kubernetes.io/web"])
def test_mirror_and_apparmor_annotations_are_fixed(key: str) -> None:
    what = "mirror pod annotation" if "mirror" in key else "AppArmor annotations"
    assert msgs(pod(), lambda p: p["metadata"].update(annotations={key: "runtime/default"})) == [
        f"metadata.annotations[{key}]: Forbidden: may not add {what}"]
    annotated = pod()
    annotated["metadata"]["annotations"] = {key: "runtime/default"}
    assert msgs(annotated, lambda p: p["metadata"].pop("annotations")) == [
        f"metadata.annotations[{key}]: Forbidden: may not remove or update {what}"]
    assert msgs(annotated, lambda p: p["metadata"].update(labels={"a": "b"})) == []


def test_zero_values_read_as_unset_except_pointers() -> None:
    assert podupdate.same({"hostNetwork": False, "volumes": []}, {})
    assert podupdate.same({"containers": [{"name": "a", "stdin": False, "env": None}]}, {"containers": [{"name": "a"}]})
    assert not podupdate.same({"automountServiceAccountToken": False}, {})
    assert not podupdate.same({"containers": [{"name": "a"}]}, {"containers": [{"name": "b"}]})
