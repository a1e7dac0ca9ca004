"""Type errors in a rule, found when the CRD is written, as far as an interpreter without a checker allows.

kube-apiserver type-checks every rule against the schema (cel-go's checker) and refuses a CRD whose
rule mixes types (``found no matching overload for '_==_' applied to '(int, string)'``), whose rule
is not a bool (``cel expression must evaluate to a bool``) or whose messageExpression is not a
string (``messageExpression must evaluate to a string``). ``common-expression-language`` has no
checker, so this module approximates one in two ways:

* ``equality_issues`` scans the tokens for ``==``/``!=`` between a literal and ``self`` or a
  ``self.a.b`` path (or two literals) whose types differ. The interpreter cannot find these by running the rule: its
  equality is heterogeneous (``1 == 'a'`` is just false).
* ``sample_problem`` runs the rule once against a type-correct sample value built from the schema
  (every declared property present, one entry per map and list, ``oldSelf`` bound to the same
  sample) and reports only the interpreter's overload errors and a result of the wrong type.
  Runtime-only failures (no such key, index out of range, division by zero, a bad regex, a value a
  function cannot parse) end the check silently: such a rule is accepted, as kube accepts it.

Not found, knowingly: type errors in branches the sample does not evaluate (the other side of a
short-circuited ``&&``/``||``, the untaken arm of ``?:``, macro bodies over an empty collection),
errors behind a ``dyn(...)`` (skipped) or a schemaless node (int-or-string, preserve-unknown-fields
and untyped values are left out of the sample, so reading them stops the check), ``==`` whose
operands are not a plain path or literal, and errors at nodes whose values are lists or maps.
Overload errors found by running carry no operand types and, unless the operator is unique in the
rule, no position: cel-go's texts give both.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from genericapi.apimachinery.cel.binding import celrust
from genericapi.apimachinery.cel.checks import _embedded, _field_owner, _tokens, escape, issue, unescape
from genericapi.apimachinery.cel.library import FUNCTIONS
from genericapi.apimachinery.cel.typed import TYPED_FORMATS, to_typed

NOT_BOOL = "cel expression must evaluate to a bool"
NOT_STRING = "messageExpression must evaluate to a string"

_contexts = threading.local()  # sample runs are synchronous: a context is never shared mid-evaluation
_OMIT = object()  # a schemaless (dynamic) node: left out of the sample
_TYPED_SAMPLES = {"date-time": "2000-01-01T00:00:00Z", "date": "2000-01-01", "duration": "1s", "byte": "YQ=="}
_CEL_FORMAT_TYPES = {"date-time": "google.protobuf.Timestamp", "date": "google.protobuf.Timestamp",
                     "duration": "google.protobuf.Duration", "byte": "bytes"}
_SCALARS = {"integer": "int", "number": "double", "boolean": "bool", "string": "string"}
_BEFORE = frozenset({"(", "&", "|", "?", ":", ",", "["})
_AFTER = frozenset({")", "&", "|", "?", ":", ",", "]", "}"})
_UNSUPPORTED = re.compile(r"Unsupported operation: (\w+) (\S+) (\w+)\.")
_ARITH = {"+": "_+_", "-": "_-_", "*": "_*_", "/": "_/_", "%": "_%_"}
_CALL_ERROR = re.compile(r"^Function '([^']+)' error: (?:Python function call failed: \w+: )?no such overload")
_STRING_PREFIX = re.compile(r"[rRbB]*")


# -- sample values ----------------------------------------------------------------------------------------------------
def _dynamic(schema: dict[str, Any]) -> bool:
    return bool(schema.get("x-kubernetes-int-or-string")) or (
        bool(schema.get("x-kubernetes-preserve-unknown-fields")) and not schema.get("properties"))


def sample(schema: Any, resource: bool = False) -> Any:
    """A CEL value of the node's declared type (as ``validator.to_cel`` would build it), or ``_OMIT``."""
    if not isinstance(schema, dict) or _dynamic(schema):
        return _OMIT
    if resource or schema.get("x-kubernetes-embedded-resource"):
        schema = _embedded(schema)
    kind = schema.get("type")
    enum = schema.get("enum")
    first = enum[0] if isinstance(enum, list) and enum else None
    if kind == "string":
        fmt = schema.get("format")
        if fmt in TYPED_FORMATS:
            return to_typed(_TYPED_SAMPLES[str(fmt)], str(fmt))
        return first if isinstance(first, str) else "a"
    if kind == "integer":
        return first if isinstance(first, int) and not isinstance(first, bool) else 1
    if kind == "number":
        return float(first) if isinstance(first, (int, float)) and not isinstance(first, bool) else 1.0
    if kind == "boolean":
        return True
    if kind == "array":
        item = sample(schema.get("items"))
        return [] if item is _OMIT else [item]
    if kind == "object":
        props = schema.get("properties")
        if props:
            values = {escape(k): sample(v) for k, v in props.items()}
            return {k: v for k, v in values.items() if v is not _OMIT}
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            value = sample(extra)
            return {} if value is _OMIT else {"a": value}
    return _OMIT


# -- equality between a path and a literal ----------------------------------------------------------------------------
def _literal_type(kind: str, text: str) -> str | None:
    if kind == "str":
        prefix = _STRING_PREFIX.match(text)
        return "bytes" if prefix is not None and "b" in prefix.group(0).lower() else "string"
    if kind == "num":
        if text[-1] in "uU":
            return "uint"
        if not text.lower().startswith("0x") and any(c in text for c in ".eE"):
            return "double"
        return "int"
    if kind == "ident" and text in ("true", "false"):
        return "bool"
    return None


def _path_type(names: list[str], schema: dict[str, Any]) -> str | None:
    node: dict[str, Any] | None = schema
    for name in names:
        kind, owner = _field_owner(node)
        if kind == "map":
            extra = (node or {}).get("additionalProperties")
            node = extra if isinstance(extra, dict) else None
        elif kind == "object":
            prop = ((owner or {}).get("properties") or {}).get(unescape(name))
            node = _embedded(prop) if isinstance(prop, dict) and prop.get("x-kubernetes-embedded-resource") else prop
        else:
            return None
        if not isinstance(node, dict):
            return None
    if node is None or _dynamic(node) or node.get("nullable"):
        return None
    if node.get("type") == "string" and node.get("format") in _CEL_FORMAT_TYPES:
        return _CEL_FORMAT_TYPES[str(node.get("format"))]
    return _SCALARS.get(str(node.get("type")))


def _operand_left(toks: list[tuple[str, str, int]], end: int, root: dict[str, Any]) -> str | None:
    """The type of the operand ending at token ``end`` when it is a literal or a ``self`` path, else None."""
    if end < 0:
        return None
    kind, text, _ = toks[end]
    start, found = end, _literal_type(kind, text)
    if found is None and kind == "ident":
        names = [text]
        while start >= 2 and toks[start - 1][1] == "." and toks[start - 2][0] == "ident":
            start -= 2
            names.insert(0, toks[start][1])
        if names[0] not in ("self", "oldSelf"):
            return None
        found = _path_type(names[1:], root)
    elif found == "int" or found == "double":
        if start >= 1 and toks[start - 1][1] == "-":
            start -= 1
    if start > 0 and toks[start - 1][1] not in _BEFORE:
        return None
    return found


def _operand_right(toks: list[tuple[str, str, int]], begin: int, root: dict[str, Any]) -> str | None:
    if begin >= len(toks):
        return None
    if toks[begin][1] == "-" and begin + 1 < len(toks) and toks[begin + 1][0] == "num":
        begin += 1
    kind, text, _ = toks[begin]
    end, found = begin, _literal_type(kind, text)
    if found is None and kind == "ident" and text in ("self", "oldSelf"):
        names = []
        while end + 2 < len(toks) and toks[end + 1][1] == "." and toks[end + 2][0] == "ident":
            end += 2
            names.append(toks[end][1])
        found = _path_type(names, root)
    if end + 1 < len(toks) and toks[end + 1][1] not in _AFTER:
        return None
    return found


def equality_issues(src: str, schema: dict[str, Any], resource_root: bool) -> list[str]:
    """cel-go issues for ``==``/``!=`` whose operands (literals or ``self`` paths) have different types."""
    toks = _tokens(src)
    root = _embedded(schema) if resource_root else schema
    issues: list[str] = []
    for i in range(len(toks) - 1):
        first, second = toks[i][1], toks[i + 1][1]
        if second != "=" or first not in ("=", "!"):
            continue
        if first == "=" and i > 0 and toks[i - 1][1] in ("=", "<", ">", "!"):
            continue
        if i + 2 < len(toks) and toks[i + 2][1] == "=":
            continue
        left, right = _operand_left(toks, i - 1, root), _operand_right(toks, i + 2, root)
        if left is not None and right is not None and left != right:
            op = "_==_" if first == "=" else "_!=_"
            message = f"found no matching overload for '{op}' applied to '({left}, {right})'"
            issues.append(issue(src, toks[i][2], message))
    return issues


# -- running the rule on the sample -----------------------------------------------------------------------------------
def _overload_issue(src: str, err: Exception) -> str | None:
    """cel-go-like issue text when ``err`` is the interpreter's type error, else None (a runtime-only error)."""
    text = str(err)
    call = _CALL_ERROR.match(text)
    if call is not None:
        return f"ERROR: <input>: found no matching overload for '{call.group(1)}'\n | {src}"
    if not isinstance(err, TypeError):
        return None
    m = _UNSUPPORTED.match(text)
    if m is not None and m.group(2) in _ARITH:
        op, message = m.group(2), (f"found no matching overload for '{_ARITH[m.group(2)]}' applied to "
                                   f"'({m.group(1)}, {m.group(3)})'")
        places = [pos for kind, tok, pos in _tokens(src) if kind == "punct" and tok == op]
        return issue(src, places[0], message) if len(places) == 1 else f"ERROR: <input>: {message}\n | {src}"
    if text.startswith(("No such overload", "no such overload", "Unsupported operation")):
        return f"ERROR: <input>: found no matching overload\n | {src}"
    return None


def sample_problem(src: str, schema: dict[str, Any], resource_root: bool, want: type) -> tuple[str, str] | None:
    """("overload", issue) or ("result", "") when running ``src`` on a sample shows a type error, else None."""
    if "dyn(" in src.replace(" ", ""):
        return None
    value = sample(schema, resource_root)
    if value is _OMIT:
        return None
    ctx = getattr(_contexts, "ctx", None)
    if ctx is None:  # registering the library functions is the costly part: once per thread
        ctx = _contexts.ctx = celrust.Context(functions=FUNCTIONS)
    ctx.add_variable("self", value)
    ctx.add_variable("oldSelf", value)
    try:
        result = celrust.compile(src).execute(ctx)
    except Exception as e:  # the interpreter raises assorted exception types
        found = _overload_issue(src, e)
        return None if found is None else ("overload", found)
    if not isinstance(result, want):
        return "result", ""
    return None
