"""Measure the two Python CEL candidates the CRD validation could be built on (issue 4).

    .venv/bin/python bench/cel_choice.py [--reps N]

Candidates: ``cel-python`` (module ``celpy``: pure Python, lark parser, tree-walking evaluator)
and ``common-expression-language`` (module ``cel``: bindings to the Rust ``cel`` interpreter).
Both are optional here: a candidate that is not installed is reported as missing, so the script
still runs with only the chosen one installed (pyproject keeps one; install the other by hand to
compare). Prints, from one run: compile and evaluation time per typical rule, and a semantics
table (what cel-go, hence kube-apiserver, answers for each expression vs what each candidate
answers). Nothing here is cached or hard-coded: every number and verdict is measured.
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable
from functools import partial
from typing import Any

OBJ = {"replicas": 3, "maxReplicas": 5, "name": "abc-1", "items": [{"name": f"a{i}"} for i in range(10)]}

# (label, rule, value bound to `self`)
RULES: list[tuple[str, str, Any]] = [
    ("compare fields", "self.replicas <= self.maxReplicas", OBJ),
    ("all() over 10 items", "self.items.all(x, x.name.startsWith('a'))", OBJ),
    ("list size", "self.items.size() <= 10", OBJ),
    ("regex (DNS label)", "self.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')", OBJ),
    ("has() + ternary", "has(self.replicas) ? self.replicas > 0 : true", OBJ),
    ("exists over map keys", "self.exists(k, k == 'maxReplicas')", OBJ),
]

_SENTINEL_ERROR = "<error>"

# (expression, self, what cel-go answers at run time; "<error>" = an evaluation error)
SEMANTICS: list[tuple[str, Any, Any]] = [
    ("dyn(1) == 1.0", None, True),  # heterogeneous equality (int vs double through dyn)
    ("dyn(1) == 1u", None, True),
    ("{'a': 1} == {'a': dyn(1.0)}", None, True),
    ("1u + 1", None, _SENTINEL_ERROR),  # no int/uint mixing
    ("2.0 * 3", None, _SENTINEL_ERROR),
    ("9223372036854775807 + 1", None, _SENTINEL_ERROR),  # int64 overflow is an error
    ("-9223372036854775808 - 1", None, _SENTINEL_ERROR),
    ("18446744073709551615u + 1u", None, _SENTINEL_ERROR),
    ("uint(-1)", None, _SENTINEL_ERROR),
    ("int('9223372036854775808')", None, _SENTINEL_ERROR),
    ("-7 / 2", None, -3),  # Go truncates towards zero
    ("-7 % 3", None, -1),
    ("1 / 0", None, _SENTINEL_ERROR),
    ("size('h\u00e9llo')", None, 5),  # code points, not bytes
    ("'abc'.matches('[')", None, _SENTINEL_ERROR),
    ("has(self.a)", {"b": 1}, False),
    ("self.a", {"b": 1}, _SENTINEL_ERROR),
    ("self[3]", [1], _SENTINEL_ERROR),
    ("(1 / 0 == 1) || true", None, True),  # commutative error absorption
    ("false && (1 / 0 == 1)", None, False),
    ("[1, 2, 3].all(x, x > 0)", None, True),
    ("[1, 2, 3].exists(x, x > 2)", None, True),
    ("[1, 2, 3].exists_one(x, x > 1)", None, False),
    ("[1, 2, 3].map(x, x * 2)", None, [2, 4, 6]),
    ("[1, 2, 3].map(x, x > 1, x * 2)", None, [4, 6]),
    ("[1, 2, 3].filter(x, x > 1)", None, [2, 3]),
    ("{'a': 1}.all(k, k == 'a')", None, True),
    ("type(1) == int", None, True),
    ("double(5) / 2.0", None, 2.5),
    ("string(1.5)", None, "1.5"),
    ("'x'.lowerAscii2() == 'x'", None, True),  # a registered custom function as a method
    ("[1, 3, 2].isSorted2()", None, False),
    ("self.?a.orValue(3)", {"b": 1}, 3),  # optional syntax (cel.OptionalTypes in kube's base env)
]


def _lower(s: Any) -> Any:
    return str(s).lower()


def _is_sorted(xs: Any) -> Any:
    return all(a <= b for a, b in zip(list(xs), list(xs)[1:], strict=False))


class Candidate:
    name = ""

    def compile(self, expr: str) -> Any:
        raise NotImplementedError

    def run(self, prog: Any, self_value: Any) -> Any:
        raise NotImplementedError

    def plain(self, value: Any) -> Any:
        return value


class CelPython(Candidate):
    name = "cel-python"

    def __init__(self) -> None:
        self.celpy = importlib.import_module("celpy")
        self.env = self.celpy.Environment()
        self.funcs: dict[str, Callable[..., Any]] = {
            "lowerAscii2": lambda s: self.celpy.celtypes.StringType(_lower(s)),
            "isSorted2": lambda xs: self.celpy.celtypes.BoolType(_is_sorted(xs)),
        }

    def compile(self, expr: str) -> Any:
        return self.env.program(self.env.compile(expr), functions=self.funcs)

    def run(self, prog: Any, self_value: Any) -> Any:
        return prog.evaluate({"self": self.celpy.json_to_cel(self_value)})

    def plain(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.plain(v) for v in value]
        if isinstance(value, self.celpy.celtypes.BoolType):
            return bool(value)
        if isinstance(value, (self.celpy.celtypes.IntType, self.celpy.celtypes.UintType)):
            return int(value)
        if isinstance(value, self.celpy.celtypes.DoubleType):
            return float(value)
        if isinstance(value, self.celpy.celtypes.StringType):
            return str(value)
        return value


class CommonExpressionLanguage(Candidate):
    name = "common-expression-language"

    def __init__(self) -> None:
        self.cel = importlib.import_module("cel")
        self.funcs = {"lowerAscii2": _lower, "isSorted2": _is_sorted}

    def compile(self, expr: str) -> Any:
        return self.cel.compile(expr)

    def run(self, prog: Any, self_value: Any) -> Any:
        return prog.execute(self.cel.Context(variables={"self": self_value}, functions=self.funcs))


def _load(kind: type[Candidate]) -> Candidate | None:
    try:
        return kind()
    except ImportError:
        return None


def _per_call_us(fn: Callable[[], Any], reps: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start) / reps * 1e6


def timings(cands: list[Candidate], reps: int) -> None:
    print(f"\n== time per call, microseconds (mean of {reps}) ==")
    print(f"{'rule':28}" + "".join(f"{c.name + ' compile':>36}{c.name + ' eval':>33}" for c in cands))
    for label, rule, value in RULES:
        row = f"{label:28}"
        for c in cands:
            prog = c.compile(rule)
            assert c.plain(c.run(prog, value)) is True, (c.name, rule)
            row += f"{_per_call_us(partial(c.compile, rule), reps):36.1f}"
            row += f"{_per_call_us(partial(c.run, prog, value), reps):33.1f}"
        print(row)


def semantics(cands: list[Candidate]) -> None:
    print("\n== semantics vs cel-go (ok = same answer as cel-go at run time) ==")
    score = {c.name: 0 for c in cands}
    for expr, value, want in SEMANTICS:
        cells = []
        for c in cands:
            try:
                got: Any = c.plain(c.run(c.compile(expr), value))
            except Exception as e:  # both libraries raise assorted exception types
                got = _SENTINEL_ERROR
                note = type(e).__name__
            else:
                note = repr(got)
            ok = got == want and type(got) is type(want)
            score[c.name] += ok
            cells.append(f"{'ok ' if ok else 'BAD'} {note[:30]:30}")
        print(f"{expr:38} want {want!s:8} " + " | ".join(cells))
    print("score: " + ", ".join(f"{n} {s}/{len(SEMANTICS)}" for n, s in score.items()))


def compile_errors(cands: list[Candidate]) -> None:
    print("\n== compile error text (kube prints cel-go's: 'ERROR: <input>:1:11: Syntax error: ...') ==")
    for expr in ("self.replicas <", "self.a.b("):
        for c in cands:
            try:
                c.compile(expr)
                text = "(compiled!)"
            except Exception as e:
                text = str(e).replace("\n", " | ")
            print(f"{c.name:28} {expr!r}: {text[:150]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=300)
    args = ap.parse_args()
    cands = [c for c in (_load(CelPython), _load(CommonExpressionLanguage)) if c is not None]
    for kind in (CelPython, CommonExpressionLanguage):
        if not any(isinstance(c, kind) for c in cands):
            print(f"{kind.name}: not installed, skipped")
    timings(cands, args.reps)
    semantics(cands)
    compile_errors(cands)


if __name__ == "__main__":
    main()
