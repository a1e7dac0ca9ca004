"""kube 1.33's bootstrap APF configuration: the mandatory and suggested FlowSchemas and
PriorityLevelConfigurations (k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap, release-1.33).

Each object is built fresh as JSON (as served, v1), annotated ``apf.kubernetes.io/autoupdate-spec:
"true"`` as kube's ``newFlowSchema``/``newPriorityLevelConfiguration`` do. core-api ensures them at
start; the gateway falls back to the mandatory ones when they are missing from its cache, as kube's
config controller does.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

GROUP = "flowcontrol.apiserver.k8s.io"
API_VERSION = f"{GROUP}/v1"
AUTOUPDATE_ANNOTATION = "apf.kubernetes.io/autoupdate-spec"

EXEMPT = "exempt"
CATCH_ALL = "catch-all"

_ALL_RESOURCES = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True, "namespaces": ["*"]}
_ALL_NON_RESOURCES = {"verbs": ["*"], "nonResourceURLs": ["*"]}


def _meta(name: str) -> Obj:
    return {"name": name, "annotations": {AUTOUPDATE_ANNOTATION: "true"}}


def _pl_limited(name: str, shares: int, lendable: int, queuing: tuple[int, int, int] | None) -> Obj:
    response: Obj = {"type": "Reject"}
    if queuing is not None:
        queues, hand, length = queuing
        response = {"type": "Queue", "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": length}}
    return {"apiVersion": API_VERSION, "kind": "PriorityLevelConfiguration", "metadata": _meta(name),
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": shares, "limitResponse": response,
                                                     "lendablePercent": lendable}}}


def _fs(name: str, pl: str, precedence: int, distinguisher: str, *rules: Obj) -> Obj:
    spec: Obj = {"priorityLevelConfiguration": {"name": pl}, "matchingPrecedence": precedence}
    if distinguisher:
        spec["distinguisherMethod"] = {"type": distinguisher}
    spec["rules"] = list(rules)
    return {"apiVersion": API_VERSION, "kind": "FlowSchema", "metadata": _meta(name), "spec": spec}


def _groups(*names: str) -> list[Obj]:
    return [{"kind": "Group", "group": {"name": n}} for n in names]


def _users(*names: str) -> list[Obj]:
    return [{"kind": "User", "user": {"name": n}} for n in names]


def _kube_system_sas(*names: str) -> list[Obj]:
    return [{"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": n}} for n in names]


def _resource(verbs: list[str], groups: list[str], resources: list[str], namespaces: list[str],
              cluster_scope: bool) -> Obj:
    rule: Obj = {"verbs": verbs, "apiGroups": groups, "resources": resources}
    if cluster_scope:
        rule["clusterScope"] = True
    rule["namespaces"] = namespaces
    return rule


def _everything(subjects: list[Obj]) -> Obj:
    return {"subjects": subjects, "resourceRules": [dict(_ALL_RESOURCES)],
            "nonResourceRules": [dict(_ALL_NON_RESOURCES)]}


def mandatory_priority_levels() -> list[Obj]:
    exempt = {"apiVersion": API_VERSION, "kind": "PriorityLevelConfiguration", "metadata": _meta(EXEMPT),
              "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}}
    return [_pl_limited(CATCH_ALL, 5, 0, None), exempt]


def mandatory_flow_schemas() -> list[Obj]:
    return [
        _fs(EXEMPT, EXEMPT, 1, "", _everything(_groups("system:masters"))),
        _fs(CATCH_ALL, CATCH_ALL, 10000, "ByUser", _everything(_groups("system:unauthenticated",
                                                                          "system:authenticated"))),
    ]


def suggested_priority_levels() -> list[Obj]:
    return [
        _pl_limited("system", 30, 33, (64, 6, 50)),
        _pl_limited("node-high", 40, 25, (64, 6, 50)),
        _pl_limited("leader-election", 10, 0, (16, 4, 50)),
        _pl_limited("workload-high", 40, 50, (128, 6, 50)),
        _pl_limited("workload-low", 100, 90, (128, 6, 50)),
        _pl_limited("global-default", 20, 50, (128, 6, 50)),
    ]


def suggested_flow_schemas() -> list[Obj]:
    get_create_update = ["get", "create", "update"]
    return [
        _fs("system-nodes", "system", 500, "ByUser", _everything(_groups("system:nodes"))),
        _fs("system-node-high", "node-high", 400, "ByUser", {
            "subjects": _groups("system:nodes"),
            "resourceRules": [_resource(["*"], [""], ["nodes", "nodes/status"], ["*"], True),
                              _resource(["*"], ["coordination.k8s.io"], ["leases"], ["*"], False)]}),
        _fs("probes", EXEMPT, 2, "", {
            "subjects": _groups("system:unauthenticated", "system:authenticated"),
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]}),
        _fs("system-leader-election", "leader-election", 100, "ByUser", {
            "subjects": _users("system:kube-controller-manager", "system:kube-scheduler") + _kube_system_sas("*"),
            "resourceRules": [_resource(get_create_update, ["coordination.k8s.io"], ["leases"], ["*"], False)]}),
        _fs("workload-leader-election", "leader-election", 200, "ByUser", {
            "subjects": _kube_system_sas("*"),
            "resourceRules": [_resource(get_create_update, [""], ["endpoints", "configmaps"], ["*"], False),
                              _resource(get_create_update, ["coordination.k8s.io"], ["leases"], ["*"], False)]}),
        _fs("endpoint-controller", "workload-high", 150, "ByUser", {
            "subjects": _users("system:kube-controller-manager")
            + _kube_system_sas("endpoint-controller", "endpointslicemirroring-controller"),
            "resourceRules": [_resource(get_create_update, [""], ["endpoints"], ["*"], False)]}),
        _fs("kube-controller-manager", "workload-high", 800, "ByNamespace",
            _everything(_users("system:kube-controller-manager"))),
        _fs("kube-scheduler", "workload-high", 800, "ByNamespace", _everything(_users("system:kube-scheduler"))),
        _fs("kube-system-service-accounts", "workload-high", 900, "ByNamespace", _everything(_kube_system_sas("*"))),
        _fs("service-accounts", "workload-low", 9000, "ByUser", _everything(_groups("system:serviceaccounts"))),
        _fs("global-default", "global-default", 9900, "ByUser",
            _everything(_groups("system:unauthenticated", "system:authenticated"))),
    ]


def mandatory(kind: str) -> dict[str, Obj]:
    """The mandatory objects of ``kind`` ("FlowSchema" or "PriorityLevelConfiguration") by name."""
    objs = mandatory_flow_schemas() if kind == "FlowSchema" else mandatory_priority_levels()
    return {o["metadata"]["name"]: o for o in objs}
