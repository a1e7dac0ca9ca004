"""Defaults of kinds outside core, apps and batch: networking, RBAC, scheduling, storage,
autoscaling, admission registration and flow control (their ``pkg/apis/<group>/v1`` defaulters)."""

from __future__ import annotations

from .fields import JSON, default_int, default_ptr, default_str, ensure_obj, is_empty, items_at, obj_at

RBAC_GROUP = "rbac.authorization.k8s.io"
#: HorizontalPodAutoscaler: the CPU utilisation target when no metric is given
DEFAULT_CPU_UTILIZATION = 80


# -- networking.k8s.io/v1 --------------------------------------------------------------------
def network_policy(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is None:
        return
    ensure_obj(spec, "podSelector")  # a non-pointer LabelSelector: Go always writes it
    for direction in ("ingress", "egress"):
        for rule in items_at(spec, direction):
            for port in items_at(rule, "ports"):
                default_ptr(port, "protocol", "TCP")
    if is_empty(spec.get("policyTypes")):
        types = ["Ingress"]
        egress = spec.get("egress")
        if isinstance(egress, list) and egress:
            types.append("Egress")
        spec["policyTypes"] = types


def ingress(obj: JSON) -> None:
    status = ensure_obj(obj, "status")
    if status is not None:
        ensure_obj(status, "loadBalancer")  # a non-pointer struct: Go always writes it


def ingress_class(obj: JSON) -> None:
    parameters = obj_at(obj_at(obj, "spec"), "parameters")
    if parameters is not None:
        default_ptr(parameters, "scope", "Cluster")


# -- rbac.authorization.k8s.io/v1 ----------------------------------------------------------------
def role_binding(obj: JSON) -> None:
    role_ref = obj_at(obj, "roleRef")
    if role_ref is not None:
        default_str(role_ref, "apiGroup", RBAC_GROUP)
    for subject in items_at(obj, "subjects"):
        if subject.get("apiGroup") in (None, "") and subject.get("kind") in ("User", "Group"):
            subject["apiGroup"] = RBAC_GROUP


# -- scheduling.k8s.io/v1 --------------------------------------------------------------------------
def priority_class(obj: JSON) -> None:
    default_ptr(obj, "preemptionPolicy", "PreemptLowerPriority")


# -- storage.k8s.io/v1 -----------------------------------------------------------------------------
def storage_class(obj: JSON) -> None:
    default_ptr(obj, "reclaimPolicy", "Delete")
    default_ptr(obj, "volumeBindingMode", "Immediate")


def csi_driver(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is None:
        return
    default_ptr(spec, "attachRequired", True)
    default_ptr(spec, "podInfoOnMount", False)
    default_ptr(spec, "storageCapacity", False)
    default_ptr(spec, "fsGroupPolicy", "ReadWriteOnceWithFSType")
    if is_empty(spec.get("volumeLifecycleModes")):
        spec["volumeLifecycleModes"] = ["Persistent"]
    default_ptr(spec, "requiresRepublish", False)
    default_ptr(spec, "seLinuxMount", False)


# -- certificates.k8s.io/v1 ------------------------------------------------------------------------
def certificate_signing_request(obj: JSON) -> None:
    for condition in items_at(obj_at(obj, "status"), "conditions"):
        default_str(condition, "status", "True")


# -- autoscaling -----------------------------------------------------------------------------------
def hpa_v1(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is not None:
        default_ptr(spec, "minReplicas", 1)


def hpa_v2(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is None:
        return
    default_ptr(spec, "minReplicas", 1)
    if is_empty(spec.get("metrics")):
        spec["metrics"] = [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]
    behavior = obj_at(spec, "behavior")
    if behavior is not None:
        _scaling_rules(behavior, "scaleUp", 0, [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                                {"type": "Percent", "value": 100, "periodSeconds": 15}])
        _scaling_rules(behavior, "scaleDown", 300, [{"type": "Percent", "value": 100, "periodSeconds": 15}])


def _scaling_rules(behavior: JSON, key: str, window: int, policies: list[JSON]) -> None:
    """``GenerateHPAScaleUpRules`` / ``GenerateHPAScaleDownRules``: fill what the rules leave nil."""
    rules = ensure_obj(behavior, key)
    if rules is None:
        return
    default_ptr(rules, "stabilizationWindowSeconds", window)
    default_ptr(rules, "selectPolicy", "Max")
    default_ptr(rules, "policies", policies)


# -- admissionregistration.k8s.io/v1 -----------------------------------------------------------------
def _webhook(hook: JSON) -> None:
    default_ptr(hook, "failurePolicy", "Fail")
    default_ptr(hook, "matchPolicy", "Equivalent")
    default_ptr(hook, "namespaceSelector", {})
    default_ptr(hook, "objectSelector", {})
    default_ptr(hook, "timeoutSeconds", 10)
    for rule in items_at(hook, "rules"):
        default_ptr(rule, "scope", "*")
    service = obj_at(obj_at(hook, "clientConfig"), "service")
    if service is not None:
        default_ptr(service, "port", 443)


def validating_webhook_configuration(obj: JSON) -> None:
    for hook in items_at(obj, "webhooks"):
        _webhook(hook)


def mutating_webhook_configuration(obj: JSON) -> None:
    for hook in items_at(obj, "webhooks"):
        _webhook(hook)
        default_ptr(hook, "reinvocationPolicy", "Never")


def _match_resources(match: JSON | None) -> None:
    if match is None:
        return
    default_ptr(match, "matchPolicy", "Equivalent")
    default_ptr(match, "namespaceSelector", {})
    default_ptr(match, "objectSelector", {})
    for key in ("resourceRules", "excludeResourceRules"):
        for rule in items_at(match, key):
            default_ptr(rule, "scope", "*")


def validating_admission_policy(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is None:
        return
    default_ptr(spec, "failurePolicy", "Fail")
    _match_resources(obj_at(spec, "matchConstraints"))


def validating_admission_policy_binding(obj: JSON) -> None:
    _match_resources(obj_at(obj_at(obj, "spec"), "matchResources"))


# -- flowcontrol.apiserver.k8s.io/v1 -------------------------------------------------------------------
def flow_schema(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    if spec is not None:
        default_int(spec, "matchingPrecedence", 1000)


def priority_level_configuration(obj: JSON) -> None:
    spec = obj_at(obj, "spec")
    limited = obj_at(spec, "limited")
    if limited is not None:
        default_ptr(limited, "nominalConcurrencyShares", 30)
        default_ptr(limited, "lendablePercent", 0)
        queuing = obj_at(obj_at(limited, "limitResponse"), "queuing")
        if queuing is not None:
            default_int(queuing, "queues", 64)
            default_int(queuing, "handSize", 8)
            default_int(queuing, "queueLengthLimit", 50)
    exempt = obj_at(spec, "exempt")
    if exempt is not None:
        default_ptr(exempt, "nominalConcurrencyShares", 0)
        default_ptr(exempt, "lendablePercent", 0)
