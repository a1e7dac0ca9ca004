"""Static checks cel-go's type checker makes that the interpreter does not: names and fields.

``common-expression-language`` parses (with cel-go's syntax error texts) but does not type-check,
so a rule calling an unknown function or reading a field the schema does not declare would only
fail when an object is written. kube-apiserver rejects such rules when the CRD is written, with
``ERROR: <input>:L:C: undeclared reference to 'f' (in container '')`` or ``undefined field 'x'``;
this module finds those two cases by scanning the rule's tokens against the schema. It is not a
full checker: overload and result-type errors (``found no matching overload``, "must evaluate to
a bool") are not found statically and surface when the rule runs.
"""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(
    r"""(?P<str>[rRbB]{0,2}(?:'''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))"""
    r"""|(?P<num>\d+\.?\d*(?:[eE][+-]?\d+)?[uU]?|0[xX][0-9a-fA-F]+[uU]?)"""
    r"""|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"""
    r"""|(?P<punct>\S)""",
    re.S,
)
_MACROS_BINDING = frozenset({"all", "exists", "exists_one", "map", "filter"})
_KEYWORDS = frozenset({"true", "false", "null", "in"})
_RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
                       "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void",
                       "while"})


def _tokens(src: str) -> list[tuple[str, str, int]]:
    out = []
    for m in _TOKEN.finditer(src):
        kind = m.lastgroup or "punct"
        out.append((kind, m.group(0), m.start()))
    return out


def issue(src: str, offset: int, message: str) -> str:
    """One cel-go issue: ``ERROR: <input>:line:col: msg`` plus the source line and a caret."""
    line_no = src.count("\n", 0, offset) + 1
    line_start = src.rfind("\n", 0, offset) + 1
    line_end = src.find("\n", offset)
    line = src[line_start:] if line_end < 0 else src[line_start:line_end]
    col = offset - line_start
    return f"ERROR: <input>:{line_no}:{col + 1}: {message}\n | {line}\n | {'.' * col}^"


def unescape(name: str) -> str:
    """A CEL field name back to the property it stands for (``__dash__`` -> ``-``, ``__if__`` -> ``if``)."""
    if name.startswith("__") and name.endswith("__") and name[2:-2] in _RESERVED:
        return name[2:-2]
    return (name.replace("__underscores__", "\x00").replace("__dash__", "-").replace("__dot__", ".")
            .replace("__slash__", "/").replace("\x00", "__"))


def escape(name: str) -> str:
    """A property name as a CEL field name (``my-field`` -> ``my__dash__field``, ``if`` -> ``__if__``)."""
    if name in _RESERVED:
        return f"__{name}__"
    return (name.replace("__", "__underscores__").replace(".", "__dot__").replace("-", "__dash__")
            .replace("/", "__slash__"))


def _field_owner(schema: dict[str, Any] | None) -> tuple[str, dict[str, Any] | None]:
    """How a node answers ``.field``: ('object', props), ('map', None), or ('stop', None) if unknown to us."""
    if schema is None:
        return "stop", None
    if schema.get("x-kubernetes-int-or-string") or schema.get("x-kubernetes-preserve-unknown-fields"):
        return "stop", None
    if schema.get("type") == "object":
        if "properties" in schema or schema.get("x-kubernetes-embedded-resource"):
            return "object", schema
        return ("map", None) if "additionalProperties" in schema else ("stop", None)
    return "stop", None


def _embedded(schema: dict[str, Any]) -> dict[str, Any]:
    props = dict(schema.get("properties") or {})
    for name in ("apiVersion", "kind"):
        props.setdefault(name, {"type": "string"})
    props.setdefault("metadata", {"type": "object", "properties": {"name": {"type": "string"},
                                                                   "generateName": {"type": "string"}}})
    return {**schema, "properties": props}


def find_issues(src: str, schema: dict[str, Any], known_functions: frozenset[str], variables: frozenset[str],
                resource_root: bool) -> list[str]:
    """cel-go issues for undeclared names and undefined fields in ``src`` (already known to parse)."""
    toks = _tokens(src)
    bound: set[str] = set()
    for i, (kind, text, _) in enumerate(toks):
        if kind == "ident" and text in _MACROS_BINDING and i >= 1 and toks[i - 1][1] == "." \
                and i + 2 < len(toks) and toks[i + 1][1] == "(" and toks[i + 2][0] == "ident":
            bound.add(toks[i + 2][1])
    root = _embedded(schema) if resource_root else schema
    issues: list[str] = []
    for i, (kind, text, pos) in enumerate(toks):
        if kind != "ident" or text in _KEYWORDS:
            continue
        after_dot = i >= 1 and toks[i - 1][1] == "."
        is_call = i + 1 < len(toks) and toks[i + 1][1] == "("
        if after_dot:
            continue
        if is_call:
            if text not in known_functions:
                issues.append(issue(src, toks[i + 1][2], f"undeclared reference to '{text}' (in container '')"))
            continue
        if text in variables:
            issues.extend(_field_issues(src, toks, i, root))
        elif text not in bound and text not in known_functions:
            issues.append(issue(src, pos, f"undeclared reference to '{text}' (in container '')"))
    return issues


def _field_issues(src: str, toks: list[tuple[str, str, int]], i: int, schema: dict[str, Any]) -> list[str]:
    node: dict[str, Any] | None = schema
    j = i + 1
    while j + 1 < len(toks) and toks[j][1] == "." and toks[j + 1][0] == "ident":
        name = toks[j + 1][1]
        if j + 2 < len(toks) and toks[j + 2][1] == "(":
            return []  # a method call: the receiver's type decides, not checked here
        kind, owner = _field_owner(node)
        if kind == "stop":
            return []
        if kind == "map":
            node = node.get("additionalProperties") if isinstance(node, dict) else None
            node = node if isinstance(node, dict) else None
        else:
            props = (owner or {}).get("properties") or {}
            prop = props.get(unescape(name))
            if prop is None:
                return [issue(src, toks[j][2], f"undefined field '{name}'")]
            node = _embedded(prop) if prop.get("x-kubernetes-embedded-resource") else prop
        j += 2
    return []
