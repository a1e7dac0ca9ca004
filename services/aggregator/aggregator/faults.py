"""Fault rules at the gateway: which requests get which injected failure (issue 16).

Controllers and clients must survive throttling, conflicts, server errors, expired and dropped
watches and slow answers; a real API server produces those rarely and never on demand. The
gateway is the one place every client request enters, so it can inject them there: a rule matches
requests by Kubernetes verb (kube's ``RequestInfo``), API group, resource/subresource, namespace,
name, user and group, fires at a rate (probability, the first N matches, every Nth match) and has
one effect (a 429/500/503/409 Status, a watch that expires or is cut short, added latency).

This module is the model: parsing and validating rules from JSON (400 naming the bad field),
matching, rates, counters, and the plan for one request. It has no HTTP types; ``faults_http``
serves the admin path and applies a plan to an ASGI request. Rules live in this process only:
each gateway replica has its own set (``kubechain_cli.faults`` posts to every gateway given).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.errors import APIError, FieldError
from genericapi.apimachinery.requestinfo import RequestInfo
from genericapi.apimachinery.user import UserInfo
from prometheus_client import Counter

__all__ = ["EFFECTS", "VERBS", "Effect", "FaultInjector", "FaultPlan", "FaultRule", "Match", "Rate",
           "parse_rules"]

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
#: Effects that answer the request instead of forwarding it.
ANSWERS = ("TooManyRequests", "InternalError", "ServiceUnavailable", "Conflict", "WatchExpired")
EFFECTS = (*ANSWERS, "WatchClose", "Latency")
#: Effects that only make sense on a watch (the rule matches watch requests only).
WATCH_EFFECTS = frozenset({"WatchExpired", "WatchClose"})
#: Longest latency a rule may add (a typo of 5000 for 5 would hold requests for hours).
MAX_LATENCY_SECONDS = 600.0
MAX_NAME_LENGTH = 253

#: Parameters each effect type takes (besides ``type``).
EFFECT_FIELDS: dict[str, frozenset[str]] = {
    "TooManyRequests": frozenset({"retryAfterSeconds", "message"}),
    "InternalError": frozenset({"message"}),
    "ServiceUnavailable": frozenset({"message"}),
    "Conflict": frozenset(),
    "WatchExpired": frozenset(),
    "WatchClose": frozenset({"afterEvents", "afterSeconds"}),
    "Latency": frozenset({"seconds", "minSeconds", "maxSeconds"}),
}
RULE_FIELDS = frozenset({"name", "verbs", "apiGroups", "resources", "resourceNames", "namespaces", "users",
                         "groups", "probability", "firstN", "everyNth", "effect"})

INJECTED = Counter(
    "kubechain_injected_faults_total",
    "Faults injected by the gateway's fault rules, by effect and the request's verb, group, resource and "
    "subresource.",
    ["effect", "verb", "group", "resource", "subresource"],
)


@dataclass(frozen=True)
class Match:
    """What a rule applies to; an empty tuple matches anything, ``*`` in verbs, apiGroups and
    resources too. Resources follow RBAC: ``pods`` is the resource only, ``pods/status`` its
    subresource, ``*/status`` that subresource of any resource, ``*`` everything."""

    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()

    def matches(self, info: RequestInfo, user: UserInfo) -> bool:
        if not info.is_resource_request:
            return False
        if self.verbs and "*" not in self.verbs and info.verb not in self.verbs:
            return False
        if self.api_groups and "*" not in self.api_groups and info.api_group not in self.api_groups:
            return False
        if self.resources and not _resource_matches(self.resources, info.resource, info.subresource):
            return False
        if self.resource_names and info.name not in self.resource_names:
            return False
        if self.namespaces and info.namespace not in self.namespaces:
            return False
        if self.users and user.name not in self.users:
            return False
        return not self.groups or any(g in self.groups for g in user.groups)


def _resource_matches(patterns: Iterable[str], resource: str, subresource: str) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    for pattern in patterns:
        if pattern in ("*", combined):
            return True
        if subresource and pattern == f"*/{subresource}":
            return True
    return False


@dataclass(frozen=True)
class Rate:
    """When a matching request gets the effect: all of the set conditions must hold."""

    probability: float = 1.0
    #: Only the first N matching requests (0: no limit).
    first_n: int = 0
    #: Only the Nth, 2Nth, ... matching request (0: each).
    every_nth: int = 0

    def fires(self, count: int, draw: Callable[[], float]) -> bool:
        """Whether the ``count``-th matching request (1-based) gets the effect."""
        if self.first_n and count > self.first_n:
            return False
        if self.every_nth and count % self.every_nth:
            return False
        return self.probability >= 1.0 or draw() < self.probability


@dataclass(frozen=True)
class Effect:
    type: str
    retry_after_seconds: int = 1
    message: str = ""
    after_events: int = 0
    after_seconds: float = 0.0
    min_seconds: float = 0.0
    max_seconds: float = 0.0

    def latency(self, draw: Callable[[float, float], float]) -> float:
        if self.min_seconds == self.max_seconds:
            return self.min_seconds
        return draw(self.min_seconds, self.max_seconds)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.type == "TooManyRequests":
            out["retryAfterSeconds"] = self.retry_after_seconds
        if self.message:
            out["message"] = self.message
        if self.after_events:
            out["afterEvents"] = self.after_events
        if self.after_seconds:
            out["afterSeconds"] = self.after_seconds
        if self.type == "Latency":
            if self.min_seconds == self.max_seconds:
                out["seconds"] = self.min_seconds
            else:
                out["minSeconds"], out["maxSeconds"] = self.min_seconds, self.max_seconds
        return out


@dataclass
class FaultRule:
    name: str
    match: Match
    rate: Rate
    effect: Effect
    #: Requests that matched (verb, resource, ... and user) so far; the rate counts these.
    matched: int = 0
    #: Requests that got the effect.
    injected: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        m = self.match
        for key, values in (("verbs", m.verbs), ("apiGroups", m.api_groups), ("resources", m.resources),
                            ("resourceNames", m.resource_names), ("namespaces", m.namespaces),
                            ("users", m.users), ("groups", m.groups)):
            if values:
                out[key] = list(values)
        out["probability"] = self.rate.probability
        if self.rate.first_n:
            out["firstN"] = self.rate.first_n
        if self.rate.every_nth:
            out["everyNth"] = self.rate.every_nth
        out["effect"] = self.effect.to_dict()
        out["status"] = {"matched": self.matched, "injected": self.injected}
        return out


# -- parsing and validation --------------------------------------------------------------------
def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


class _Validator:
    """Collects every field error of one request body, with paths relative to ``prefix``."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def strings(self, obj: Mapping[str, Any], key: str, path: str,
                allowed: tuple[str, ...] | None = None) -> tuple[str, ...]:
        value = obj.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            self.errors.append(apierrors.type_invalid(path, value, "must be a list of strings"))
            return ()
        out: list[str] = []
        for i, item in enumerate(value):
            item_path = f"{path}[{i}]"
            if not isinstance(item, str):
                self.errors.append(apierrors.type_invalid(item_path, item, "must be a string"))
            elif allowed is not None and item not in allowed:
                self.errors.append(apierrors.not_supported(item_path, item, allowed))
            else:
                out.append(item)
        return tuple(out)

    def resources(self, obj: Mapping[str, Any], path: str) -> tuple[str, ...]:
        values = self.strings(obj, "resources", path)
        for i, text in enumerate(values):
            pieces = text.split("/")
            if len(pieces) > 2 or not all(pieces):
                self.errors.append(apierrors.invalid(
                    f"{path}[{i}]", text, "must be <resource>, <resource>/<subresource>, */<subresource> or *"))
        return values

    def positive_int(self, obj: Mapping[str, Any], key: str, path: str, default: int = 0) -> int:
        value = obj.get(key)
        if value is None:
            return default
        if not _is_int(value):
            self.errors.append(apierrors.type_invalid(path, value, "must be an integer"))
            return default
        if value < 1:
            self.errors.append(apierrors.invalid(path, value, "must be greater than or equal to 1"))
            return default
        return int(value)

    def seconds(self, obj: Mapping[str, Any], key: str, path: str, *, positive: bool = False) -> float | None:
        value = obj.get(key)
        if value is None:
            return None
        if not _is_number(value):
            self.errors.append(apierrors.type_invalid(path, value, "must be a number of seconds"))
            return None
        if value < 0 or (positive and value == 0):
            detail = "must be greater than 0" if positive else "must be greater than or equal to 0"
            self.errors.append(apierrors.invalid(path, value, detail))
            return None
        if value > MAX_LATENCY_SECONDS:
            self.errors.append(apierrors.invalid(path, value,
                                                 f"must be less than or equal to {MAX_LATENCY_SECONDS:g}"))
            return None
        return float(value)

    def unknown(self, obj: Mapping[str, Any], known: frozenset[str], prefix: str) -> None:
        for key in obj:
            if key not in known:
                self.errors.append(apierrors.forbidden(f"{prefix}{key}", "unknown field"))


def _parse_effect(v: _Validator, value: Any, path: str) -> Effect | None:
    if value is None:
        v.errors.append(apierrors.required(path, ""))
        return None
    if not isinstance(value, dict):
        v.errors.append(apierrors.type_invalid(path, value, "must be an object"))
        return None
    kind = value.get("type")
    if kind is None:
        v.errors.append(apierrors.required(f"{path}.type", ""))
        return None
    if kind not in EFFECTS:
        v.errors.append(apierrors.not_supported(f"{path}.type", kind, EFFECTS))
        return None
    before = len(v.errors)
    v.unknown(value, EFFECT_FIELDS[kind] | {"type"}, f"{path}.")
    message = value.get("message", "")
    if not isinstance(message, str):
        v.errors.append(apierrors.type_invalid(f"{path}.message", message, "must be a string"))
        message = ""
    effect = Effect(kind, message=message)
    if kind == "TooManyRequests":
        retry = v.positive_int(value, "retryAfterSeconds", f"{path}.retryAfterSeconds", default=1)
        effect = Effect(kind, retry_after_seconds=retry, message=message)
    elif kind == "WatchClose":
        events = v.positive_int(value, "afterEvents", f"{path}.afterEvents")
        after = v.seconds(value, "afterSeconds", f"{path}.afterSeconds", positive=True) or 0.0
        if "afterEvents" not in value and "afterSeconds" not in value:
            v.errors.append(apierrors.required(path, "afterEvents or afterSeconds (or both)"))
        effect = Effect(kind, after_events=events, after_seconds=after)
    elif kind == "Latency":
        fixed = v.seconds(value, "seconds", f"{path}.seconds")
        low = v.seconds(value, "minSeconds", f"{path}.minSeconds")
        high = v.seconds(value, "maxSeconds", f"{path}.maxSeconds")
        ranged = "minSeconds" in value or "maxSeconds" in value
        if "seconds" in value and ranged:
            v.errors.append(apierrors.forbidden(f"{path}.seconds", "may not be set with minSeconds/maxSeconds"))
        elif "seconds" not in value and not ranged:
            v.errors.append(apierrors.required(f"{path}.seconds", "or minSeconds and maxSeconds"))
        elif ranged and ("minSeconds" not in value or "maxSeconds" not in value):
            missing = "maxSeconds" if "minSeconds" in value else "minSeconds"
            v.errors.append(apierrors.required(f"{path}.{missing}", "minSeconds and maxSeconds go together"))
        elif ranged and low is not None and high is not None and low > high:
            v.errors.append(apierrors.invalid(f"{path}.maxSeconds", value["maxSeconds"],
                                              "must be greater than or equal to minSeconds"))
        if fixed is not None:
            effect = Effect(kind, min_seconds=fixed, max_seconds=fixed)
        elif low is not None and high is not None:
            effect = Effect(kind, min_seconds=low, max_seconds=high)
    return effect if len(v.errors) == before else None


def _parse_rule(v: _Validator, obj: Any, prefix: str) -> FaultRule | None:
    path = prefix.rstrip(".") or "<body>"
    if not isinstance(obj, dict):
        v.errors.append(apierrors.type_invalid(path, obj, "must be a fault rule object"))
        return None
    before = len(v.errors)
    v.unknown(obj, RULE_FIELDS, prefix)
    name = obj.get("name", "")
    if not isinstance(name, str):
        v.errors.append(apierrors.type_invalid(f"{prefix}name", name, "must be a string"))
        name = ""
    elif len(name) > MAX_NAME_LENGTH:
        v.errors.append(apierrors.too_long_value(f"{prefix}name", MAX_NAME_LENGTH))
    verbs = v.strings(obj, "verbs", f"{prefix}verbs", (*VERBS, "*"))
    match = Match(verbs, v.strings(obj, "apiGroups", f"{prefix}apiGroups"), v.resources(obj, f"{prefix}resources"),
                  v.strings(obj, "resourceNames", f"{prefix}resourceNames"),
                  v.strings(obj, "namespaces", f"{prefix}namespaces"), v.strings(obj, "users", f"{prefix}users"),
                  v.strings(obj, "groups", f"{prefix}groups"))
    probability = obj.get("probability", 1.0)
    if not _is_number(probability):
        v.errors.append(apierrors.type_invalid(f"{prefix}probability", probability, "must be a number"))
        probability = 1.0
    elif not 0 <= probability <= 1:
        v.errors.append(apierrors.invalid(f"{prefix}probability", probability, "must be between 0 and 1, inclusive"))
    rate = Rate(float(probability), v.positive_int(obj, "firstN", f"{prefix}firstN"),
                v.positive_int(obj, "everyNth", f"{prefix}everyNth"))
    effect = _parse_effect(v, obj.get("effect"), f"{prefix}effect")
    if effect is not None and effect.type in WATCH_EFFECTS:
        others = [verb for verb in verbs if verb not in ("watch", "*")]
        if others:
            v.errors.append(apierrors.invalid(f"{prefix}verbs", list(verbs),
                                              f"effect {effect.type} applies to watch requests only"))
        match = dataclasses.replace(match, verbs=("watch",))
    if effect is None or len(v.errors) != before:
        return None
    return FaultRule(name, match, rate, effect)


def parse_rules(body: Any) -> list[FaultRule]:
    """Rules from a request body: one rule object, a JSON list of them, or ``{"rules": [...]}``.

    Raises a 400 BadRequest Status naming every bad field (``[1].effect.type: Unsupported value``).
    """
    prefix: str | None
    if isinstance(body, dict) and set(body) == {"rules"}:
        items, prefix = body["rules"], "rules"
        if not isinstance(items, list):
            raise _invalid([apierrors.type_invalid("rules", items, "must be a list of fault rules")])
    elif isinstance(body, list):
        items, prefix = body, ""
    else:
        items, prefix = [body], None
    v = _Validator()
    rules: list[FaultRule] = []
    for i, item in enumerate(items):
        rule = _parse_rule(v, item, "" if prefix is None else f"{prefix}[{i}].")
        if rule is not None:
            rules.append(rule)
    seen: set[str] = set()
    for i, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        if isinstance(name, str) and name:
            if name in seen:
                v.errors.append(apierrors.duplicate(("" if prefix is None else f"{prefix}[{i}].") + "name", name))
            seen.add(name)
    if v.errors:
        raise _invalid(v.errors)
    return rules


def _invalid(errs: list[FieldError]) -> APIError:
    messages = list(dict.fromkeys(str(e) for e in errs))
    text = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    causes = [{"reason": e.reason, "message": e.body(), "field": e.field} for e in errs]
    return APIError(400, "BadRequest", f"invalid fault rule: {text}", {"causes": causes})


# -- the rule set and the plan for one request -------------------------------------------------
@dataclass
class FaultPlan:
    """What the rules decided for one request: wait, then answer or forward (maybe cutting a watch)."""

    info: RequestInfo
    latency: float = 0.0
    #: The rule whose effect answers the request instead of the backend (429/500/503/409/410).
    answer: FaultRule | None = None
    #: A WatchClose effect for the forwarded watch.
    cut: Effect | None = None
    #: Every rule that fired (for metrics).
    fired: list[FaultRule] = field(default_factory=list)


class FaultInjector:
    """The gateway's rules, in order. Evaluation goes through them in order: every Latency rule
    that fires adds its delay, the first WatchClose that fires cuts the watch, and the first
    answering effect that fires ends the evaluation (later rules do not see the request)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rules: list[FaultRule] = []
        self._rng = rng or random.Random()
        self._names = itertools.count(1)

    def _name(self) -> str:
        taken = {r.name for r in self.rules}
        while True:
            name = f"fault-{next(self._names)}"
            if name not in taken:
                return name

    def add(self, rules: list[FaultRule]) -> list[FaultRule]:
        """Append rules; 409 AlreadyExists if a name is taken (nothing is added then)."""
        taken = {r.name for r in self.rules}
        for rule in rules:
            if rule.name in taken:
                raise APIError(409, "AlreadyExists", f'fault rule "{rule.name}" already exists',
                               {"name": rule.name, "kind": "faultrules"})
        for rule in rules:
            if not rule.name:
                rule.name = self._name()
            self.rules.append(rule)
        return rules

    def replace(self, rules: list[FaultRule]) -> list[FaultRule]:
        self.rules = []
        return self.add(rules)

    def get(self, name: str) -> FaultRule:
        for rule in self.rules:
            if rule.name == name:
                return rule
        raise _not_found(name)

    def remove(self, name: str) -> FaultRule:
        rule = self.get(name)
        self.rules.remove(rule)
        return rule

    def clear(self) -> list[FaultRule]:
        removed, self.rules = self.rules, []
        return removed

    def plan(self, info: RequestInfo, user: UserInfo) -> FaultPlan | None:
        """The faults for one request, counting matches and injections; None when none fires."""
        plan: FaultPlan | None = None
        for rule in self.rules:
            if not rule.match.matches(info, user):
                continue
            rule.matched += 1
            if not rule.rate.fires(rule.matched, self._rng.random):
                continue
            effect = rule.effect
            if effect.type == "WatchClose" and plan is not None and plan.cut is not None:
                continue  # the first cut wins; this one did not happen
            rule.injected += 1
            if plan is None:
                plan = FaultPlan(info)
            plan.fired.append(rule)
            INJECTED.labels(effect.type, info.verb, info.api_group, info.resource, info.subresource).inc()
            if effect.type == "Latency":
                plan.latency += effect.latency(self._rng.uniform)
            elif effect.type == "WatchClose":
                plan.cut = effect
            else:
                plan.answer = rule
                break
        return plan


def _not_found(name: str) -> APIError:
    return APIError(404, "NotFound", f'fault rule "{name}" not found', {"name": name, "kind": "faultrules"})
