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

Handing a value to the interpreter (a Python dict converted into CEL values) costs more than most
evaluations, so an ``Activation`` binds each variable once for all the expressions run on it, and
only those an expression names. A policy or a set of match conditions can also hand over only the
parts of ``object``, ``oldObject``, ``request``, ``params`` and ``namespaceObject`` its expressions
read (``read_paths``, ``merge_paths``, ``prune``): a field selected by name, at most two deep, is kept
whole; a variable used any other way (indexed, passed to a function, iterated, compared) is kept
whole. Pruning drops only siblings no expression names, so no result or error text changes
(tests/unit/test_cel_admission_pruning.py compares both ways over generated expressions). Binding a
variable makes the interpreter rebuild its environment, kube's library functions included, so an
expression that calls none of them runs in a second context that has none.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from genericapi.apimachinery.admission import Attributes
from genericapi.apimachinery.authorization import Authorizer
from genericapi.apimachinery.cel.binding import celrust

from . import authz, macros
from .checks import _TOKEN
from .library import FUNCTIONS
from .validator import _runtime_text

ADMISSION_VARIABLES = frozenset({"object", "oldObject", "request", "params", "namespaceObject", "authorizer",
                                 "variables"})
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
    #: The top-level admission variables the expression reads (only those are bound to run it).
    refs: frozenset[str] = frozenset()
    #: Per variable, the field paths (at most two deep) the expression reads; None: the whole value.
    paths: dict[str, frozenset[tuple[str, ...]] | None] = field(default_factory=dict)
    #: Whether it may call one of kube's library functions (else it runs in a context without them).
    functions: bool = True


Paths = dict[str, "frozenset[tuple[str, ...]] | None"]
_PRUNABLE = frozenset({"object", "oldObject", "request", "params", "namespaceObject"})
# The static checks' tokens plus ``//`` comments (dropped): a quote inside a comment must not open a
# string that hides the code after it.
_PATH_TOKEN = re.compile(r"(?P<comment>//[^\n]*)|" + _TOKEN.pattern, re.S)


def _code_tokens(source: str) -> list[tuple[str, str]]:
    return [(m.lastgroup or "punct", m.group(0)) for m in _PATH_TOKEN.finditer(source) if m.lastgroup != "comment"]


def read_paths(source: str) -> Paths:
    """Which parts of each admission variable ``source`` reads: ``object.metadata.name.size()`` reads
    ``("metadata", "name")``; ``object.data[k]`` reads ``("data",)``; a variable used whole (passed to
    a function, compared, indexed) needs all of it (None)."""
    toks = _code_tokens(source)
    out: dict[str, set[tuple[str, ...]] | None] = {}
    for i, (kind, text) in enumerate(toks):
        if kind != "ident" or text not in _PRUNABLE or (i >= 1 and toks[i - 1][1] == "."):
            continue
        path: list[str] = []
        j = i + 1
        while len(path) < 2 and j + 1 < len(toks) and toks[j][1] == "." and toks[j + 1][0] == "ident":
            if j + 2 < len(toks) and toks[j + 2][1] == "(":
                break  # a method of what was read so far
            path.append(toks[j + 1][1])
            j += 2
        if not path:
            out[text] = None
        elif out.get(text, set()) is not None:
            current = out.setdefault(text, set())
            assert current is not None
            current.add(tuple(path))
    return {k: (frozenset(v) if v is not None else None) for k, v in out.items()}


def merge_paths(expressions: Iterable[Expression]) -> Paths:
    """The parts of each variable any of ``expressions`` reads (for binding each value once)."""
    out: dict[str, set[tuple[str, ...]] | None] = {}
    for expr in expressions:
        if expr.program is None:
            continue
        for name in expr.refs & _PRUNABLE:
            mine = expr.paths.get(name)
            if mine is None or out.get(name, set()) is None:
                out[name] = None
            else:
                current = out.setdefault(name, set())
                assert current is not None
                current.update(mine)
    return {k: (frozenset(v) if v is not None else None) for k, v in out.items()}


def prune(value: Any, paths: frozenset[tuple[str, ...]] | None) -> Any:
    """``value`` with only the fields at ``paths`` (a one-element path keeps its whole subtree)."""
    if paths is None or not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for path in sorted(paths, key=len):
        head = path[0]
        if head not in value:
            continue
        child = value[head]
        if len(path) == 1 or not isinstance(child, dict):
            out[head] = child
            continue
        if head in out and out[head] is child:
            continue  # the whole subtree is already kept
        kept = out.setdefault(head, {})
        if path[1] in child:
            kept[path[1]] = child[path[1]]
    return out


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
    # Bound for this expression: what the interpreter says it reads and, in case that misses one,
    # every admission variable's name among its tokens (a name left out would keep the value another
    # request bound in the shared context).
    functions = True
    try:
        refs = frozenset(program.variables()) & ADMISSION_VARIABLES
        toks = _code_tokens(source)
        refs |= frozenset(text for kind, text in toks if kind == "ident") & ADMISSION_VARIABLES
        # A library function is called as ``f(`` or ``x.f(``: without one the plain context does.
        functions = any(kind == "ident" and text in _ALL_FUNCTIONS and i + 1 < len(toks) and toks[i + 1][1] == "("
                        for i, (kind, text) in enumerate(toks))
    except Exception:
        refs = ADMISSION_VARIABLES
    try:
        paths = read_paths(source)
    except Exception:
        paths = {}
    # A variable the scan did not see as read (it reads it some other way): bound whole.
    paths = {name: paths.get(name) for name in refs & _PRUNABLE}
    return Expression(source, program, "", names, refs, paths, functions)


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
    kind = dict(zip(("group", "version", "kind"), attrs.gvk(), strict=True))
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


@dataclass(eq=False)
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
    #: The parts of each variable the expressions run on this activation read (``merge_paths``);
    #: None binds whole values.
    paths: Paths | None = None
    _values: dict[str, Any] = field(default_factory=dict)
    _errors: dict[str, str] = field(default_factory=dict)

    def _value(self, name: str) -> Any:
        attrs = self.attrs
        if name == "object":
            return attrs.obj
        if name == "oldObject":
            return attrs.old_obj
        if name == "request":
            return self.request
        if name == "params":
            return self.params
        if name == "namespaceObject":
            return self.namespace
        if not self.with_authorizer:
            return None
        res = {"group": attrs.group, "resource": attrs.resource, "subresource": attrs.subresource,
               "namespace": attrs.namespace, "name": attrs.name}
        return authz.authorizer_value(res)

    def _context(self, expr: Expression, names: set[str]) -> Any:
        """The thread's context with what ``expr`` reads bound. Converting a value into the
        interpreter costs more than most evaluations, so each value is bound once per activation
        (evaluation is synchronous: no other activation uses the context in between)."""
        # Two contexts per thread: with kube's library functions and without. Binding a variable
        # makes the interpreter rebuild its environment, wrapped functions included, so an
        # expression that calls none runs where there are none to rebuild.
        envs: dict[bool, tuple[Any, dict[str, Any]]] | None = getattr(_contexts, "envs", None)
        if envs is None:
            envs = _contexts.envs = {True: (celrust.Context(functions=_ALL_FUNCTIONS), {}),
                                     False: (celrust.Context(), {})}
        ctx, bound = envs[expr.functions]
        for name in expr.refs:
            if name == "variables":
                ctx.add_variable("variables", {n: self._values[n] for n in names if n in self._values})
                bound.pop("variables", None)
                continue
            flag = self.with_authorizer if name == "authorizer" else None
            last = bound.get(name)
            if last is None or last[0] is not self or last[1] != flag:
                value = self._value(name)
                if self.paths is not None and name in _PRUNABLE:
                    value = prune(value, self.paths.get(name))
                ctx.add_variable(name, value)
                bound[name] = (self, flag)
        authz.bind(self.authorizer, self.attrs.user)
        return ctx

    def _bound(self, expr: Expression, names: set[str]) -> dict[str, Any]:
        """The values ``_context`` binds for ``expr``, as Python values (for ``macros``' exact fold)."""
        out: dict[str, Any] = {}
        for name in expr.refs:
            if name == "variables":
                out[name] = {n: self._values[n] for n in names if n in self._values}
                continue
            value = self._value(name)
            if self.paths is not None and name in _PRUNABLE:
                value = prune(value, self.paths.get(name))
            out[name] = value
        return out

    def _needed(self, expr: Expression) -> set[str]:
        if not expr.variables:
            return set()  # most expressions name no variable
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
            return macros.run(expr.program, expr.source, self._context(expr, names),
                              lambda: self._bound(expr, names), _ALL_FUNCTIONS if expr.functions else {}), ""
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
