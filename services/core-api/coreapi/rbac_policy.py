"""kube-apiserver 1.33's default RBAC objects, as data (kube's ``bootstrappolicy`` package).

kubectl, Helm charts and operators assume these roles and bindings exist (``admin``/``edit``/
``view`` for RoleBindings, ``system:discovery`` for every user, ``system:auth-delegator`` for
extension API servers, ...). ``rbac_bootstrap`` creates and reconciles them at start; the
ClusterRole aggregation controller fills in the rules of the aggregated ones. Rules are written
with ``rule`` (verbs, groups and resources sorted as kube's rule builder leaves them); objects in
the order kube lists them.
"""

from __future__ import annotations

from typing import Any

RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_API_VERSION = f"{RBAC_GROUP}/v1"
BOOTSTRAP_LABEL = "kubernetes.io/bootstrapping"
BOOTSTRAP_VALUE = "rbac-defaults"
AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"

Rule = dict[str, list[str]]
Obj = dict[str, Any]

READ = ("get", "list", "watch")
WRITE = ("create", "delete", "deletecollection", "patch", "update")
READ_WRITE = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


def rule(verbs: tuple[str, ...] | str, groups: tuple[str, ...] | str = (), resources: tuple[str, ...] | str = (),
         names: tuple[str, ...] = (), urls: tuple[str, ...] = ()) -> Rule:
    """One PolicyRule with every list sorted, as kube's rule builder (``NewRule(...).Groups(...)``) leaves it."""
    def as_list(v: tuple[str, ...] | str) -> list[str]:
        return [v] if isinstance(v, str) else list(v)
    out: Rule = {}
    if urls:
        return {"nonResourceURLs": sorted(urls), "verbs": sorted(as_list(verbs))}
    out["apiGroups"] = sorted(as_list(groups))
    if names:
        out["resourceNames"] = sorted(names)
    out["resources"] = sorted(as_list(resources))
    out["verbs"] = sorted(as_list(verbs))
    return out


def events_rule() -> Rule:
    return rule(("create", "update", "patch"), ("", "events.k8s.io"), "events")


def _meta(name: str, namespace: str = "", labels: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "labels": {BOOTSTRAP_LABEL: BOOTSTRAP_VALUE, **(labels or {})},
                 "annotations": {AUTOUPDATE: "true"}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def cluster_role(name: str, rules: list[Rule], labels: dict[str, str] | None = None,
                 aggregate_from: str = "") -> Obj:
    obj: Obj = {"apiVersion": RBAC_API_VERSION, "kind": "ClusterRole", "metadata": _meta(name, labels=labels)}
    if aggregate_from:
        obj["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {AGGREGATE_TO + aggregate_from: "true"}}]}
    obj["rules"] = rules
    return obj


def role(name: str, namespace: str, rules: list[Rule]) -> Obj:
    return {"apiVersion": RBAC_API_VERSION, "kind": "Role", "metadata": _meta(name, namespace), "rules": rules}


def subject(kind: str, name: str, namespace: str = "") -> Obj:
    if kind == "ServiceAccount":
        return {"kind": kind, "name": name, "namespace": namespace or "kube-system"}
    return {"apiGroup": RBAC_GROUP, "kind": kind, "name": name}


def binding(kind: str, name: str, role_kind: str, role_name: str, subjects: list[Obj], namespace: str = "") -> Obj:
    return {"apiVersion": RBAC_API_VERSION, "kind": kind, "metadata": _meta(name, namespace),
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role_name}, "subjects": subjects}


def cluster_binding(role_name: str, *subjects: Obj, name: str = "") -> Obj:
    return binding("ClusterRoleBinding", name or role_name, "ClusterRole", role_name, list(subjects))


def group(name: str) -> Obj:
    return subject("Group", name)


def user(name: str) -> Obj:
    return subject("User", name)


def _aggregate_to_view() -> list[Rule]:
    return [
        rule(READ, "", ("pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
                        "services", "services/status", "endpoints", "persistentvolumeclaims",
                        "persistentvolumeclaims/status", "configmaps")),
        rule(READ, "", ("limitranges", "resourcequotas", "bindings", "events", "pods/status", "resourcequotas/status",
                        "namespaces/status", "replicationcontrollers/status", "pods/log")),
        rule(READ, "", "namespaces"),
        rule(READ, "discovery.k8s.io", "endpointslices"),
        rule(READ, "apps", ("controllerrevisions", "statefulsets", "statefulsets/scale", "statefulsets/status",
                            "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                            "deployments/status", "replicasets", "replicasets/scale", "replicasets/status")),
        rule(READ, "autoscaling", ("horizontalpodautoscalers", "horizontalpodautoscalers/status")),
        rule(READ, "batch", ("jobs", "cronjobs", "cronjobs/status", "jobs/status")),
        rule(READ, "extensions", ("daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                                  "deployments/status", "ingresses", "ingresses/status", "replicasets",
                                  "replicasets/scale", "replicasets/status", "replicationcontrollers/scale",
                                  "networkpolicies")),
        rule(READ, "policy", ("poddisruptionbudgets", "poddisruptionbudgets/status")),
        rule(READ, "networking.k8s.io", ("ingresses", "ingresses/status", "networkpolicies")),
    ]


def _aggregate_to_edit() -> list[Rule]:
    return [
        rule(READ, "", ("pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy")),
        rule("impersonate", "", "serviceaccounts"),
        rule(WRITE, "", ("pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward")),
        rule("create", "", "pods/eviction"),
        rule(WRITE, "", ("replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
                         "services/proxy", "persistentvolumeclaims", "configmaps", "secrets", "events")),
        rule("create", "", "serviceaccounts/token"),
        rule(WRITE, "apps", ("statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale",
                             "deployments/rollback", "replicasets", "replicasets/scale")),
        rule(WRITE, "autoscaling", "horizontalpodautoscalers"),
        rule(WRITE, "batch", ("jobs", "cronjobs")),
        rule(WRITE, "extensions", ("daemonsets", "deployments", "deployments/scale", "deployments/rollback",
                                   "ingresses", "replicasets", "replicasets/scale", "replicationcontrollers/scale",
                                   "networkpolicies")),
        rule(WRITE, "policy", "poddisruptionbudgets"),
        rule(WRITE, "networking.k8s.io", ("ingresses", "networkpolicies")),
        rule(READ_WRITE, "coordination.k8s.io", "leases"),
    ]


def _aggregate_to_admin() -> list[Rule]:
    return [
        rule("create", "authorization.k8s.io", "localsubjectaccessreviews"),
        rule(READ_WRITE, RBAC_GROUP, ("roles", "rolebindings")),
    ]


def _leader(name: str) -> list[Rule]:
    return [rule("create", "coordination.k8s.io", "leases"),
            rule(("get", "update"), "coordination.k8s.io", "leases", names=(name,))]


def _kube_controller_manager() -> list[Rule]:
    return [
        events_rule(), *_leader("kube-controller-manager"),
        rule("create", "", ("secrets", "serviceaccounts")),
        rule("delete", "", "secrets"),
        rule("get", "", ("namespaces", "secrets", "serviceaccounts", "configmaps")),
        rule("update", "", ("secrets", "serviceaccounts")),
        rule("create", "authentication.k8s.io", "tokenreviews"),
        rule("create", "authorization.k8s.io", "subjectaccessreviews"),
        rule(("list", "watch"), "*", "*"),
        rule("create", "", "serviceaccounts/token"),
    ]


def _kube_scheduler() -> list[Rule]:
    return [
        events_rule(), *_leader("kube-scheduler"),
        rule(READ, "", "nodes"),
        rule(("get", "list", "watch", "delete"), "", "pods"),
        rule("create", "", ("pods/binding", "bindings")),
        rule(("patch", "update"), "", "pods/status"),
        rule(READ, "", ("replicationcontrollers", "services")),
        rule(READ, ("apps", "extensions"), "replicasets"),
        rule(READ, "apps", "statefulsets"),
        rule(READ, "policy", "poddisruptionbudgets"),
        rule(READ, "", ("persistentvolumeclaims", "persistentvolumes")),
        rule("create", "authentication.k8s.io", "tokenreviews"),
        rule("create", "authorization.k8s.io", "subjectaccessreviews"),
        rule(READ, "storage.k8s.io", "csinodes"),
        rule(READ, "", "namespaces"),
        rule(READ, "storage.k8s.io", "csidrivers"),
        rule(READ, "storage.k8s.io", "csistoragecapacities"),
    ]


def _node() -> list[Rule]:
    return [
        rule("create", "authentication.k8s.io", "tokenreviews"),
        rule("create", "authorization.k8s.io", ("subjectaccessreviews", "localsubjectaccessreviews")),
        rule(READ, "", "services"),
        rule(("create", "get", "list", "watch"), "", "nodes"),
        rule(("update", "patch"), "", "nodes/status"),
        rule(("update", "patch"), "", "nodes"),
        rule(("create", "update", "patch"), "", "events"),
        rule(READ, "", "pods"),
        rule(("create", "delete"), "", "pods"),
        rule(("update", "patch"), "", "pods/status"),
        rule("create", "", "pods/eviction"),
        rule(READ, "", ("secrets", "configmaps")),
        rule("get", "", ("persistentvolumeclaims", "persistentvolumes")),
        rule("get", "", "endpoints"),
        rule(("create", "get", "list", "watch"), "certificates.k8s.io", "certificatesigningrequests"),
        rule(("get", "create", "update", "patch", "delete"), "coordination.k8s.io", "leases"),
        rule("get", "storage.k8s.io", "volumeattachments"),
        rule("create", "", "serviceaccounts/token"),
        rule(("get", "update", "patch"), "", "persistentvolumeclaims/status"),
        rule(READ, "storage.k8s.io", "csidrivers"),
        rule(("get", "create", "update", "patch", "delete"), "storage.k8s.io", "csinodes"),
        rule(READ, "node.k8s.io", "runtimeclasses"),
    ]


def _approver(signer: str) -> Obj:
    return cluster_role(f"system:certificates.k8s.io:{signer.removeprefix('kubernetes.io/')}-approver",
                        [rule("approve", "certificates.k8s.io", "signers", names=(signer,))])


def cluster_roles() -> list[Obj]:
    """Every default ClusterRole but the controllers' (kube's ``ClusterRoles()``)."""
    return [
        cluster_role("cluster-admin", [rule("*", "*", "*"), rule("*", urls=("*",))]),
        cluster_role("system:discovery", [rule("get", urls=(
            "/readyz", "/healthz", "/livez", "/version", "/version/", "/openapi", "/openapi/*",
            "/api", "/api/*", "/apis", "/apis/*"))]),
        cluster_role("system:monitoring", [rule("get", urls=(
            "/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz", "/livez/*", "/readyz/*", "/healthz/*"))]),
        cluster_role("system:basic-user", [
            rule("create", "authorization.k8s.io", ("selfsubjectaccessreviews", "selfsubjectrulesreviews")),
            rule("create", "authentication.k8s.io", "selfsubjectreviews")]),
        cluster_role("system:public-info-viewer", [rule("get", urls=(
            "/livez", "/readyz", "/healthz", "/version", "/version/"))]),
        cluster_role("admin", [], aggregate_from="admin"),
        cluster_role("edit", [], labels={AGGREGATE_TO + "admin": "true"}, aggregate_from="edit"),
        cluster_role("view", [], labels={AGGREGATE_TO + "edit": "true"}, aggregate_from="view"),
        cluster_role("system:aggregate-to-admin", _aggregate_to_admin(), labels={AGGREGATE_TO + "admin": "true"}),
        cluster_role("system:aggregate-to-edit", _aggregate_to_edit(), labels={AGGREGATE_TO + "edit": "true"}),
        cluster_role("system:aggregate-to-view", _aggregate_to_view(), labels={AGGREGATE_TO + "view": "true"}),
        cluster_role("system:heapster", [rule(READ, "", ("events", "pods", "nodes", "namespaces")),
                                         rule(READ, "extensions", "deployments")]),
        cluster_role("system:node", _node()),
        cluster_role("system:node-problem-detector", [rule("get", "", "nodes"), rule("patch", "", "nodes/status"),
                                                      events_rule()]),
        cluster_role("system:kubelet-api-admin", [
            rule(READ, "", "nodes"), rule("proxy", "", "nodes"),
            rule("*", "", ("nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log"))]),
        cluster_role("system:node-bootstrapper", [
            rule(("create", "get", "list", "watch"), "certificates.k8s.io", "certificatesigningrequests")]),
        cluster_role("system:auth-delegator", [rule("create", "authentication.k8s.io", "tokenreviews"),
                                               rule("create", "authorization.k8s.io", "subjectaccessreviews")]),
        cluster_role("system:kube-aggregator", [rule(READ, "", ("services", "endpoints"))]),
        cluster_role("system:kube-controller-manager", _kube_controller_manager()),
        cluster_role("system:kube-dns", [rule(("list", "watch"), "", ("endpoints", "services"))]),
        cluster_role("system:persistent-volume-provisioner", [
            rule(("get", "list", "watch", "create", "delete"), "", "persistentvolumes"),
            rule(("get", "list", "watch", "update"), "", "persistentvolumeclaims"),
            rule(READ, "storage.k8s.io", "storageclasses"),
            rule("watch", "", "events"), events_rule()]),
        cluster_role("system:certificates.k8s.io:certificatesigningrequests:nodeclient", [
            rule("create", "certificates.k8s.io", "certificatesigningrequests/nodeclient")]),
        cluster_role("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", [
            rule("create", "certificates.k8s.io", "certificatesigningrequests/selfnodeclient")]),
        cluster_role("system:volume-scheduler", [
            rule(("get", "list", "watch", "update", "patch"), "", "persistentvolumes"),
            rule(READ, "storage.k8s.io", "storageclasses"),
            rule(("get", "list", "watch", "update", "patch"), "", "persistentvolumeclaims")]),
        _approver("kubernetes.io/legacy-unknown"),
        _approver("kubernetes.io/kubelet-serving"),
        _approver("kubernetes.io/kube-apiserver-client"),
        _approver("kubernetes.io/kube-apiserver-client-kubelet"),
        cluster_role("system:service-account-issuer-discovery", [rule("get", urls=(
            "/.well-known/openid-configuration", "/openid/v1/jwks"))]),
        cluster_role("system:node-proxier", [
            rule(("list", "watch"), "", ("services", "endpoints")), rule(READ, "", "nodes"), events_rule(),
            rule(("list", "watch"), "discovery.k8s.io", "endpointslices")]),
        cluster_role("system:kube-scheduler", _kube_scheduler()),
    ]


def cluster_role_bindings() -> list[Obj]:
    """Every default ClusterRoleBinding but the controllers' (kube's ``ClusterRoleBindings()``)."""
    sa = subject
    return [
        cluster_binding("cluster-admin", group("system:masters")),
        cluster_binding("system:monitoring", group("system:monitoring")),
        cluster_binding("system:discovery", group("system:authenticated")),
        cluster_binding("system:basic-user", group("system:authenticated")),
        cluster_binding("system:public-info-viewer", group("system:authenticated"), group("system:unauthenticated")),
        cluster_binding("system:node-proxier", user("system:kube-proxy")),
        cluster_binding("system:kube-controller-manager", user("system:kube-controller-manager")),
        cluster_binding("system:kube-dns", sa("ServiceAccount", "kube-dns", "kube-system")),
        cluster_binding("system:kube-scheduler", user("system:kube-scheduler")),
        cluster_binding("system:volume-scheduler", user("system:kube-scheduler")),
        cluster_binding("system:node"),
        cluster_binding("system:service-account-issuer-discovery", group("system:serviceaccounts")),
    ]


def _controller_rules() -> dict[str, list[Rule]]:
    """The controllers' roles (kube's ``controller_policy.go``), each bound to its service account
    in kube-system: first those of the controllers kubechain runs (and the aggregation controller)."""
    return {
        "clusterrole-aggregation-controller": [
            rule(("escalate", "get", "list", "watch", "update", "patch"), RBAC_GROUP, "clusterroles")],
        "generic-garbage-collector": [rule(("get", "list", "watch", "patch", "update", "delete"), "*", "*")],
        "namespace-controller": [
            rule(("get", "list", "watch", "delete"), "", "namespaces"),
            rule("update", "", ("namespaces/finalize", "namespaces/status")),
            rule(("get", "list", "delete", "deletecollection"), "*", "*")],
        "pod-garbage-collector": [
            rule(("list", "watch", "delete"), "", "pods"), rule(("get", "list"), "", "nodes"),
            rule("patch", "", "pods/status")],
        "root-ca-cert-publisher": [rule(("create", "update"), "", "configmaps"), events_rule()],
        "service-account-controller": [rule("create", "", "serviceaccounts"), events_rule()],
        # kube adds it while the ValidatingAdmissionPolicy gate is on (GA and on by default in 1.33).
        "validatingadmissionpolicy-status-controller": [
            rule(READ, "admissionregistration.k8s.io", "validatingadmissionpolicies"),
            rule(("get", "patch", "update"), "admissionregistration.k8s.io", "validatingadmissionpolicies/status"),
            events_rule()],
        **_workload_controller_rules(),
    }


def _workload_controller_rules() -> dict[str, list[Rule]]:
    """The roles of kube-controller-manager's other (not feature-gated) controllers: kubechain does
    not run them, but clusters and tools that run them expect their roles bound."""
    ext_apps = ("extensions", "apps")
    return {
        "attachdetach-controller": [
            rule(("list", "watch"), "", ("persistentvolumes", "persistentvolumeclaims")), rule(READ, "", "nodes"),
            rule(("patch", "update"), "", "nodes/status"), rule(("list", "watch"), "", "pods"), events_rule(),
            rule(("get", "create", "delete", "list", "watch"), "storage.k8s.io", "volumeattachments"),
            rule(READ, "storage.k8s.io", "csidrivers"), rule(READ, "storage.k8s.io", "csinodes")],
        "certificate-controller": [
            rule(("get", "list", "watch", "delete"), "certificates.k8s.io", "certificatesigningrequests"),
            rule("update", "certificates.k8s.io", ("certificatesigningrequests/status",
                                                   "certificatesigningrequests/approval")),
            rule("approve", "certificates.k8s.io", "signers", names=("kubernetes.io/kube-apiserver-client-kubelet",)),
            rule("sign", "certificates.k8s.io", "signers", names=(
                "kubernetes.io/legacy-unknown", "kubernetes.io/kube-apiserver-client",
                "kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving")),
            rule("create", "authorization.k8s.io", "subjectaccessreviews"), events_rule()],
        "cronjob-controller": [
            rule(("get", "list", "watch", "update"), "batch", "cronjobs"),
            rule(("get", "list", "watch", "create", "update", "delete", "patch"), "batch", "jobs"),
            rule("update", "batch", "cronjobs/status"), rule("update", "batch", "cronjobs/finalizers"),
            rule(("list", "delete"), "", "pods"), events_rule()],
        "daemon-set-controller": [
            rule(READ, ext_apps, "daemonsets"), rule("update", ext_apps, "daemonsets/status"),
            rule("update", ext_apps, "daemonsets/finalizers"), rule(("list", "watch"), "", "nodes"),
            rule(("list", "watch", "create", "delete", "patch"), "", "pods"), rule("create", "", "pods/binding"),
            rule(("get", "list", "watch", "create", "delete", "update", "patch"), "apps", "controllerrevisions"),
            events_rule()],
        "deployment-controller": [
            rule(("get", "list", "watch", "update"), ext_apps, "deployments"),
            rule("update", ext_apps, "deployments/status"), rule("update", ext_apps, "deployments/finalizers"),
            rule(("get", "list", "watch", "create", "update", "patch", "delete"), ("apps", "extensions"),
                 "replicasets"),
            rule(("get", "list", "watch", "update"), "", "pods"), events_rule()],
        "disruption-controller": [
            rule(READ, ext_apps, "deployments"), rule(READ, ("apps", "extensions"), "replicasets"),
            rule(READ, "", "replicationcontrollers"), rule(READ, "policy", "poddisruptionbudgets"),
            rule(READ, "apps", "statefulsets"), rule("update", "policy", "poddisruptionbudgets/status"),
            rule(("patch", "update"), "", "pods/status"), rule("get", "*", "*/scale"), events_rule()],
        "endpoint-controller": [
            rule(READ, "", ("services", "pods")), rule(("get", "list", "create", "update", "delete"), "", "endpoints"),
            rule("create", "", "endpoints/restricted"), events_rule()],
        "endpointslice-controller": [
            rule(READ, "", ("services", "pods", "nodes")), rule("update", "", "services/finalizers"),
            rule(("get", "list", "create", "update", "delete"), "discovery.k8s.io", "endpointslices"), events_rule()],
        "endpointslicemirroring-controller": [
            rule(READ, "", ("services", "endpoints")), rule("update", "", "services/finalizers"),
            rule("update", "", "endpoints/finalizers"),
            rule(("get", "list", "create", "update", "delete"), "discovery.k8s.io", "endpointslices"), events_rule()],
        "ephemeral-volume-controller": [
            rule(READ, "", "pods"), rule("update", "", "pods/finalizers"),
            rule(("get", "list", "watch", "create"), "", "persistentvolumeclaims"), events_rule()],
        "horizontal-pod-autoscaler": [
            rule(READ, "autoscaling", "horizontalpodautoscalers"),
            rule("update", "autoscaling", "horizontalpodautoscalers/status"),
            rule(("get", "update"), "*", "*/scale"), rule("list", "", "pods"),
            rule("list", "metrics.k8s.io", "pods"), rule(("get", "list"), "custom.metrics.k8s.io", "*"),
            rule(("get", "list"), "external.metrics.k8s.io", "*"), events_rule()],
        "job-controller": [
            rule(("get", "list", "watch", "update", "patch"), "batch", "jobs"), rule("update", "batch", "jobs/status"),
            rule("update", "batch", "jobs/finalizers"),
            rule(("list", "watch", "create", "delete", "patch"), "", "pods"), events_rule()],
        "legacy-service-account-token-cleaner": [
            rule("get", "", "configmaps", names=("kube-apiserver-legacy-service-account-token-tracking",)),
            rule(("patch", "delete"), "", "secrets")],
        "pv-protection-controller": [rule(("get", "list", "watch", "update"), "", "persistentvolumes"),
                                     events_rule()],
        "pvc-protection-controller": [rule(("get", "list", "watch", "update"), "", "persistentvolumeclaims"),
                                      rule(READ, "", "pods"), events_rule()],
        "replicaset-controller": [
            rule(("get", "list", "watch", "update"), ("apps", "extensions"), "replicasets"),
            rule("update", ("apps", "extensions"), "replicasets/status"),
            rule("update", ("apps", "extensions"), "replicasets/finalizers"),
            rule(("list", "watch", "patch", "create", "delete"), "", "pods"), events_rule()],
        "replication-controller": [
            rule(("get", "list", "watch", "update"), "", "replicationcontrollers"),
            rule("update", "", "replicationcontrollers/status"),
            rule("update", "", "replicationcontrollers/finalizers"),
            rule(("list", "watch", "patch", "create", "delete"), "", "pods"), events_rule()],
        "resourcequota-controller": [rule(("list", "watch"), "*", "*"),
                                     rule("update", "", "resourcequotas/status"), events_rule()],
        "service-controller": [rule(READ, "", "services"), rule(("patch", "update"), "", "services/status"),
                               rule(("list", "watch"), "", "nodes"), events_rule()],
        "statefulset-controller": [
            rule(("list", "watch"), "", "pods"), rule(READ, "apps", "statefulsets"),
            rule("update", "apps", "statefulsets/status"), rule("update", "apps", "statefulsets/finalizers"),
            rule(("get", "create", "delete", "update", "patch"), "", "pods"),
            rule(("get", "create", "delete", "update", "patch", "list", "watch"), "apps", "controllerrevisions"),
            rule(("get", "create"), "", "persistentvolumeclaims"), events_rule(),
            rule(("update", "delete"), "", "persistentvolumeclaims")],
        "ttl-after-finished-controller": [rule(("get", "list", "watch", "delete"), "batch", "jobs"), events_rule()],
        "ttl-controller": [rule(("update", "patch", "list", "watch"), "", "nodes"), events_rule()],
    }


CONTROLLER_PREFIX = "system:controller:"


def controller_roles() -> list[Obj]:
    return [cluster_role(CONTROLLER_PREFIX + name, rules) for name, rules in sorted(_controller_rules().items())]


def controller_role_bindings() -> list[Obj]:
    return [cluster_binding(CONTROLLER_PREFIX + name, subject("ServiceAccount", name, "kube-system"))
            for name in sorted(_controller_rules())]


def _leader_locking() -> list[Rule]:
    return [rule((*READ, "create", "update"), "coordination.k8s.io", "leases"),
            rule((*READ, "create", "update"), "coordination.k8s.io", "leasecandidates")]


def namespace_roles() -> list[Obj]:
    """The Roles kube creates in kube-system and kube-public (``NamespaceRoles()``)."""
    return [
        role("extension-apiserver-authentication-reader", "kube-system", [
            rule(READ, "", "configmaps", names=("extension-apiserver-authentication",))]),
        role("system::leader-locking-kube-controller-manager", "kube-system", _leader_locking()),
        role("system::leader-locking-kube-scheduler", "kube-system", _leader_locking()),
        role("system:controller:bootstrap-signer", "kube-system", [rule(READ, "", "secrets")]),
        role("system:controller:cloud-provider", "kube-system", [rule(("create", "get", "list", "watch"), "",
                                                                      "configmaps")]),
        role("system:controller:token-cleaner", "kube-system", [rule(("delete", *READ), "", "secrets"),
                                                                 events_rule()]),
        role("system:controller:bootstrap-signer", "kube-public", [
            rule(READ, "", "configmaps"), rule("update", "", "configmaps", names=("cluster-info",)), events_rule()]),
    ]


def namespace_role_bindings() -> list[Obj]:
    def rb(name: str, namespace: str, role_name: str, *subjects: Obj) -> Obj:
        return binding("RoleBinding", name, "Role", role_name, list(subjects), namespace)
    sa = subject
    return [
        rb("system::extension-apiserver-authentication-reader", "kube-system",
           "extension-apiserver-authentication-reader",
           user("system:kube-controller-manager"), user("system:kube-scheduler")),
        rb("system::leader-locking-kube-controller-manager", "kube-system",
           "system::leader-locking-kube-controller-manager", user("system:kube-controller-manager"),
           sa("ServiceAccount", "kube-controller-manager"), sa("ServiceAccount", "leader-election-controller")),
        rb("system::leader-locking-kube-scheduler", "kube-system", "system::leader-locking-kube-scheduler",
           user("system:kube-scheduler"), sa("ServiceAccount", "kube-scheduler")),
        rb("system:controller:bootstrap-signer", "kube-system", "system:controller:bootstrap-signer",
           sa("ServiceAccount", "bootstrap-signer")),
        rb("system:controller:cloud-provider", "kube-system", "system:controller:cloud-provider",
           sa("ServiceAccount", "cloud-provider")),
        rb("system:controller:token-cleaner", "kube-system", "system:controller:token-cleaner",
           sa("ServiceAccount", "token-cleaner")),
        rb("system:controller:bootstrap-signer", "kube-public", "system:controller:bootstrap-signer",
           sa("ServiceAccount", "bootstrap-signer", "kube-system")),
    ]
