"""managedFields bookkeeping: updates, applies, conflicts, pruning, the manager cap."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.fieldmanager.managers import (
    FieldManager,
    decode,
    is_reset,
    manager_from_user_agent,
)
from genericapi.apimachinery.fieldmanager.schema import SchemaResolver
from genericapi.apimachinery.schemas import SchemaCatalog

CATALOG = SchemaCatalog.load("1.33")
FM = FieldManager(SchemaResolver(CATALOG.definitions).root(CATALOG.root_schema("apps", "v1", "Deployment")),
                  "apps/v1")
T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z"


def dep(replicas: int = 1, image: str = "nginx", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", **({"labels": labels} if labels else {})},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "nginx", "image": image}]}}}}


def entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return obj["metadata"].get("managedFields") or []


def test_create_records_one_update_entry_without_stripped_metadata() -> None:
    obj = dep()
    FM.update(None, obj, "kubectl-create", when=T1)
    [entry] = entries(obj)
    assert entry == {"manager": "kubectl-create", "operation": "Update", "apiVersion": "apps/v1", "time": T1,
                     "fieldsType": "FieldsV1", "fieldsV1": entry["fieldsV1"]}
    assert "f:name" not in entry["fieldsV1"]["f:metadata"] if "f:metadata" in entry["fieldsV1"] else True
    assert "f:apiVersion" not in entry["fieldsV1"]
    assert entry["fieldsV1"]["f:spec"]["f:replicas"] == {}


def test_second_manager_takes_changed_fields_and_no_change_keeps_time() -> None:
    live = dep()
    FM.update(None, live, "creator", when=T1)
    new = copy.deepcopy(live)
    new["spec"]["replicas"] = 3
    FM.update(live, new, "scaler", subresource="scale", when=T2)
    by_manager = {e["manager"]: e for e in entries(new)}
    assert "f:replicas" not in by_manager["creator"]["fieldsV1"]["f:spec"]
    assert by_manager["scaler"]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    assert by_manager["scaler"]["subresource"] == "scale"
    again = copy.deepcopy(new)
    FM.update(new, again, "noop", when=T2)
    assert [e["manager"] for e in entries(again)] == ["creator", "scaler"]


def test_reset_and_client_sent_managed_fields() -> None:
    live = dep()
    FM.update(None, live, "creator", when=T1)
    for reset in ([], [{}]):
        assert is_reset(reset)
        new = copy.deepcopy(live)
        new["metadata"]["managedFields"] = reset
        FM.update(live, new, "other", when=T2)
        assert "managedFields" not in new["metadata"]
    new = copy.deepcopy(live)
    del new["metadata"]["managedFields"]
    FM.update(live, new, "other", when=T2)
    assert [e["manager"] for e in entries(new)] == ["creator"]  # dropping the field keeps ownership


def test_cap_folds_oldest_updates_into_ancient_changes() -> None:
    obj = dep()
    FM.update(None, obj, "m0", when="2026-01-01T00:00:00Z")
    for i in range(1, 12):
        new = copy.deepcopy(obj)
        new["metadata"].setdefault("labels", {})[f"l{i}"] = "x"
        FM.update(obj, new, f"m{i}", when=f"2026-01-01T00:00:{i:02d}Z")
        obj = new
    managers = [e["manager"] for e in entries(obj)]
    assert len(managers) == 10
    assert "ancient-changes" in managers
    assert "m0" not in managers and "m1" not in managers and "m2" not in managers


def test_apply_creates_owns_only_applied_fields_and_conflicts() -> None:
    applied = dep(replicas=2)
    created = FM.apply(None, applied, "kubectl", force=False, when=T1)
    assert created is not None
    [entry] = entries(created)
    assert entry["operation"] == "Apply" and entry["manager"] == "kubectl"
    scaled = copy.deepcopy(created)
    scaled["spec"]["replicas"] = 5
    FM.update(created, scaled, "kubectl-scale", subresource="scale", when=T2)
    with pytest.raises(APIError) as err:
        FM.apply(scaled, dep(replicas=2), "kubectl", force=False)
    e = err.value
    assert e.code == 409 and e.reason == "Conflict"
    assert e.message == ('Apply failed with 1 conflict: conflict with "kubectl-scale" with subresource "scale" '
                         "using apps/v1: .spec.replicas")
    assert e.details == {"causes": [{"reason": "FieldManagerConflict",
                                     "message": 'conflict with "kubectl-scale" with subresource "scale" using apps/v1',
                                     "field": ".spec.replicas"}]}
    forced = FM.apply(scaled, dep(replicas=2), "kubectl", force=True, when=T2)
    assert forced is not None and forced["spec"]["replicas"] == 2
    assert [x["manager"] for x in entries(forced)] == ["kubectl"]


def test_multiple_conflicts_message() -> None:
    live = FM.apply(None, dep(), "a", force=False, when=T1)
    assert live is not None
    with pytest.raises(APIError) as err:
        FM.apply(live, dep(replicas=4, image="other"), "b", force=False)
    assert err.value.message == ('Apply failed with 2 conflicts: conflicts with "a":\n- .spec.replicas\n'
                                 '- .spec.template.spec.containers[name="nginx"].image')
    assert len(err.value.details["causes"]) == 2  # type: ignore[index]


def test_apply_removes_fields_the_manager_no_longer_applies() -> None:
    live = FM.apply(None, dep(team="a", tier="web"), "mgr", force=False, when=T1)
    assert live is not None
    shared = FM.apply(live, {"apiVersion": "apps/v1", "kind": "Deployment",
                             "metadata": {"name": "web", "labels": {"tier": "web"}}}, "other", force=False, when=T1)
    assert shared is not None
    out = FM.apply(shared, dep(), "mgr", force=False, when=T2)
    assert out is not None
    assert out["metadata"].get("labels") == {"tier": "web"}  # team pruned, tier kept (owned by other)


def test_same_values_from_two_appliers_share_ownership() -> None:
    live = FM.apply(None, dep(), "a", force=False, when=T1)
    assert live is not None
    out = FM.apply(live, dep(), "b", force=False, when=T2)
    assert out is not None
    assert {e["manager"] for e in entries(out)} == {"a", "b"}


def test_apply_rejects_managed_fields_in_config() -> None:
    cfg = dep()
    cfg["metadata"]["managedFields"] = [{"manager": "x"}]
    with pytest.raises(APIError) as err:
        FM.apply(None, cfg, "a", force=False)
    assert err.value.code == 400 and err.value.message == "metadata.managedFields must be nil"


def test_user_agent_prefix() -> None:
    assert manager_from_user_agent("kubectl/v1.33.0 (linux/amd64) kubernetes/abc") == "kubectl"
    assert manager_from_user_agent("python-requests/2.31") == "python-requests"
    assert manager_from_user_agent("OpenAPI-Generator/31.0.0/python") == "OpenAPI-Generator"
    assert len(manager_from_user_agent("x" * 300)) == 128


def test_decode_rejects_bad_entries() -> None:
    from genericapi.apimachinery.fieldmanager.managers import ManagedFieldsError
    with pytest.raises(ManagedFieldsError):
        decode([{"manager": "a", "operation": "Patch", "apiVersion": "v1", "fieldsType": "FieldsV1"}])
    with pytest.raises(ManagedFieldsError):
        decode([{"manager": "a", "operation": "Update", "apiVersion": "v1"}])


def test_create_compares_against_go_empty_object_for_built_ins() -> None:
    go_fm = FieldManager(FM.root, "apps/v1", go_typed=True)
    obj = dep()
    go_fm.update(None, obj, "kubectl-create", when=T1)
    fields = entries(obj)[0]["fieldsV1"]
    # spec and template are structs held by value in Go: no "." of their own; labels are not
    assert "." not in fields["f:spec"] and "." not in fields["f:spec"]["f:template"]
    assert "." in fields["f:spec"]["f:template"]["f:metadata"]["f:labels"]
    assert "." not in fields["f:spec"]["f:template"]["f:spec"]["f:containers"]


def test_unowned_paths_stay_with_nobody() -> None:
    from genericapi.apimachinery.fieldmanager.fieldset import FieldSet
    obj = dep()
    obj["spec"]["template"]["spec"]["volumes"] = [{"name": "token", "emptyDir": {}}]
    volumes = ("f:spec", "f:template", "f:spec", "f:volumes")
    FM.update(None, obj, "creator", when=T1, unowned=FieldSet.of(volumes))
    assert "f:volumes" not in entries(obj)[0]["fieldsV1"]["f:spec"]["f:template"]["f:spec"]


def test_subresource_reset_fields() -> None:
    from genericapi.apimachinery.fieldmanager.fieldset import FieldSet
    fm = FieldManager(FM.root, "apps/v1", reset={"": FieldSet.of(("f:status",)), "status": FieldSet.of(("f:spec",))})
    live = dep()
    fm.update(None, live, "creator", when=T1)
    new = copy.deepcopy(live)
    new["status"] = {"replicas": 1}
    new["spec"]["replicas"] = 9
    fm.update(live, new, "ctrl", subresource="status", when=T2)
    by = {(e["manager"], e.get("subresource", "")): e["fieldsV1"] for e in entries(new)}
    assert by[("ctrl", "status")] == {"f:status": {".": {}, "f:replicas": {}}}
