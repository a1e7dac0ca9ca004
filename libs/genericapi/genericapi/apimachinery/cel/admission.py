"""CEL over an admission request: the variables admission expressions see, and running one expression.

Webhook ``matchConditions`` and ValidatingAdmissionPolicy expressions (validations, messages,
audit annotations, variables, match conditions) all run in kube's admission CEL environment
(``k8s.io/apiserver/pkg/admission/plugin/cel``): ``object``, ``oldObject`` (null when absent),
``request`` (the AdmissionRequest, as unstructured JSON), ``params``, ``namespaceObject``,
``authorizer`` and ``variables``. This module compiles expressions (cel-go's syntax error texts)
and evaluates them, reporting a failure as kube's filter does: ``expression '<src>' resulted in
error: <cel error>``.

``variables`` are lazy in kube: a variable runs only when an expression reads it, and a variable
that fails makes only the expressions that read it fail (``composited variable "x" fails to
evaluate: ...``). Here the variables an expression names (``variables.x``, transitively) are
evaluated, once per request, before it runs; those that failed are left out of the map, so an
expression whose short-circuit skips them still succeeds and one that reads them reports the
variable's error. The interpreter estimates no cost, so kube's per-expression and per-request cost
budgets are not enforced.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

import cel as celrust

from genericapi.apimachinery.admission import Attributes
from genericapi.apimachinery.authorization import Authorizer

from . import authz
from .library import FUNCTIONS
from .validator import _runtime_text

_VARIABLE_REF = re.compile(r"\bvariables\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)|\bvariables\s*\[\s*['\"]([^'\"]+)['\"]\s*\]")
_ALL_FUNCTIONS = {**FUNCTIONS, **authz.FUNCTIONS}
_contexts = threading.local()  # evaluation is synchronous: a context is never shared mid-evaluation


@dataclass
class Expression:
    """One compiled admission expression: its program, or kube's compile error text."""

    source: str
    program: Any = None
    error: str = ""
    variables: frozenset[str] = frozenset()


def compile_expression(source: str) -> Expression:
    """Parse ``source``; a syntax error is cel-go's text (``ERROR: <input>:1:5: ...``)."""
    try:
        program = celrust.compile(source)
    except Exception as e:  # the binding raises ValueError, sometimes RuntimeError
        text = str(e)
        start = text.find("ERROR: ")
        text = text[start:] if start >= 0 else text
        return Expression(source, None, text.replace("\n| ", "\n | "))
    names = frozenset(a or b for a, b in _VARIABLE_REF.findall(source))
    return Expression(source, program, "", names)


def user_info(attrs: Attributes) -> dict[str, Any]:
    """``authenticationv1.UserInfo`` as unstructured JSON (omitempty fields left out)."""
    user = attrs.user
    out: dict[str, Any] = {}
    if user.name:
        out["username"] = user.name
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {k: list(v) for k, v in user.extra.items()}
    return out


def admission_request(attrs: Attributes, uid: str = "") -> dict[str, Any]:
    """kube's ``cel.CreateAdmissionRequest`` as unstructured: what the ``request`` variable holds."""
    kind = {"group": attrs.group, "version": attrs.version, "kind": attrs.kind}
    res = {"group": attrs.group, "version": attrs.version, "resource": attrs.resource}
    out: dict[str, Any] = {"uid": uid, "kind": kind, "resource": res}
    if attrs.subresource:
        out["subResource"] = attrs.subresource
    out["requestKind"] = dict(kind)
    out["requestResource"] = dict(res)
    if attrs.subresource:
        out["requestSubResource"] = attrs.subresource
    if attrs.name:
        out["name"] = attrs.name
    if attrs.namespace:
        out["namespace"] = attrs.namespace
    out["operation"] = attrs.operation
    out["userInfo"] = user_info(attrs)
    out["dryRun"] = attrs.dry_run
    if attrs.options is not None:
        out["options"] = attrs.options
    return out


_NAMESPACE_META = ("name", "generateName", "namespace", "uid", "resourceVersion", "generation",
                   "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
                   "annotations", "finalizers")


def namespace_object(namespace: dict[str, Any] | None) -> dict[str, Any] | None:
    """kube's ``cel.CreateNamespaceObject``: the namespace's spec, status and some of its metadata."""
    if namespace is None:
        return None
    meta = namespace.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in _NAMESPACE_META if k in meta},
            "spec": namespace.get("spec") or {}, "status": namespace.get("status") or {}}


@dataclass
class Activation:
    """The variables of one evaluation (kube's ``evaluationActivation``) plus the lazily computed
    ``variables`` of a policy, shared by every expression of that policy in one request."""

    attrs: Attributes
    request: dict[str, Any]
    params: dict[str, Any] | None = None
    namespace: dict[str, Any] | None = None
    authorizer: Authorizer | None = None
    with_authorizer: bool = True
    composition: list[tuple[str, Expression]] = field(default_factory=list)
    _values: dict[str, Any] = field(default_factory=dict)
    _errors: dict[str, str] = field(default_factory=dict)

    def _context(self, names: set[str]) -> Any:
        ctx = getattr(_contexts, "ctx", None)
        if ctx is None:
            ctx = _contexts.ctx = celrust.Context(functions=_ALL_FUNCTIONS)
        attrs = self.attrs
        ctx.add_variable("object", attrs.obj)
        ctx.add_variable("oldObject", attrs.old_obj)
        ctx.add_variable("request", self.request)
        ctx.add_variable("params", self.params)
        ctx.add_variable("namespaceObject", self.namespace)
        if self.with_authorizer:
            res = {"group": attrs.group, "resource": attrs.resource, "subresource": attrs.subresource,
                   "namespace": attrs.namespace, "name": attrs.name}
            ctx.add_variable("authorizer", authz.authorizer_value(res))
        else:
            ctx.add_variable("authorizer", None)
        ctx.add_variable("variables", {n: self._values[n] for n in names if n in self._values})
        authz.bind(self.authorizer, attrs.user)
        return ctx

    def _needed(self, expr: Expression) -> set[str]:
        declared = {n: e for n, e in self.composition}
        seen: set[str] = set()
        todo = [n for n in expr.variables if n in declared]
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(v for v in declared[n].variables if v in declared)
        return seen

    def _compute(self, names: set[str]) -> None:
        for n, expr in self.composition:  # declaration order: a variable reads only earlier ones
            if n not in names or n in self._values or n in self._errors:
                continue
            value, err = self._run(expr, self._needed(expr))
            if err:
                self._errors[n] = f'composited variable "{n}" fails to evaluate: {err}'
            else:
                self._values[n] = value

    def _run(self, expr: Expression, names: set[str]) -> tuple[Any, str]:
        if expr.program is None:
            return None, f"compilation error: {expr.error}"
        self._compute(names)
        try:
            return expr.program.execute(self._context(names)), ""
        except Exception as e:
            text, _overload = _runtime_text(e)
            for n in names:
                if n in self._errors and (text == f"no such key: {n}" or n in text):
                    return None, self._errors[n]
            return None, text

    def evaluate(self, expr: Expression, with_authorizer: bool = True) -> tuple[Any, str]:
        """(value, "") or (None, kube's error text for this expression)."""
        self.with_authorizer = with_authorizer
        if expr.program is None:
            return None, f"compilation error: {expr.error}"
        value, err = self._run(expr, self._needed(expr))
        if err:
            return None, f"expression '{expr.source}' resulted in error: {err}"
        return value, ""
