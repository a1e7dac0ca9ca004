"""cel-go's error semantics for the ``all``, ``exists`` and ``exists_one`` macros.

cel-go expands ``r.all(x, p)`` into a fold with ``&&`` (``exists`` with ``||``), and its logical
operators are commutative over errors: an element whose predicate errors (``no such key``, ``no
such overload``) does not decide the result when another element does. So ``['x', 1].exists(e, e
> 0)`` is true, ``[1, 'x'].all(e, e > 5)`` false, and an error surfaces only when no element
decides (the first erroring element's error). ``exists_one`` folds with ``p ? accu + 1 : accu``
and so errors whenever any predicate errors (the last erroring element's error). The interpreter
(``common-expression-language``) gets ``&&``/``||`` right but stops a macro at the first error.

Only an evaluation that raised can differ (an element that decides stops both interpreters alike),
so the fast path is untouched: when a program raises and its source has one of these macros, it
runs again here. Each macro's receiver is wrapped in a Python function (``r.all(x, p)`` becomes
``__kc_pick_0(r, [y]).all(x, p)``, ``y`` the iteration variables bound around it) that runs ``p``
per element itself, in a context holding the
variables in scope, and hands back the list of at most one element that decides the result as
cel-go folds it (the false one, else the first erroring one, else none). The interpreter then
runs the macro natively over that list, so values and error texts come from it exactly as on the
fast path, and no error has to cross a Python function (the binding prints those). Receivers are
found on the tokens: the member chain before ``.all(`` (calls, fields, indexes, a parenthesised
or literal start). The two-variable forms (``all(i, v, p)``) are left to the interpreter.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from genericapi.apimachinery.cel.binding import celrust

from .checks import _TOKEN

_QUANTIFIERS = frozenset({"all", "exists", "exists_one"})
_BINDERS = _QUANTIFIERS | {"map", "filter"}
_LITERAL_IDENTS = frozenset({"true", "false", "null"})
_OPEN = {")": "(", "]": "[", "}": "{"}
_CODE = re.compile(r"(?P<comment>//[^\n]*)|" + _TOKEN.pattern, re.S)
_PREFIX = "__kc_pick_"
_state = threading.local()  # the variables and functions of the evaluation running on this thread


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    start: int
    end: int


@dataclass
class _Macro:
    kind: str
    var: str
    recv_start: int  # where the receiver starts (source offset)
    dot: int  # the '.' before the macro's name
    pred_start: int
    pred_end: int  # the closing ')'
    scope: tuple[str, ...] = ()  # the iteration variables bound where the receiver is (outermost first)


def _tokens(source: str) -> list[_Tok]:
    return [_Tok(m.lastgroup or "punct", m.group(0), m.start(), m.end())
            for m in _CODE.finditer(source) if m.lastgroup != "comment"]


def _match_back(toks: list[_Tok], j: int) -> int:
    """Index of the bracket opening the one closing at ``j`` (-1 when unbalanced)."""
    depth = 0
    for k in range(j, -1, -1):
        t = toks[k].text if toks[k].kind == "punct" else ""
        if t in _OPEN:
            depth += 1
        elif t in ("(", "[", "{"):
            depth -= 1
            if depth == 0:
                return k
    return -1


def _match_forward(toks: list[_Tok], j: int) -> tuple[int, list[int]]:
    """(index of the bracket closing the one opening at ``j``, indexes of its top-level commas)."""
    depth, commas = 0, list[int]()
    for k in range(j, len(toks)):
        t = toks[k].text if toks[k].kind == "punct" else ""
        if t in ("(", "[", "{"):
            depth += 1
        elif t in _OPEN:
            depth -= 1
            if depth == 0:
                return k, commas
        elif t == "," and depth == 1:
            commas.append(k)
    return -1, commas


def _operand_end(t: _Tok) -> bool:
    if t.kind in ("str", "num"):
        return True
    if t.kind == "ident":
        return t.text != "in"
    return t.text in _OPEN


def _receiver_start(toks: list[_Tok], j: int) -> int:
    """Index of the first token of the member chain ending at token ``j`` (-1 when not found)."""
    while j >= 0:
        t = toks[j]
        if t.kind == "punct" and t.text in _OPEN:
            k = _match_back(toks, j)
            if k < 0:
                return -1
            before = toks[k - 1] if k > 0 else None
            if t.text == "]" and before is not None and _operand_end(before):
                j = k - 1  # an index: continue with what is indexed
                continue
            if t.text in ")}" and before is not None and before.kind == "ident" and before.text not in ("in",):
                j = k - 1  # a call or a message construction: continue with its name
                continue
            return k  # a parenthesised expression, a list or a map literal
        if t.kind == "ident" and t.text not in _LITERAL_IDENTS:
            if j > 0 and toks[j - 1].text == ".":
                if j > 1 and _operand_end(toks[j - 2]):
                    j -= 2
                    continue
                return j - 1  # a leading-dot name
            return j
        if t.kind in ("str", "num", "ident"):
            return j
        return -1
    return -1


def _macros(source: str) -> list[_Macro]:
    toks = _tokens(source)
    out: list[_Macro] = []
    binders: list[tuple[int, int, str]] = []  # (start, end, variable) of every comprehension's body
    for i, t in enumerate(toks):
        if (t.kind != "ident" or t.text not in _BINDERS or i < 2 or toks[i - 1].text != "."
                or i + 3 >= len(toks) or toks[i + 1].text != "(" or toks[i + 2].kind != "ident"
                or toks[i + 3].text != ","):
            continue
        close, commas = _match_forward(toks, i + 1)
        if close < 0 or not commas or commas[0] != i + 3:
            continue
        binders.append((toks[i + 3].end, toks[close].start, toks[i + 2].text))
        if t.text not in _QUANTIFIERS or len(commas) != 1:
            continue  # map/filter, or the two-variable form
        start = _receiver_start(toks, i - 2)
        if start < 0:
            continue
        out.append(_Macro(t.text, toks[i + 2].text, toks[start].start, toks[i - 1].start, toks[i + 3].end,
                          toks[close].start))
    binders.sort()
    for m in out:
        m.scope = tuple(var for lo, hi, var in binders if lo <= m.recv_start and m.dot <= hi)
    return out


def _rewrite(source: str, macros: list[_Macro], lo: int, hi: int) -> str:
    """``source[lo:hi]`` with the receivers of the macros inside it wrapped in their pick functions."""
    inserts: list[tuple[int, int, str]] = []
    for n, m in enumerate(macros):
        if lo <= m.recv_start and m.pred_end < hi:
            inserts.append((m.recv_start, -m.dot, f"{_PREFIX}{n}("))  # at one start: the outer (later dot) first
            inserts.append((m.dot, 0, f", [{', '.join(m.scope)}])"))
    inserts.sort()
    parts, at = [], lo
    for pos, _order, text in inserts:
        parts.append(source[at:pos])
        parts.append(text)
        at = pos
    parts.append(source[at:hi])
    return "".join(parts)


def _decide(kind: str, items: list[Any], outcomes: list[Any]) -> list[Any]:
    """The elements the native macro must see to give cel-go's fold result (``outcomes``: each
    predicate's value, or ``_ERROR``)."""
    if kind == "exists_one":
        errors = [x for x, r in zip(items, outcomes, strict=True) if r is _ERROR or not isinstance(r, bool)]
        if errors:
            return [errors[-1]]
        trues = [x for x, r in zip(items, outcomes, strict=True) if r is True]
        return trues[:2] if trues else []
    decider = kind == "exists"  # exists stops at a true, all at a false
    first_error = None
    for x, r in zip(items, outcomes, strict=True):
        if r is decider:
            return [x]
        if first_error is None and (r is _ERROR or not isinstance(r, bool)):
            first_error = [x]
    return first_error or []


_ERROR = object()


class Fallback:
    """An expression rewritten so its quantifier macros fold as cel-go's do."""

    def __init__(self, source: str, macros: list[_Macro]) -> None:
        self.program = celrust.compile(_rewrite(source, macros, 0, len(source)))
        self.picks: dict[str, Callable[[Any, Any], Any]] = {}
        for n, m in enumerate(macros):
            predicate = celrust.compile(_rewrite(source, macros, m.pred_start, m.pred_end))
            self.picks[f"{_PREFIX}{n}"] = self._pick(m, predicate)

    def _context(self, variables: dict[str, Any]) -> Any:
        functions: dict[str, Any] = {**_state.functions, **self.picks}
        ctx = celrust.Context(functions=functions)
        for name, value in variables.items():
            ctx.add_variable(name, value)
        return ctx

    def _pick(self, macro: _Macro, predicate: Any) -> Callable[[Any, Any], Any]:
        kind, var, scope = macro.kind, macro.var, macro.scope

        def pick(target: Any, bound: Any) -> Any:
            if isinstance(target, dict):
                items = list(target)
            elif isinstance(target, list):
                items = target
            else:
                return target  # not iterable: the native macro reports it
            ctx = self._context({**_state.variables, **dict(zip(scope, bound, strict=True))})
            outcomes: list[Any] = []
            for item in items:
                ctx.add_variable(var, item)
                try:
                    outcomes.append(predicate.execute(ctx))
                except Exception:  # the interpreter raises assorted exception types
                    outcomes.append(_ERROR)
            return _decide(kind, items, outcomes)
        return pick

    def execute(self, variables: dict[str, Any], functions: dict[str, Any]) -> Any:
        """Run the expression with ``variables`` bound and ``functions`` registered (raises as
        ``Program.execute`` does)."""
        outer = getattr(_state, "variables", None), getattr(_state, "functions", None)
        _state.variables, _state.functions = variables, functions
        try:
            return self.program.execute(self._context(variables))
        finally:
            _state.variables, _state.functions = outer


@functools.lru_cache(maxsize=2048)
def fallback(source: str) -> Fallback | None:
    """The exact-fold version of ``source``; None when it has no quantifier macro to fix."""
    if not any(q in source for q in _QUANTIFIERS):
        return None
    try:
        macros = _macros(source)
        return Fallback(source, macros) if macros else None
    except Exception:  # a source the scan misreads: keep the interpreter's own answer
        return None


def run(program: Any, source: str, ctx: Any, variables: Callable[[], dict[str, Any]],
        functions: dict[str, Any]) -> Any:
    """``program.execute(ctx)``; when that raises and ``source`` has a quantifier macro, the result
    cel-go gives (``variables()``: the values bound in ``ctx``, as Python values)."""
    try:
        return program.execute(ctx)
    except Exception:
        exact = fallback(source)
        if exact is None:
            raise
    return exact.execute(variables(), functions)
