"""The ValidatingAdmissionPolicy admission plugin (kube's validating policy dispatcher).

For a write it takes every policy that has bindings, in name order: if the policy's
``matchConstraints`` cover the request, each binding whose ``matchResources`` do too is evaluated
once per param (``paramRef``: by name, or every object its selector picks; none found follows
``parameterNotFoundAction``). A denied validation acts as the binding's ``validationActions``
say: Deny collects a denial (the first one is the answer: ``<resource> "<name>" is forbidden:
ValidatingAdmissionPolicy '<p>' with binding '<b>' denied request: <message>``, with the
validation's reason and kube's code for it), Warn adds a ``Warning`` header, Audit records the
``validation.policy.admission.k8s.io/validation_failure`` audit annotation. A policy or binding
that cannot be used (unknown paramKind, missing params, a bad selector) is a configuration error:
``failurePolicy: Fail`` denies with ``failed to configure policy|binding: ...``, Ignore skips it.

With ``matchPolicy: Equivalent`` a policy whose rules name another version of the request's
resource (a CRD's v1 for a v2 request) sees ``object`` / ``oldObject`` converted to that version
(kube's versioned attributes, converted once per kind per request, only when a binding is about
to be evaluated) and ``request.kind`` / ``request.resource`` saying it, while
``request.requestKind`` / ``request.requestResource`` keep what the request addressed (kube's
``CreateAdmissionRequest``). A Scale view is one kind at every version and is never converted.

Policies, bindings, namespaces and params come from a ``PolicySource`` (watch caches); policies
are compiled once per (uid, generation) and the policy-to-bindings index is rebuilt only when the
source's revision changes. Per request, only what a policy needs is built: the request's equivalent
resources when a rule does not name its own resource, ``request`` and ``namespaceObject`` when an
expression reads them (bench/vap_eval_bench.py measures the plugin's cost per create).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import orjson

from genericapi.apimachinery import admission as adm
from genericapi.apimachinery.authorization import Authorizer
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.labels import LabelSelectorError, from_label_selector_object
from genericapi.apimachinery.matchconditions import IGNORE

from .compiled import DENY, CompiledPolicy, Decision
from .matching import EXCLUDED, MatchError, MatchResources

FAILURE_ANNOTATION = "validation.policy.admission.k8s.io/validation_failure"
MAX_AUDIT_VALUE = 10 * 1024
_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}


class ParamStore(Protocol):
    """The objects of one param kind, from a watch cache."""

    namespaced: bool

    async def wait_synced(self, wait_seconds: float) -> bool:
        """Whether the cache has listed (waiting up to ``wait_seconds``, as kube waits 1 s)."""
        ...

    def get(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def list(self, namespace: str) -> list[dict[str, Any]]: ...


class PolicySource(Protocol):
    """Where the plugin reads policies, bindings, namespaces and params (never etcd per request)."""

    def revision(self) -> Any: ...

    def policies(self) -> Iterable[dict[str, Any]]: ...

    def bindings(self) -> Iterable[dict[str, Any]]: ...

    def namespace(self, name: str) -> dict[str, Any] | None: ...

    def param_store(self, api_version: str, kind: str) -> ParamStore | None: ...


class EquivalentResource(Protocol):
    """A group/version/resource (``admission.rules.Resource``), read-only."""

    @property
    def group(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def resource(self) -> str: ...


class Equivalents(Protocol):
    """The other served versions of a resource and conversion between them (``StoreEquivalents``)."""

    def equivalents(self, group: str, version: str, resource: str) -> Iterable[tuple[EquivalentResource, str]]: ...

    async def convert(self, obj: dict[str, Any], group: str, version: str, kind: str) -> dict[str, Any]: ...


#: (group, version, resource, kind) a policy's rules matched through an equivalent version.
Matched = tuple[str, str, str, str]


class ConfigurationError(Exception):
    pass


@dataclass
class _Binding:
    name: str
    actions: tuple[str, ...]
    match: MatchResources | None
    param_ref: dict[str, Any] | None


@dataclass
class _Hook:
    policy: CompiledPolicy
    bindings: list[_Binding] = field(default_factory=list)


@dataclass
class _Denial:
    policy: str
    binding: str
    decision: Decision


def reason_code(reason: str) -> int:
    """kube's ``reasonToCode``: the HTTP code of a validation's reason (422 for anything else)."""
    return _CODES.get(reason, 422)


def param_kind_text(pk: dict[str, str]) -> str:
    """Go's ``%v`` of a ``*ParamKind`` (its generated String())."""
    return f"&ParamKind{{APIVersion:{pk['apiVersion']},Kind:{pk['kind']},}}"


def gvk_text(pk: dict[str, str]) -> str:
    """Go's ``%v`` of a GroupVersionKind: ``group/version, Kind=Kind`` (``/version`` dropped for core)."""
    api_version = pk["apiVersion"] if "/" in pk["apiVersion"] else "/" + pk["apiVersion"]
    return f"{api_version}, Kind={pk['kind']}"


class ValidatingAdmissionPolicyPlugin:
    """kube's ``ValidatingAdmissionPolicy`` admission plugin, as a ``ValidatingPlugin``."""

    def __init__(self, source: PolicySource, authorizer: Authorizer | None = None,
                 equivalents: Equivalents | None = None) -> None:
        self.source = source
        self.authorizer = authorizer
        self.equivalents = equivalents
        self._compiled: dict[str, CompiledPolicy] = {}
        self._hooks: list[_Hook] = []
        self._revision: Any = None

    def handles(self, operation: str) -> bool:
        return operation in (adm.CREATE, adm.UPDATE, adm.DELETE, adm.CONNECT)

    # -- the index ------------------------------------------------------------------------------
    def hooks(self) -> list[_Hook]:
        revision = self.source.revision()
        if revision != self._revision or self._revision is None:
            self._hooks = self._build()
            self._revision = revision
        return self._hooks

    def _compile(self, policy: dict[str, Any]) -> CompiledPolicy:
        meta = policy.get("metadata") or {}
        name = str(meta.get("name") or "")
        cached = self._compiled.get(name)
        if cached is None or cached.uid != meta.get("uid") or cached.generation != int(meta.get("generation") or 0):
            cached = self._compiled[name] = CompiledPolicy.compile(policy)
        return cached

    def _build(self) -> list[_Hook]:
        by_policy: dict[str, list[_Binding]] = {}
        for b in self.source.bindings():
            spec = b.get("spec") or {}
            name = str((b.get("metadata") or {}).get("name") or "")
            mr = spec.get("matchResources")
            ref = spec.get("paramRef")
            by_policy.setdefault(str(spec.get("policyName") or ""), []).append(_Binding(
                name, tuple(str(a) for a in spec.get("validationActions") or ()),
                MatchResources.parse(mr) if isinstance(mr, dict) else None, ref if isinstance(ref, dict) else None))
        hooks = []
        live = set()
        for policy in self.source.policies():
            compiled = self._compile(policy)
            live.add(compiled.name)
            bindings = by_policy.get(compiled.name)
            if bindings:
                hooks.append(_Hook(compiled, sorted(bindings, key=lambda x: x.name)))
        for gone in set(self._compiled) - live:
            del self._compiled[gone]
        return sorted(hooks, key=lambda h: h.policy.name)

    # -- one request ----------------------------------------------------------------------------
    async def validate(self, attrs: adm.Attributes) -> None:
        if (attrs.group, attrs.resource) in EXCLUDED:
            return
        hooks = self.hooks()
        if not hooks:
            return
        denials: list[_Denial] = []
        request: dict[str, Any] | None = None
        versioned: dict[Matched, adm.Attributes] = {}
        known: list[list[Matched] | None] = []

        def others() -> list[Matched] | None:  # asked for only when a rule does not name the request's resource
            if not known:
                known.append(self._others(attrs))
            return known[0]

        for hook in hooks:
            policy = hook.policy
            try:
                covered, matched = policy.match.match(attrs, self.source.namespace, others)
                if not covered:
                    continue
            except MatchError as e:
                self._config_error(denials, policy, None, str(e))
                continue
            if policy.param_kind is not None and self.source.param_store(
                    policy.param_kind["apiVersion"], policy.param_kind["kind"]) is None:
                self._config_error(denials, policy, None, "failed to find resource referenced by paramKind: "
                                   f"'{gvk_text(policy.param_kind)}'")
                continue
            if request is None and "request" in policy.reads:
                # CEL is loaded by the time a policy is compiled and matched (not at start-up)
                from genericapi.apimachinery.cel.admission import admission_request

                request = admission_request(attrs)
            annotations: dict[str, list[str]] = {}
            for binding in hook.bindings:
                try:
                    if binding.match is not None and not binding.match.matches(attrs, self.source.namespace, others):
                        continue
                except MatchError as e:
                    self._config_error(denials, policy, binding.name, str(e))
                    continue
                try:
                    params = await self._params(policy, binding, attrs.namespace)
                except ConfigurationError as e:
                    self._config_error(denials, policy, binding.name, str(e))
                    continue
                if not params:
                    continue  # kube converts (and evaluates) only when there is a param to evaluate with
                try:
                    seen = await self._versioned(attrs, matched, versioned)
                except Exception as e:  # kube: any conversion failure is a configuration error
                    self._config_error(denials, policy, binding.name, f"failed to convert object version: {e}")
                    continue
                self._evaluate(attrs, seen, request if request is not None else {}, policy, binding, params,
                               denials, annotations)
            for key, values in annotations.items():
                attrs.add_annotation(f"{policy.name}/{key}", ", ".join(values))
        if denials:
            raise self._denied(attrs, denials[0])

    def _others(self, attrs: adm.Attributes) -> list[Matched] | None:
        """The request's equivalent resources but its own (kube's ``EquivalentResourcesFor``); None
        when not known (no equivalents, or a resource no store serves): any version of the same
        group and resource is then taken as equivalent."""
        if self.equivalents is None:
            return None
        found = list(self.equivalents.equivalents(attrs.group, attrs.version, attrs.resource))
        if not found:
            return None
        own = (attrs.group, attrs.version, attrs.resource)
        return [(r.group, r.version, r.resource, kind) for r, kind in found
                if (r.group, r.version, r.resource) != own]

    async def _versioned(self, attrs: adm.Attributes, matched: Matched | None,
                         cache: dict[Matched, adm.Attributes]) -> tuple[adm.Attributes, Matched | None]:
        """The record the policy's CEL sees: the objects converted to the matched version
        (kube's ``NewVersionedAttributes``), once per version per request; a Scale view as is."""
        if matched is None or self.equivalents is None:
            return attrs, None
        if attrs.kind_group is not None:  # a view (Scale) is one kind at every version
            return attrs, matched
        found = cache.get(matched)
        if found is None:
            group, version, _resource, kind = matched
            convert = self.equivalents.convert
            obj = await convert(attrs.obj, group, version, kind) if attrs.obj is not None else None
            old = await convert(attrs.old_obj, group, version, kind) if attrs.old_obj is not None else None
            found = cache[matched] = replace(attrs, obj=obj, old_obj=old)
        return found, matched

    @staticmethod
    def _request(attrs: adm.Attributes, request: dict[str, Any], matched: Matched | None) -> dict[str, Any]:
        """``request`` with ``kind`` / ``resource`` the matched ones (``requestKind`` /
        ``requestResource`` stay what the request addressed)."""
        if matched is None:
            return request
        group, version, resource, kind = matched
        out = dict(request)
        out["resource"] = {"group": group, "version": version, "resource": resource}
        if attrs.kind_group is None:
            out["kind"] = {"group": group, "version": version, "kind": kind}
        return out

    def _namespace(self, attrs: adm.Attributes) -> dict[str, Any] | None:
        name = attrs.namespace
        if attrs.group == "" and attrs.kind == "Namespace" and attrs.version == "v1":
            name = ""  # kube unsets it for a Namespace request
        from genericapi.apimachinery.cel.admission import namespace_object  # loaded with the policy

        return namespace_object(self.source.namespace(name)) if name else None

    def _evaluate(self, attrs: adm.Attributes, seen: tuple[adm.Attributes, Matched | None], request: dict[str, Any],
                  policy: CompiledPolicy, binding: _Binding, params: list[dict[str, Any] | None],
                  denials: list[_Denial], annotations: dict[str, list[str]]) -> None:
        from genericapi.apimachinery.cel.admission import Activation  # loaded with the policy

        # built only for a policy that reads them (``request`` is then the request's, else unused)
        namespace = self._namespace(attrs) if "namespaceObject" in policy.reads else None
        versioned, matched = seen
        if "request" in policy.reads:
            request = self._request(attrs, request, matched)
        for param in params:
            activation = Activation(versioned, request, param, namespace, self.authorizer)
            decisions, audit = policy.validate(activation)
            for i, decision in enumerate(decisions):
                if decision.action != DENY:
                    continue
                for action in binding.actions:
                    if action == "Deny":
                        denials.append(_Denial(policy.name, binding.name, decision))
                    elif action == "Warn":
                        text = (f"Validation failed for ValidatingAdmissionPolicy '{policy.name}' with binding "
                                f"'{binding.name}': {decision.message}")
                        if text not in attrs.warnings:
                            attrs.warnings.append(text)
                    elif action == "Audit":
                        value = orjson.dumps([{"message": decision.message, "policy": policy.name,
                                               "binding": binding.name, "expressionIndex": i,
                                               "validationActions": list(binding.actions)}]).decode()
                        attrs.add_annotation(FAILURE_ANNOTATION, value)
            for a in audit:
                if a.error:
                    if a.hard or policy.failure_policy != IGNORE:
                        denials.append(_Denial(policy.name, binding.name, Decision(DENY, a.error, error=True)))
                    continue
                values = annotations.setdefault(a.key, [])
                value = a.value[:MAX_AUDIT_VALUE]
                if value not in values:
                    values.append(value)

    def _config_error(self, denials: list[_Denial], policy: CompiledPolicy, binding: str | None, err: str) -> None:
        if policy.failure_policy == IGNORE:
            return
        what = "policy" if binding is None else "binding"
        denials.append(_Denial(policy.name, binding or "", Decision(DENY, f"failed to configure {what}: {err}")))

    async def _params(self, policy: CompiledPolicy, binding: _Binding, namespace: str) -> list[dict[str, Any] | None]:
        """kube's ``CollectParams``."""
        pk, ref = policy.param_kind, binding.param_ref
        if pk is None or ref is None:
            return [None]
        store = self.source.param_store(pk["apiVersion"], pk["kind"])
        if store is None:
            raise ConfigurationError(f"failed to find resource referenced by paramKind: '{gvk_text(pk)}'")
        params_ns = ""
        if store.namespaced:
            params_ns = str(ref.get("namespace") or "") or namespace
            if not params_ns:
                raise ConfigurationError(
                    "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
        if not await store.wait_synced(1.0):
            raise ConfigurationError(f"paramKind kind `{param_kind_text(pk)}` not yet synced to use for admission")
        if ref.get("namespace") and not store.namespaced:
            raise ConfigurationError("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
        found: list[dict[str, Any] | None]
        if ref.get("name"):
            if ref.get("selector") is not None:
                raise ConfigurationError("paramRef.name and paramRef.selector are mutually exclusive")
            obj = store.get(params_ns, str(ref["name"]))
            found = [obj] if obj is not None else []
        elif ref.get("selector") is not None:
            try:
                selector = from_label_selector_object(ref["selector"])
            except (LabelSelectorError, ValueError) as e:
                raise ConfigurationError(str(e)) from None
            found = [o for o in store.list(params_ns)
                     if selector.matches(((o.get("metadata") or {}).get("labels")) or {})]
            found.sort(key=lambda o: (str(((o or {}).get("metadata") or {}).get("namespace") or ""),
                                      str(((o or {}).get("metadata") or {}).get("name") or "")))
        else:
            raise ConfigurationError("one of name or selector must be provided")
        if not found and ref.get("parameterNotFoundAction") == "Deny":
            raise ConfigurationError("no params found for policy binding with `Deny` parameterNotFoundAction")
        return found

    @staticmethod
    def _denied(attrs: adm.Attributes, denial: _Denial) -> APIError:
        if denial.binding:
            message = (f"ValidatingAdmissionPolicy '{denial.policy}' with binding '{denial.binding}' denied request: "
                       f"{denial.decision.message}")
        else:
            message = f"ValidatingAdmissionPolicy '{denial.policy}' denied request: {denial.decision.message}"
        name = attrs.name or str(((attrs.obj or {}).get("metadata") or {}).get("name") or "")
        resource = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
        text = f'{resource} "{name}" is forbidden: {message}' if name else f"{resource} is forbidden: {message}"
        details: dict[str, Any] = {}
        if name:
            details["name"] = name
        if attrs.group:
            details["group"] = attrs.group
        details["kind"] = attrs.resource
        details["causes"] = [{"message": message}]
        reason = denial.decision.reason or "Invalid"
        return APIError(reason_code(reason), reason, text, details)
