"""SchemaCatalog: loading, GVK index, $ref resolution and child walking."""

from __future__ import annotations

from genericapi.apimachinery.schemas import PatchMeta, PatchSchema, SchemaCatalog, node_types


def test_load_is_cached_and_indexes_kinds() -> None:
    catalog = SchemaCatalog.load()
    assert SchemaCatalog.load("1.33") is catalog
    assert catalog.definition_name("apps", "v1", "Deployment") == "io.k8s.api.apps.v1.Deployment"
    assert catalog.definition_name("", "v1", "Pod") == "io.k8s.api.core.v1.Pod"
    assert catalog.definition_name("", "v1", "Deployment") is None
    assert "io.k8s.api.core.v1.Container" in catalog.definitions


def test_resolve_and_children() -> None:
    catalog = SchemaCatalog.load()
    deployment = catalog.root_schema("apps", "v1", "Deployment")
    assert deployment is not None
    spec = catalog.property_schema(deployment, "spec")
    assert spec is not None and "$ref" in spec
    resolved = catalog.resolve(spec)
    assert "replicas" in resolved["properties"]
    assert node_types(catalog.resolve(catalog.child_schema(resolved, "replicas") or {})) == {"integer"}
    meta = catalog.resolve(catalog.property_schema(deployment, "metadata") or {})
    labels = catalog.child_schema(meta, "labels")
    assert labels is not None
    assert catalog.additional_properties_schema(labels) == {"type": ["string", "null"]}
    assert catalog.child_schema(meta, "nope") is None
    assert catalog.resolve({"$ref": "#/$defs/does.not.Exist"}) == {}


def test_int_or_string_types() -> None:
    catalog = SchemaCatalog.load()
    node = catalog.resolve({"$ref": "#/$defs/io.k8s.apimachinery.pkg.util.intstr.IntOrString"})
    assert node_types(node) == {"integer", "string"}


def test_patch_schema_metadata() -> None:
    catalog = SchemaCatalog.load()
    schema = catalog.patch_schema("apps", "v1", "Deployment")
    spec, _ = schema.field("spec")
    _, strategy_meta = spec.field("strategy")
    assert strategy_meta.strategies == ("retainKeys",)
    pod_spec, _ = spec.field("template")[0].field("spec")
    containers_schema, containers_meta = pod_spec.field("containers")
    assert containers_meta == PatchMeta(("merge",), "name")
    _, ports_meta = containers_schema.items().field("ports")
    assert ports_meta.merge_key == "containerPort"
    _, volumes_meta = pod_spec.field("volumes")
    assert set(volumes_meta.strategies) == {"merge", "retainKeys"}
    _, tolerations_meta = pod_spec.field("tolerations")
    assert tolerations_meta.strategies == ()


def test_schemaless_for_unknown_kind() -> None:
    catalog = SchemaCatalog.load()
    schema = catalog.patch_schema("example.com", "v1", "Widget")
    assert schema.is_schemaless
    child, meta = schema.field("anything")
    assert child.is_schemaless and meta == PatchMeta()
    assert PatchSchema.schemaless().items().is_schemaless
