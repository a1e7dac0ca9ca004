"""Run a custom resource through its CRD's compiled rules, reporting failures as kube-apiserver does.

Walks the object along the rule tree (every property, every map value, every list item), binds
``self`` (and ``oldSelf`` where the old object has a value that correlates: same field, same map
key, same list-map keys) and renders each failure like ``apiextensions-apiserver``'s
``schema/cel`` validator: ``spec: Invalid value: "object": <message>``. On update, errors of
rules without ``oldSelf`` on a node unchanged from the old object are dropped (validation
ratcheting, on by default since 1.30). The interpreter offers no cost estimation, so kube's cost
budgets are not enforced.
"""

from __future__ import annotations

import threading
from typing import Any

from genericapi.apimachinery.cel import macros
from genericapi.apimachinery.cel.binding import celrust
from genericapi.apimachinery.cel.checks import escape
from genericapi.apimachinery.cel.compiler import CompiledRule, RuleNode
from genericapi.apimachinery.cel.library import FUNCTIONS
from genericapi.apimachinery.cel.typed import TYPED_FORMATS, to_typed
from genericapi.apimachinery.errors import FieldError, duplicate, forbidden, invalid, required

_MAX_MESSAGE = 5 * 1024
_contexts = threading.local()  # validate() is synchronous: a context is never shared mid-evaluation


def to_cel(value: Any, schema: Any) -> Any:
    """JSON as CEL sees it through the schema: integers in ``number`` fields become doubles, object
    field names are escaped (``my-field`` -> ``my__dash__field``), date-time/date/duration/byte strings
    become timestamps/durations/bytes (``typed``)."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        fmt = schema.get("format")
        if fmt in TYPED_FORMATS and schema.get("type") == "string":
            return to_typed(value, str(fmt))
        return value
    if isinstance(value, int) and schema.get("type") == "number":
        return float(value)
    if isinstance(value, dict):
        props = schema.get("properties")
        if props:  # an object: fields are selected by their escaped names
            return {escape(k): to_cel(v, props.get(k)) for k, v in value.items()}
        extra = schema.get("additionalProperties")
        return {k: to_cel(v, extra) for k, v in value.items()}
    if isinstance(value, list):
        return [to_cel(v, schema.get("items")) for v in value]
    return value


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _runtime_text(err: Exception) -> tuple[str, bool]:
    """(cel-go's error text, whether it is an overload error) for an interpreter exception."""
    text = str(err)
    if isinstance(err, KeyError):
        return f"no such key: {text.strip(chr(39))}", False
    if isinstance(err, ZeroDivisionError):
        return ("modulus by zero" if "modulo" in text or "remainder" in text else "division by zero"), False
    if isinstance(err, OverflowError):
        return ("unsigned integer overflow" if "unsigned" in text or "uint" in text else "integer overflow"), False
    if text.startswith("Function '"):
        text = text.split(" error: ", 1)[-1]
        for tail in (". Check function arguments and their types.", " Check function arguments and their types."):
            text = text.removesuffix(tail)
    if isinstance(err, TypeError) or text.startswith("no such overload"):
        return "no such overload", True
    return text, False


def _activation(self_value: Any, old_value: Any, with_old: bool) -> Any:
    """A context binding ``self`` (and ``oldSelf``); the library functions are registered once per thread."""
    ctx = getattr(_contexts, "with_old" if with_old else "plain", None)
    if ctx is None:
        ctx = celrust.Context(functions=FUNCTIONS)
        setattr(_contexts, "with_old" if with_old else "plain", ctx)
    ctx.add_variable("self", self_value)
    if with_old:
        ctx.add_variable("oldSelf", old_value)
    return ctx


def _message(rule: CompiledRule) -> str:
    return rule.message.strip() if rule.message else f"failed rule: {rule.rule.strip()}"


def _error_string(rule: CompiledRule) -> str:
    return rule.message.strip() if rule.message else rule.rule.strip()


def _expression_message(rule: CompiledRule, ctx: Any, variables: dict[str, Any]) -> str | None:
    """The messageExpression's text, or None where kube falls back to message (it logs why)."""
    if rule.message_program is None:
        return None
    try:
        result = macros.run(rule.message_program, rule.message_expression, ctx, lambda: variables, FUNCTIONS)
    except Exception:
        return None
    if not isinstance(result, str):
        return None
    text = result.strip()
    if not text or len(text) > _MAX_MESSAGE or "\n" in text:
        return None
    return text


def _failure(rule: CompiledRule, path: str, type_name: str, detail: str) -> FieldError:
    if rule.field_path:
        path = _child(path, rule.field_path) if path != "<nil>" else rule.field_path
    if rule.reason == "FieldValueForbidden":
        return forbidden(path, detail)
    if rule.reason == "FieldValueRequired":
        return required(path, detail)
    if rule.reason == "FieldValueDuplicate":
        return duplicate(path, type_name)
    return invalid(path, type_name, detail)


def _list_map_key(item: Any, keys: list[str]) -> tuple[Any, ...] | None:
    if not isinstance(item, dict):
        return None
    return tuple(orjson_key(item.get(k)) for k in keys)


def orjson_key(v: Any) -> Any:
    return v if isinstance(v, (str, int, float, bool)) or v is None else repr(v)


class CELValidator:
    """The compiled rules of one schema; ``validate`` is pure and safe to share between requests."""

    def __init__(self, root: RuleNode, resource_root: bool = True) -> None:
        self.root = root
        self.resource_root = resource_root

    def validate(self, new: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        errs: list[FieldError] = []
        self._walk(self.root, "<nil>", new, old, old is not None, old is not None and old == new, errs)
        return errs

    def _walk(self, node: RuleNode, path: str, value: Any, old: Any, has_old: bool, unchanged: bool,
              errs: list[FieldError]) -> None:
        if value is None:
            return
        if node.rules:
            self._run_rules(node, path, value, old if has_old and old is not None else None, unchanged, errs)
        base = "" if path == "<nil>" else path
        if isinstance(value, dict):
            old_map = old if has_old and isinstance(old, dict) else None
            if node.additional is not None:
                for k, v in value.items():
                    o = old_map.get(k) if old_map is not None else None
                    in_old = old_map is not None and k in old_map
                    self._walk(node.additional, f"{base}[{k}]", v, o, in_old, in_old and o == v, errs)
            for k, v in value.items():
                child = node.properties.get(k)
                if child is not None:
                    o = old_map.get(k) if old_map is not None else None
                    in_old = old_map is not None and k in old_map
                    self._walk(child, _child(base, k), v, o, in_old, in_old and o == v, errs)
        elif isinstance(value, list) and node.items is not None:
            keys = node.schema.get("x-kubernetes-list-map-keys") or []
            olds: dict[Any, Any] = {}
            if node.schema.get("x-kubernetes-list-type") == "map" and has_old and isinstance(old, list):
                for item in old:
                    key = _list_map_key(item, keys)
                    if key is not None:
                        olds.setdefault(key, item)
            for i, item in enumerate(value):
                if node.schema.get("x-kubernetes-list-type") == "map":
                    key = _list_map_key(item, keys)
                    found = key is not None and key in olds
                    o = olds.get(key) if found else None
                    self._walk(node.items, f"{base}[{i}]", item, o, found, found and o == item, errs)
                else:  # not correlatable: ratchet on the nearest correlatable ancestor (this list)
                    self._walk(node.items, f"{base}[{i}]", item, None, False, unchanged, errs)

    def _run_rules(self, node: RuleNode, path: str, value: Any, old: Any, unchanged: bool,
                   errs: list[FieldError]) -> None:
        cel_self = to_cel(value, node.schema)
        cel_old = to_cel(old, node.schema) if old is not None else None
        ctx = _activation(cel_self, cel_old, old is not None)
        variables = {"self": cel_self, "oldSelf": cel_old} if old is not None else {"self": cel_self}
        for rule in node.rules:
            if rule.uses_old_self and old is None:
                continue  # transition rules run only where an old value correlates
            try:
                result = macros.run(rule.program, rule.rule, ctx, lambda: variables, FUNCTIONS)
            except Exception as e:  # the interpreter raises assorted exception types
                text, overload = _runtime_text(e)
                if overload:
                    detail = (f"'{text}': call arguments did not match a supported operator, function or macro "
                              f"signature for rule: {_error_string(rule)}")
                else:
                    detail = f"{text} evaluating rule: {_error_string(rule)}"
                errs.append(invalid(path, node.type, detail))
                continue
            if result is True:
                continue
            if not rule.uses_old_self and unchanged:
                continue  # ratcheting: an unchanged value keeps passing
            detail = _expression_message(rule, ctx, variables) or _message(rule)
            errs.append(_failure(rule, path, node.type, detail))
