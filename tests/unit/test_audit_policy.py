"""The audit policy: kube's rule matching (first match wins), omitStages/omitManagedFields merging,
and the policy file's decoding and validation errors in kube's words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from aggregator.audit import policy as p
from genericapi.apimachinery.user import UserInfo

ALICE = UserInfo("alice", ("devs", "system:authenticated"))
BOB = UserInfo("bob", ("system:authenticated",))


def res(verb: str, resource: str, *, user: UserInfo | None = ALICE, namespace: str = "default", group: str = "",
        subresource: str = "", name: str = "") -> p.Request:
    return p.Request(user, verb, True, "/x", namespace, group, resource, subresource, name)


def nonres(path: str, verb: str = "get", user: UserInfo | None = ALICE) -> p.Request:
    return p.Request(user, verb, False, path)


def load(text: str) -> p.Policy:
    return p.load_policy(("apiVersion: audit.k8s.io/v1\nkind: Policy\n" + text).encode())


def test_first_matching_rule_wins_and_no_match_is_none() -> None:
    policy = load("""
rules:
  - level: None
    users: [bob]
  - level: RequestResponse
    resources: [{group: "", resources: [pods]}]
  - level: Metadata
    verbs: [get]
""")
    assert policy.evaluate(res("get", "pods", user=BOB)).level == "None"
    assert policy.evaluate(res("get", "pods")).level == "RequestResponse"
    assert policy.evaluate(res("get", "secrets")).level == "Metadata"
    assert policy.evaluate(res("list", "secrets")).level == "None"  # no rule: kube's default level


def test_users_groups_and_verbs() -> None:
    policy = load("""
rules:
  - level: Request
    userGroups: [devs]
    verbs: [create, update]
  - level: Metadata
""")
    assert policy.evaluate(res("create", "pods")).level == "Request"
    assert policy.evaluate(res("create", "pods", user=BOB)).level == "Metadata"
    assert policy.evaluate(res("get", "pods")).level == "Metadata"
    # a failed authentication has no user: rules naming users or groups never match it
    assert policy.evaluate(res("create", "pods", user=None)).level == "Metadata"


def test_resources_subresources_names_and_namespaces() -> None:
    policy = load("""
rules:
  - level: RequestResponse
    resources: [{group: "", resources: ["pods/log"]}]
  - level: Request
    resources: [{group: "", resources: ["*/status"]}]
  - level: Metadata
    resources: [{group: apps, resources: ["deployments/*"]}]
  - level: Request
    resources: [{group: "", resources: [configmaps], resourceNames: [settings]}]
  - level: Metadata
    namespaces: [kube-system]
  - level: RequestResponse
    resources: [{group: "rbac.authorization.k8s.io"}]
""")
    assert policy.evaluate(res("get", "pods", subresource="log")).level == "RequestResponse"
    assert policy.evaluate(res("get", "pods")).level == "None"  # "pods/log" is not "pods"
    assert policy.evaluate(res("update", "nodes", subresource="status", namespace="")).level == "Request"
    assert policy.evaluate(res("get", "deployments", group="apps", subresource="scale")).level == "Metadata"
    assert policy.evaluate(res("get", "deployments", group="apps")).level == "Metadata"  # resource/* covers it
    assert policy.evaluate(res("get", "configmaps", name="settings")).level == "Request"
    assert policy.evaluate(res("get", "configmaps", name="other")).level == "None"
    assert policy.evaluate(res("get", "secrets", namespace="kube-system")).level == "Metadata"
    assert policy.evaluate(res("list", "roles", group="rbac.authorization.k8s.io")).level == "RequestResponse"
    # a non-resource request never matches a rule about resources or namespaces
    assert policy.evaluate(nonres("/apis")).level == "None"


def test_cluster_scoped_requests_have_the_empty_namespace() -> None:
    policy = load("""
rules:
  - level: Metadata
    namespaces: [""]
""")
    assert policy.evaluate(res("get", "nodes", namespace="")).level == "Metadata"
    assert policy.evaluate(res("get", "pods")).level == "None"


def test_non_resource_urls() -> None:
    policy = load("""
rules:
  - level: None
    nonResourceURLs: ["/healthz*", /version]
  - level: Request
    nonResourceURLs: ["*"]
  - level: Metadata
""")
    assert policy.evaluate(nonres("/healthz")).level == "None"
    assert policy.evaluate(nonres("/healthz/etcd")).level == "None"
    assert policy.evaluate(nonres("/version")).level == "None"
    assert policy.evaluate(nonres("/version/")).level == "Request"  # exact, without the *
    assert policy.evaluate(nonres("/apis")).level == "Request"
    assert policy.evaluate(res("get", "pods")).level == "Metadata"  # resources never match URL rules


def test_omit_stages_are_the_union_of_policy_and_rule() -> None:
    policy = load("""
omitStages: [RequestReceived]
omitManagedFields: true
rules:
  - level: Metadata
    users: [bob]
    omitStages: [ResponseStarted]
    omitManagedFields: false
  - level: Request
""")
    bob = policy.evaluate(res("get", "pods", user=BOB))
    assert bob.omit_stages == {"RequestReceived", "ResponseStarted"} and bob.omit_managed_fields is False
    alice = policy.evaluate(res("get", "pods"))
    assert alice.omit_stages == {"RequestReceived"} and alice.omit_managed_fields is True
    none = load("omitStages: [Panic]\nrules: [{level: Metadata, users: [nobody]}]").evaluate(res("get", "pods"))
    assert none.level == "None" and none.omit_stages == {"Panic"}


def test_validation_errors_in_kubes_words() -> None:
    with pytest.raises(p.PolicyError) as err:
        load("""
rules:
  - level: Loud
  - {}
  - level: Metadata
    nonResourceURLs: [healthz, "/a*b"]
    resources: [{group: Bad_Group, resourceNames: [x]}]
    omitStages: [Sometimes]
""")
    text = str(err.value)
    assert text.startswith("[rules[0].level: Unsupported value: \"Loud\": supported values: \"Metadata\", \"None\", "
                           "\"Request\", \"RequestResponse\", rules[1].level: Required value, ")
    assert ("rules[2].nonResourceURLs[0]: Invalid value: \"healthz\": non-resource URL rules must begin with a "
            "'/' character") in text
    assert ("rules[2].nonResourceURLs[1]: Invalid value: \"/a*b\": non-resource URL wildcards '*' must be the "
            "final character of the rule") in text
    assert "rules[2].resources.group: Invalid value: \"Bad_Group\": a lowercase RFC 1123 subdomain" in text
    assert ("rules[2].resources.resourceNames: Invalid value: []string{\"x\"}: using resourceNames requires at "
            "least one resource") in text
    assert ("rules[2].omitStages[0]: Invalid value: \"Sometimes\": allowed stages are "
            "Panic,RequestReceived,ResponseComplete,ResponseStarted") in text
    assert text.endswith("rules[2].nonResourceURLs: Invalid value: []string{\"healthz\", \"/a*b\"}: rules cannot "
                         "apply to both regular resources and non-resource URLs]")


def test_one_error_is_not_bracketed_and_top_level_stages_are_checked() -> None:
    with pytest.raises(p.PolicyError, match=r"^omitStages\[0\]: Invalid value: \"Never\": allowed stages are "):
        load("omitStages: [Never]\nrules: [{level: None}]")


def test_decoding_errors() -> None:
    with pytest.raises(p.PolicyError, match=r"^loaded illegal policy with 0 rules$"):
        load("rules: []")
    with pytest.raises(p.PolicyError, match=r"^failed decoding: Object 'Kind' is missing in"):
        p.load_policy(b"apiVersion: audit.k8s.io/v1\nrules: []\n")
    with pytest.raises(p.PolicyError, match=r'^failed decoding: no kind "Policy" is registered for version '
                                            r'"audit\.k8s\.io/v1beta1"'):
        p.load_policy(b"apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]\n")
    with pytest.raises(p.PolicyError, match=r"^failed decoding: json: cannot unmarshal string into Go struct field "
                                            r"Policy.rules of type \[\]v1.PolicyRule$"):
        load("rules: everything")
    with pytest.raises(p.PolicyError, match=r"^failed decoding: json: cannot unmarshal number into Go struct field "
                                            r"PolicyRule\.rules\.level of type v1\.Level$"):
        load("rules: [{level: 3}]")
    with pytest.raises(p.PolicyError, match=r"^failed decoding: error converting YAML to JSON"):
        p.load_policy(b"kind: Policy\nrules: [\n")


def test_unknown_fields_are_warned_about_not_refused(caplog: pytest.LogCaptureFixture) -> None:
    policy = load("rules: [{level: Metadata, verb: [get]}]")  # "verb" is a typo of "verbs"
    assert policy.evaluate(res("list", "pods")).level == "Metadata"
    assert 'unknown field "rules[0].verb"' in caplog.text


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(p.PolicyError, match=r"^failed to read file path"):
        p.load_policy_file(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "policy.yaml"
    bad.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n")
    with pytest.raises(p.PolicyError, match=f"^loaded illegal policy with 0 rules: from file {re.escape(str(bad))}$"):
        p.load_policy_file(str(bad))


def test_the_default_policy_of_kubechain_up_loads(tmp_path: Path) -> None:
    from kubechain_cli import auditpolicy
    policy = p.load_policy_file(str(auditpolicy.write_default(tmp_path / "audit-policy.yaml")))
    assert policy.evaluate(res("get", "secrets")).level == "Metadata"
    assert policy.evaluate(res("create", "pods")).level == "Metadata"
    assert policy.evaluate(nonres("/readyz")).level == "None"
    assert policy.evaluate(res("get", "pods", user=UserInfo("system:apiserver"))).level == "None"
    assert policy.evaluate(res("get", "pods")).omit_stages == {"RequestReceived"}
    deployed = Path(__file__).parents[2] / "deploy" / "base" / "audit-policy.yaml"
    assert deployed.read_text() == auditpolicy.DEFAULT_POLICY  # compose and deploy/ mount the same policy
