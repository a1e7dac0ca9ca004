"""The escalation message's rule rendering, as kube's CompactString and CompactRules print them."""

from __future__ import annotations

from coreapi.rbac_escalation import _compact, compact_string


def test_compact_string_is_kubes() -> None:
    assert compact_string({"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}) == \
        '{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}'
    assert compact_string({"nonResourceURLs": ["*"], "verbs": ["*"]}) == '{NonResourceURLs:["*"], Verbs:["*"]}'
    assert compact_string({"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"],
                           "verbs": ["get", "delete"]}) == \
        '{APIGroups:["apps"], Resources:["deployments"], ResourceNames:["web"], Verbs:["get" "delete"]}'


def test_atomic_rules_differing_only_in_verb_are_compacted() -> None:
    atomic = [{"apiGroups": [""], "resources": ["pods"], "verbs": [v]} for v in ("get", "list")]
    atomic.append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})
    assert _compact(atomic) == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
                                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
