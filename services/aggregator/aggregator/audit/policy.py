"""``--audit-policy-file``: kube's audit Policy, read, validated and evaluated as kube-apiserver does.

A Policy is an ordered list of rules; the first rule matching a request decides its level (None,
Metadata, Request, RequestResponse), the stages left out and whether managedFields are dropped from
the logged bodies. No rule matching means None. Reading follows kube's ``policy.LoadPolicyFromFile``
(YAML or JSON, ``audit.k8s.io/v1`` only, unknown fields warned about, at least one rule) and its
validation (``apis/audit/validation``), with kube's messages, so a bad file stops the gateway at
start with the same words kube-apiserver prints. Pure: no HTTP types.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml
from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.gofmt import go_quote
from genericapi.apimachinery.matchconditions import aggregate
from genericapi.apimachinery.user import UserInfo
from genericapi.apimachinery.validation_meta import validate_dns1123_subdomain

log = logging.getLogger(__name__)

NONE, METADATA, REQUEST, REQUEST_RESPONSE = "None", "Metadata", "Request", "RequestResponse"
#: Levels in order: a level "is at least" another when its rank is not lower.
LEVEL_RANK = {NONE: 0, METADATA: 1, REQUEST: 2, REQUEST_RESPONSE: 3}
REQUEST_RECEIVED, RESPONSE_STARTED, RESPONSE_COMPLETE, PANIC = (
    "RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")
STAGES = (PANIC, REQUEST_RECEIVED, RESPONSE_COMPLETE, RESPONSE_STARTED)  # sorted, as kube lists them
API_VERSION = "audit.k8s.io/v1"


class PolicyError(ValueError):
    """A policy file kube-apiserver would refuse to start with (the message is kube's)."""


@dataclass(frozen=True)
class GroupResources:
    group: str = ""
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class PolicyRule:
    level: str
    users: frozenset[str] = frozenset()
    user_groups: frozenset[str] = frozenset()
    verbs: frozenset[str] = frozenset()
    resources: tuple[GroupResources, ...] = ()
    namespaces: frozenset[str] = frozenset()
    non_resource_urls: tuple[str, ...] = ()
    omit_stages: frozenset[str] = frozenset()
    #: None: the policy's ``omitManagedFields`` decides.
    omit_managed_fields: bool | None = None


@dataclass(frozen=True)
class RequestAuditConfig:
    """What the policy decided for one request (kube's ``RequestAuditConfig``)."""

    level: str
    omit_stages: frozenset[str] = frozenset()
    omit_managed_fields: bool = False


@dataclass(frozen=True)
class Request:
    """What a rule looks at (kube evaluates ``authorizer.Attributes``): the authenticated user (before
    impersonation), the verb, and the resource or the non-resource path."""

    user: UserInfo | None
    verb: str
    is_resource_request: bool
    path: str = ""
    namespace: str = ""
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


@dataclass(frozen=True)
class Policy:
    rules: tuple[PolicyRule, ...]
    omit_stages: frozenset[str] = frozenset()
    omit_managed_fields: bool = False
    _configs: tuple[RequestAuditConfig, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        # kube's NewPolicyRuleEvaluator: each rule omits the policy's stages and its own.
        configs = tuple(RequestAuditConfig(
            r.level, self.omit_stages | r.omit_stages,
            self.omit_managed_fields if r.omit_managed_fields is None else r.omit_managed_fields)
            for r in self.rules)
        object.__setattr__(self, "_configs", configs)

    def evaluate(self, request: Request) -> RequestAuditConfig:
        """The first matching rule's decision; no match is level None (kube's DefaultAuditLevel)."""
        for rule, config in zip(self.rules, self._configs, strict=True):
            if rule_matches(rule, request):
                return config
        return RequestAuditConfig(NONE, self.omit_stages, self.omit_managed_fields)


def rule_matches(rule: PolicyRule, request: Request) -> bool:
    """kube's ``ruleMatches``: users, then groups, then verbs; then resources/namespaces if the rule
    names any (non-resource URLs are then ignored), else non-resource URLs if it names any."""
    user = request.user
    if rule.users and (user is None or user.name not in rule.users):
        return False
    if rule.user_groups and (user is None or not any(g in rule.user_groups for g in user.groups)):
        return False
    if rule.verbs and request.verb not in rule.verbs:
        return False
    if rule.namespaces or rule.resources:
        return _matches_resource(rule, request)
    if rule.non_resource_urls:
        return not request.is_resource_request and any(path_matches(request.path, spec)
                                                       for spec in rule.non_resource_urls)
    return True


def _matches_resource(rule: PolicyRule, request: Request) -> bool:
    if not request.is_resource_request:
        return False
    if rule.namespaces and request.namespace not in rule.namespaces:
        return False  # cluster-scoped requests have the namespace ""
    if not rule.resources:
        return True
    resource, sub = request.resource, request.subresource
    combined = f"{resource}/{sub}" if sub else resource
    for gr in rule.resources:
        if gr.group != request.api_group:
            continue
        if not gr.resources:
            return True
        if gr.resource_names and request.name not in gr.resource_names:
            continue
        for res in gr.resources:
            if res in (combined, "*"):
                return True
            if sub and res.startswith("*/") and sub == res[2:]:
                return True
            if res.endswith("/*") and resource == res[:-2]:
                return True
    return False


def path_matches(path: str, spec: str) -> bool:
    """kube's non-resource URL match: ``*``, the exact path, or a prefix ending in ``*``."""
    if spec in ("*", path):
        return True
    return spec.endswith("*") and path.startswith(spec.rstrip("*"))


# -- reading ---------------------------------------------------------------------------------------

def load_policy_file(path: str) -> Policy:
    """kube's ``LoadPolicyFromFile`` (its messages; PolicyError when the file is refused)."""
    if not path:
        raise PolicyError("file path not specified")
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise PolicyError(f"failed to read file path {path!r}: {err}") from err
    try:
        return load_policy(data)
    except PolicyError as err:
        raise PolicyError(f"{err}: from file {path}") from err


def load_policy(data: bytes) -> Policy:
    """kube's ``LoadPolicyFromBytes``: decode (YAML or JSON), check the group-version, validate."""
    try:
        doc = yaml.safe_load(data) if data.strip() else None
    except yaml.YAMLError as err:
        raise PolicyError(f"failed decoding: error converting YAML to JSON: {err}") from err
    if not isinstance(doc, dict):
        shown = data.decode("utf-8", "replace")
        raise PolicyError(f"failed decoding: Object 'Kind' is missing in '{shown}'")
    if not doc.get("kind"):
        raise PolicyError(f"failed decoding: Object 'Kind' is missing in '{_compact(doc)}'")
    api_version, kind = doc.get("apiVersion") or "", doc["kind"]
    if not api_version:
        raise PolicyError(f"failed decoding: Object 'apiVersion' is missing in '{_compact(doc)}'")
    if api_version != API_VERSION or kind != "Policy":
        raise PolicyError(f"failed decoding: no kind \"{kind}\" is registered for version \"{api_version}\" "
                          "in scheme \"k8s.io/apiserver/pkg/audit/policy/reader.go\"")
    reader = _Reader()
    policy = reader.policy(doc)
    if reader.unknown:
        log.warning("Audit policy contains errors, falling back to lenient decoding: strict decoding error: %s",
                    ", ".join(f'unknown field "{u}"' for u in reader.unknown))
    errs = validate(doc)
    if errs:
        raise PolicyError(aggregate([str(e) for e in errs]))
    if not policy.rules:
        raise PolicyError("loaded illegal policy with 0 rules")
    return policy


def _compact(doc: Any) -> str:
    return orjson.dumps(doc, default=str).decode()


class _Reader:
    """Typed reading of the decoded document with Go's json type errors; unknown fields noted."""

    def __init__(self) -> None:
        self.unknown: list[str] = []

    def policy(self, doc: dict[str, Any]) -> Policy:
        self._note_unknown(doc, "", {"apiVersion", "kind", "metadata", "rules", "omitStages", "omitManagedFields"})
        rules = self._list(doc, "rules", "Policy", "[]v1.PolicyRule", "rules")
        parsed = []
        for i, raw in enumerate(rules):
            if not isinstance(raw, dict):
                raise _type_error(raw, "Policy.rules", "v1.PolicyRule")
            parsed.append(self.rule(raw, f"rules[{i}]"))
        return Policy(tuple(parsed),
                      frozenset(self._strings(doc, "omitStages", "Policy", "[]v1.Stage", "omitStages")),
                      bool(self._bool(doc, "omitManagedFields", "Policy", "omitManagedFields")))

    def rule(self, raw: dict[str, Any], where: str) -> PolicyRule:
        self._note_unknown(raw, where + ".", {"level", "users", "userGroups", "verbs", "resources", "namespaces",
                                              "nonResourceURLs", "omitStages", "omitManagedFields"})
        level = raw.get("level")
        if level is not None and not isinstance(level, str):
            raise _type_error(level, "PolicyRule.rules.level", "v1.Level")
        groups = []
        for j, gr in enumerate(self._list(raw, "resources", "PolicyRule", "[]v1.GroupResources", "rules.resources")):
            if not isinstance(gr, dict):
                raise _type_error(gr, "PolicyRule.rules.resources", "v1.GroupResources")
            self._note_unknown(gr, f"{where}.resources[{j}].", {"group", "resources", "resourceNames"})
            group = gr.get("group")
            if group is not None and not isinstance(group, str):
                raise _type_error(group, "GroupResources.rules.resources.group", "string")
            groups.append(GroupResources(
                group or "",
                tuple(self._strings(gr, "resources", "GroupResources", "[]string", "rules.resources.resources")),
                tuple(self._strings(gr, "resourceNames", "GroupResources", "[]string",
                                    "rules.resources.resourceNames"))))
        s = self._strings
        return PolicyRule(
            level or "",
            frozenset(s(raw, "users", "PolicyRule", "[]string", "rules.users")),
            frozenset(s(raw, "userGroups", "PolicyRule", "[]string", "rules.userGroups")),
            frozenset(s(raw, "verbs", "PolicyRule", "[]string", "rules.verbs")),
            tuple(groups),
            frozenset(s(raw, "namespaces", "PolicyRule", "[]string", "rules.namespaces")),
            tuple(s(raw, "nonResourceURLs", "PolicyRule", "[]string", "rules.nonResourceURLs")),
            frozenset(s(raw, "omitStages", "PolicyRule", "[]v1.Stage", "rules.omitStages")),
            self._bool(raw, "omitManagedFields", "PolicyRule", "rules.omitManagedFields"))

    def _note_unknown(self, raw: dict[str, Any], prefix: str, known: set[str]) -> None:
        self.unknown.extend(prefix + str(k) for k in raw if k not in known)

    @staticmethod
    def _list(raw: dict[str, Any], key: str, struct: str, go_type: str, path: str) -> list[Any]:
        value = raw.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise _type_error(value, f"{struct}.{path}", go_type)
        return value

    def _strings(self, raw: dict[str, Any], key: str, struct: str, go_type: str, path: str) -> list[str]:
        values = self._list(raw, key, struct, go_type, path)
        for v in values:
            if not isinstance(v, str):
                raise _type_error(v, f"{struct}.{path}", go_type[2:])
        return values

    @staticmethod
    def _bool(raw: dict[str, Any], key: str, struct: str, path: str) -> bool | None:
        value = raw.get(key)
        if value is not None and not isinstance(value, bool):
            raise _type_error(value, f"{struct}.{path}", "bool")
        return value


def _type_error(value: Any, where: str, go_type: str) -> PolicyError:
    kind = ("string" if isinstance(value, str) else "bool" if isinstance(value, bool)
            else "number" if isinstance(value, (int, float)) else "array" if isinstance(value, list) else "object")
    return PolicyError(f"failed decoding: json: cannot unmarshal {kind} into Go struct field {where} of type {go_type}")


# -- validation (kube's apis/audit/validation) -----------------------------------------------------

def validate(doc: dict[str, Any]) -> list[apierrors.FieldError]:
    """kube's ``ValidatePolicy`` over the decoded document."""
    errs = _omit_stages(doc.get("omitStages") or [], "omitStages")
    for i, rule in enumerate(doc.get("rules") or []):
        errs += _rule(rule, f"rules[{i}]")
    return errs


def _rule(rule: dict[str, Any], where: str) -> list[apierrors.FieldError]:
    errs: list[apierrors.FieldError] = []
    level = rule.get("level") or ""
    if not level:
        errs.append(apierrors.required(f"{where}.level"))
    elif level not in LEVEL_RANK:
        errs.append(apierrors.not_supported(f"{where}.level", level, sorted(LEVEL_RANK)))
    urls = rule.get("nonResourceURLs") or []
    for i, url in enumerate(urls):
        if url == "*":
            continue
        if not url.startswith("/"):
            errs.append(apierrors.invalid(f"{where}.nonResourceURLs[{i}]", url,
                                          "non-resource URL rules must begin with a '/' character"))
        if url and "*" in url[:-1]:
            errs.append(apierrors.invalid(f"{where}.nonResourceURLs[{i}]", url,
                                          "non-resource URL wildcards '*' must be the final character of the rule"))
    for gr in rule.get("resources") or []:
        group = gr.get("group") or ""
        if group:
            msgs = validate_dns1123_subdomain(group)
            if msgs:
                errs.append(apierrors.invalid(f"{where}.resources.group", group, ",".join(msgs)))
        if gr.get("resourceNames") and not gr.get("resources"):
            errs.append(_invalid_list(f"{where}.resources.resourceNames", gr["resourceNames"],
                                      "using resourceNames requires at least one resource"))
    errs += _omit_stages(rule.get("omitStages") or [], f"{where}.omitStages")
    if urls and (rule.get("resources") or rule.get("namespaces")):
        errs.append(_invalid_list(f"{where}.nonResourceURLs", urls,
                                  "rules cannot apply to both regular resources and non-resource URLs"))
    return errs


def _omit_stages(stages: Sequence[str], where: str) -> list[apierrors.FieldError]:
    return [apierrors.invalid(f"{where}[{i}]", s, "allowed stages are " + ",".join(STAGES))
            for i, s in enumerate(stages) if s not in STAGES]


def _invalid_list(path: str, values: Sequence[str], detail: str) -> apierrors.FieldError:
    """``field.Invalid`` of a ``[]string`` value: Go prints it as ``[]string{"a", "b"}``."""
    rendered = "[]string{" + ", ".join(go_quote(v) for v in values) + "}"
    return apierrors.FieldError("FieldValueInvalid", path, f"{rendered}: {detail}" if detail else rendered)


#: A request's level at least ``level``?
def at_least(level: str, wanted: str) -> bool:
    return LEVEL_RANK[level] >= LEVEL_RANK[wanted]


Evaluator = Callable[[Request], RequestAuditConfig]
