"""kube's audit annotations for a mutating webhook call (genericapi.admission.webhookaudit).

The values are Go's ``json.Marshal`` of kube's ``MutationAuditAnnotation`` / ``PatchAuditAnnotation``
(mutating/dispatcher.go): struct field order, the patch as ``jsonpatch.Patch`` (each operation a
``map[string]*json.RawMessage``: keys sorted, last duplicate wins, values compacted in the webhook's
own member order and number text) and Go's HTML-safe escaping. The expected texts below are what
that Go code writes for these inputs.
"""

from __future__ import annotations

import json

from genericapi.admission import webhookaudit
from genericapi.apimachinery.admission import CREATE, Attributes
from genericapi.apimachinery.user import UserInfo


def test_patch_value_as_go_marshals_it() -> None:
    raw = (b'[ {"path": "/metadata/labels/a", "op": "add", "value": {"z": 1e3, "a": "<b>&\xe2\x80\xa8", "n": null,'
           b' "l": [1.50, true, false, {}]}},\n {"op": "replace", "path": "/x", "op": "remove"},'
           b' {"op": "move", "from": "/a", "path": "/b"} ]')
    assert webhookaudit.patch_value("cfg.example.com", "w.example.com", raw) == (
        '{"configuration":"cfg.example.com","webhook":"w.example.com","patch":['
        '{"op":"add","path":"/metadata/labels/a","value":{"z":1e3,"a":"\\u003cb\\u003e\\u0026\\u2028","n":null,'
        '"l":[1.50,true,false,{}]}},'
        '{"op":"remove","path":"/x"},'
        '{"from":"/a","op":"move","path":"/b"}],"patchType":"JSONPatch"}')
    assert json.loads(webhookaudit.patch_value("c", "w", b"[]")) == {
        "configuration": "c", "webhook": "w", "patch": [], "patchType": "JSONPatch"}


def test_mutation_value_in_go_struct_order() -> None:
    assert webhookaudit.mutation_value("cfg", "w.example.com", True) == \
        '{"configuration":"cfg","webhook":"w.example.com","mutated":true}'
    assert webhookaudit.mutation_value("a<b", "w", False) == \
        '{"configuration":"a\\u003cb","webhook":"w","mutated":false}'


def test_request_level_annotation_never_lands_in_the_metadata_annotations() -> None:
    attrs = Attributes(CREATE, "", "v1", "ConfigMap", "configmaps", "", "ns", "c", {}, None, UserInfo("u", ()))
    webhookaudit.record(attrs, "patch.webhook.admission.k8s.io/round_0_index_0", "{}", webhookaudit.LEVEL_REQUEST)
    webhookaudit.record(attrs, "mutation.webhook.admission.k8s.io/round_0_index_0", "{}", webhookaudit.LEVEL_METADATA)
    assert attrs.annotations == {"mutation.webhook.admission.k8s.io/round_0_index_0": "{}"}
