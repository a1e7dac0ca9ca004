"""MutatingAdmissionWebhook and ValidatingAdmissionWebhook, as kube-apiserver 1.33 runs them.

Each plugin reads its configurations from a ``WebhookSource`` (a watch cache; never etcd per
request) and, for every write the chain gives it, decides per webhook whether to call it (kube's
``ShouldCallHook``: namespaceSelector, objectSelector, rules, matchPolicy Equivalent,
matchConditions), then calls it:

- mutating webhooks one after the other in configuration-name order; a JSONPatch answer is
  applied to the object (at the version the webhook registered for) and the strategy validates
  the result later; ``reinvocationPolicy: IfNeeded`` webhooks run again when a later webhook
  changed the object (the chain's second round);
- validating webhooks all at once; the first refusal wins.

A refusal is kube's ``admission webhook "x" denied the request: ...``; a webhook that cannot be
called (or answers nonsense) fails the write with kube's 500 ``failed calling webhook "x": ...``
under ``failurePolicy: Fail`` and is skipped under ``Ignore``. Warnings and audit annotations a
webhook returns go into the admission record, with kube's own audit annotations (``webhookaudit``):
every mutating call's ``mutation.webhook.admission.k8s.io/round_<r>_index_<i>`` (configuration,
webhook, mutated), an applied JSONPatch's ``patch.webhook.admission.k8s.io/round_<r>_index_<i>`` at
audit level Request, and a skipped failure's ``failed-open.mutation.webhook.admission.k8s.io/...``
or ``failed-open.validating.webhook.admission.k8s.io/...``.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import jsonpatch
import orjson

from genericapi.apimachinery import admission as adm
from genericapi.apimachinery import deepjson
from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.admission import Attributes
from genericapi.apimachinery.authorization import Authorizer
from genericapi.apimachinery.errors import APIError
from genericapi.registry.admissionchain import reinvocation
from genericapi.registry.store import Store

from . import rules, webhookaudit
from .client import CallError, decode_review
from .review import InvalidResponse, Invocation, build_review, denial, dry_run_unsupported, verify_response
from .source import Hook, WebhookSource

log = logging.getLogger(__name__)

MUTATING_PLUGIN = "MutatingAdmissionWebhook"
MUTATION_ANNOTATION = webhookaudit.MUTATION_PREFIX
FAILED_OPEN_MUTATING = webhookaudit.FAILED_OPEN_MUTATING_PREFIX
FAILED_OPEN_VALIDATING = "failed-open.validating.webhook.admission.k8s.io/"
VALIDATING_PLUGIN = "ValidatingAdmissionWebhook"


class Equivalents(Protocol):
    """The other served versions of a resource, and conversion between them (matchPolicy Equivalent)."""

    def equivalents(self, group: str, version: str, resource: str) -> list[tuple[rules.Resource, str]]:
        """Every (group/version/resource, kind) stored as the same resource, the request's first."""
        ...

    async def convert(self, obj: dict[str, Any], group: str, version: str, kind: str) -> dict[str, Any]:
        """``obj`` at another of those versions."""
        ...


class CallFailed(Exception):
    """kube's ``ErrCallingWebhook``: subject to the failure policy."""

    def __init__(self, webhook: str, reason: str) -> None:
        super().__init__(f'failed calling webhook "{webhook}": {reason}')


@dataclass
class _Versioned:
    """The record at the version a webhook registered for (kube's ``VersionedAttributes``)."""

    attrs: Attributes
    invocation: Invocation


#: A namespace's labels by name (raises APIError 404 when it does not exist).
NamespaceLabels = Callable[[str], Awaitable[dict[str, str]]]


def namespace_labels_from(namespaces: Store) -> NamespaceLabels:
    """Labels from the Namespaces watch cache, else read through (a namespace created a moment ago)."""

    async def labels(name: str) -> dict[str, str]:
        cached = namespaces.cache.get(namespaces.key("", name)) if namespaces.cache.ready else None
        obj = cached.obj if cached is not None else await namespaces.get("", name)
        return rules.object_labels(obj) or {}

    return labels


class _WebhookPlugin:
    mutating = False

    def __init__(self, source: WebhookSource, namespace_labels: NamespaceLabels,
                 equivalents: Equivalents | None = None, authorizer: Authorizer | None = None) -> None:
        self.source = source
        self.namespace_labels = namespace_labels
        self.equivalents = equivalents
        self.authorizer = authorizer

    def handles(self, operation: str) -> bool:
        return operation in (adm.CREATE, adm.UPDATE, adm.DELETE, adm.CONNECT)

    async def _namespace_matches(self, hook: Hook, attrs: Attributes) -> tuple[bool, APIError | None]:
        """kube's ``MatchNamespaceSelector``: (matches, an error to report if a rule matches)."""
        if not rules.namespace_selector_applies(attrs):
            return True, None
        if hook.selector_error:
            return False, apierrors.internal_error(hook.selector_error)
        if rules.is_empty(hook.namespace_selector):
            return True, None
        labels = rules.own_namespace_labels(attrs)
        if labels is None:
            try:
                labels = await self.namespace_labels(rules.scope_namespace(attrs))
            except APIError as err:
                return False, err if err.code == 404 else apierrors.internal_error(err.message)
        return hook.namespace_selector.matches(labels), None

    async def _invocation(self, hook: Hook, attrs: Attributes) -> Invocation | None:
        """kube's ``ShouldCallHook``: what to call the webhook with, or None to skip it."""
        ns_match, ns_err = await self._namespace_matches(hook, attrs)
        if not ns_match and ns_err is None:
            return None
        obj_match = not hook.selector_error and rules.object_selector_matches(hook.object_selector, attrs)
        obj_err = apierrors.internal_error(hook.selector_error) if hook.selector_error else None
        if not obj_match and obj_err is None:
            return None
        found: tuple[rules.Resource, str] | None = None
        for rule in hook.rules:
            if rules.rule_matches(rule, attrs):
                found = (rules.request_resource(attrs), attrs.kind)
                break
        if found is None and hook.match_policy == "Equivalent" and self.equivalents is not None:
            others = [e for e in self.equivalents.equivalents(attrs.group, attrs.version, attrs.resource)
                      if e[0] != rules.request_resource(attrs)]
            found = next(((res, kind) for rule in hook.rules for res, kind in others
                          if rules.rule_matches(rule, attrs, res)), None)
        if found is None:
            return None
        if ns_err is not None:
            raise ns_err
        if obj_err is not None:
            raise obj_err
        res, kind = found
        inv = Invocation(res.group, res.version, res.resource, kind, attrs.obj, attrs.old_obj)
        if hook.match_conditions:
            # CEL is loaded by the time a hook's conditions are compiled (not at start-up)
            from genericapi.apimachinery.cel.admission import Activation, admission_request

            versioned = await self._versioned(attrs, inv)
            result = hook.match_conditions.match(Activation(versioned.attrs, admission_request(versioned.attrs),
                                                            authorizer=self.authorizer,
                                                            paths=hook.match_conditions.paths))
            if result.error:
                raise APIError(500, "Invalid", result.error)
            if not result.matches:
                return None
        return inv

    async def _versioned(self, attrs: Attributes, inv: Invocation) -> _Versioned:
        """The objects converted to the version the webhook registered for (when it differs)."""
        if (inv.group, inv.version) == (attrs.group, attrs.version) or self.equivalents is None \
                or attrs.kind_group is not None:  # a view (Scale) is one kind at every version
            return _Versioned(attrs, inv)
        convert = self.equivalents.convert
        obj = await convert(attrs.obj, inv.group, inv.version, inv.kind) if attrs.obj is not None else None
        old = await convert(attrs.old_obj, inv.group, inv.version, inv.kind) if attrs.old_obj is not None else None
        inv = replace(inv, obj=obj, old_obj=old)
        # The record keeps what the request addressed (requestKind, requestResource); the
        # invocation says what the webhook registered for (kind, resource).
        return _Versioned(replace(attrs, obj=obj, old_obj=old), inv)

    async def _call(self, hook: Hook, attrs: Attributes, inv: Invocation) -> Any:
        """POST the review; the verified verdict (raises CallFailed, or APIError for a refusal)."""
        if attrs.dry_run and hook.side_effects not in ("None", "NoneOnDryRun"):
            raise dry_run_unsupported(hook.name)
        if not hook.review_version:
            raise CallFailed(hook.name, "could not create admission objects: webhook does not accept known "
                                        "AdmissionReview versions")
        uid, body = build_review(attrs, inv, hook.review_version)
        try:
            raw = await hook.client.post(body, hook.timeout)
            doc = decode_review(raw)
        except CallError as err:
            raise CallFailed(hook.name, f"failed to call webhook: {err}") from None
        try:
            verdict = verify_response(uid, hook.review_version, self.mutating, doc)
        except InvalidResponse as err:
            raise CallFailed(hook.name, f"received invalid webhook response: {err}") from None
        for key, value in verdict.audit_annotations.items():
            attrs.add_annotation(f"{hook.name}/{key}", value)
        attrs.warnings.extend(verdict.warnings)
        if not verdict.allowed:
            raise denial(hook.name, verdict.status)
        return verdict


class MutatingWebhook(_WebhookPlugin):
    """kube's MutatingAdmissionWebhook plugin (a MutatingPlugin)."""

    mutating = True
    reinvocable = True

    async def admit(self, attrs: Attributes) -> None:
        if rules.exempt(attrs):
            return
        hooks = self.source.hooks()
        if not hooks:
            return
        state = reinvocation.get()
        ctx: _ReinvokeState = state.values.setdefault(MUTATING_PLUGIN, _ReinvokeState()) if state is not None \
            else _ReinvokeState()
        reinvoking = state is not None and state.is_reinvoke
        if reinvoking and ctx.last_output != attrs.obj:
            ctx.require_reinvoking()  # a plugin after the webhooks changed the object
        round_ = 1 if reinvoking else 0
        try:
            for index, hook in enumerate(hooks):
                inv = await self._invocation(hook, attrs)
                if inv is None or (reinvoking and hook.uid not in ctx.reinvoke):
                    continue
                suffix = f"round_{round_}_index_{index}"  # kube's webhookAnnotator keys
                changed = False
                try:
                    changed = await self._mutate(hook, attrs, inv, suffix)
                except CallFailed as err:
                    if hook.failure_policy == "Ignore":
                        log.warning("Failed calling webhook, failing open %s: %s", hook.name, err)
                        attrs.add_annotation(f"{FAILED_OPEN_MUTATING}{suffix}", hook.name)
                        if hook.reinvoke:
                            ctx.previously_invoked.add(hook.uid)
                        continue
                    raise apierrors.internal_error(str(err)) from None
                finally:
                    # kube annotates every call it makes, refused or failed too (mutated: false)
                    attrs.add_annotation(f"{MUTATION_ANNOTATION}{suffix}",
                                         webhookaudit.mutation_value(hook.configuration, hook.name, changed))
                if changed:
                    ctx.require_reinvoking()
                    if state is not None:
                        state.should_reinvoke = True
                if hook.reinvoke:
                    ctx.previously_invoked.add(hook.uid)
        finally:
            ctx.last_output = copy.deepcopy(attrs.obj)

    async def _mutate(self, hook: Hook, attrs: Attributes, inv: Invocation, suffix: str) -> bool:
        versioned = await self._versioned(attrs, inv)
        verdict = await self._call(hook, versioned.attrs, versioned.invocation)
        if not verdict.patch:
            return False
        try:
            ops = deepjson.loads(verdict.patch)
            if not isinstance(ops, list):
                raise ValueError("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        except (orjson.JSONDecodeError, ValueError) as err:
            raise CallFailed(hook.name, f"received undecodable patch in webhook response: {err}") from None
        if not ops:
            return False
        current = versioned.invocation.obj
        if current is None:
            raise apierrors.internal_error(f'admission webhook "{hook.name}" attempted to modify the object, '
                                           "which is not supported for this operation")
        try:
            patched = jsonpatch.JsonPatch(ops).apply(current)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError,
                ValueError) as err:
            raise apierrors.internal_error(str(err)) from None
        if not isinstance(patched, dict):
            raise apierrors.internal_error("json: cannot unmarshal array into Go value of type map[string]interface {}")
        changed = patched != current
        # kube's addPatchAnnotation: every applied patch (changed or not), at audit level Request
        webhookaudit.record(attrs, f"{webhookaudit.PATCH_PREFIX}{suffix}",
                           webhookaudit.patch_value(hook.configuration, hook.name, verdict.patch),
                           webhookaudit.LEVEL_REQUEST)
        if (inv.group, inv.version) != (attrs.group, attrs.version) and self.equivalents is not None \
                and attrs.kind_group is None:
            patched = await self.equivalents.convert(patched, attrs.group, attrs.version, attrs.kind)
        _check_identity(attrs, patched)
        attrs.obj = patched
        return changed


def _check_identity(attrs: Attributes, patched: dict[str, Any]) -> None:
    """What kube's handlers check after admission: the namespace may not move; an update's name
    is immutable."""
    meta = patched.get("metadata") if isinstance(patched.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    namespace = meta.get("namespace")
    if attrs.namespace and namespace and namespace != attrs.namespace:
        raise apierrors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                    "the request")
    if attrs.operation == adm.UPDATE and attrs.name and meta.get("name") != attrs.name:
        raise apierrors.invalid_object(attrs.group, attrs.kind, attrs.name, [
            apierrors.invalid("metadata.name", meta.get("name"), "field is immutable")])


class _ReinvokeState:
    """kube's ``webhookReinvokeContext``."""

    def __init__(self) -> None:
        self.last_output: dict[str, Any] | None = None
        self.previously_invoked: set[str] = set()
        self.reinvoke: set[str] = set()

    def require_reinvoking(self) -> None:
        self.reinvoke |= self.previously_invoked
        self.previously_invoked = set()


class ValidatingWebhook(_WebhookPlugin):
    """kube's ValidatingAdmissionWebhook plugin (a ValidatingPlugin): webhooks called in parallel."""

    async def validate(self, attrs: Attributes) -> None:
        if rules.exempt(attrs):
            return
        hooks = self.source.hooks()
        if not hooks:
            return
        calls: list[tuple[Hook, Invocation]] = []
        for hook in hooks:
            inv = await self._invocation(hook, attrs)
            if inv is not None:
                calls.append((hook, inv))
        if not calls:
            return
        results = await asyncio.gather(*(self._one(hook, attrs, inv) for hook, inv in calls),
                                       return_exceptions=True)
        for index, ((hook, _inv), result) in enumerate(zip(calls, results, strict=True)):
            if isinstance(result, CallFailed):
                if hook.failure_policy == "Ignore":
                    log.warning("Failed calling webhook, failing open %s: %s", hook.name, result)
                    # the index among the webhooks this request matched, as kube's dispatcher counts
                    attrs.add_annotation(f"{FAILED_OPEN_VALIDATING}round_0_index_{index}", hook.name)
                    continue
                raise apierrors.internal_error(str(result))
            if isinstance(result, BaseException):
                raise result

    async def _one(self, hook: Hook, attrs: Attributes, inv: Invocation) -> None:
        versioned = await self._versioned(attrs, inv)
        # Each webhook adds to its own copy of the lists; they are merged in order after.
        record = replace(versioned.attrs, warnings=[], annotations={})
        try:
            await self._call(hook, record, versioned.invocation)
        finally:
            attrs.warnings.extend(record.warnings)
            for key, value in record.annotations.items():
                attrs.add_annotation(key, value)
