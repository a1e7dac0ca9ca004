"""A rule's ``fieldPath`` (``.spec.foo['a.b']``): checked against the node's schema, rendered as a field path.

kube-apiserver accepts only field and map-key accessors that exist in the schema and reports the
first problem in the words below; the error for a failing rule then names ``<node>.<fieldPath>``.
"""

from __future__ import annotations

from typing import Any


class FieldPathError(ValueError):
    """Why a fieldPath is not valid (kube's wording)."""


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "'": "'", "\\": "\\"}


def _split(text: str) -> list[str]:
    tokens: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "'":
            j = i + 1
            while j < len(text) and not (text[j] == "'" and text[j - 1] != "\\"):
                j += 1
            tokens.append(text[i:j + 1])
            i = j + 1
        elif text[i] in ".[]":
            tokens.append(text[i])
            i += 1
        else:
            j = i
            while j < len(text) and text[j] not in ".[]":
                j += 1
            tokens.append(text[i:j])
            i = j
    return tokens


def _unquote(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            esc = _ESCAPES.get(body[i + 1])
            if esc is None:
                raise FieldPathError(f"invalid string literal: invalid escape char {body[i:i + 2]}")
            out.append(esc)
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def valid_field_path(text: str, schema: dict[str, Any]) -> str:
    """The field path ``text`` designates below ``schema`` (e.g. ``spec.x[key]``); raises FieldPathError."""
    tokens = _split(text)
    path = ""
    node: Any = schema
    i = 0

    def step(name: str, named: bool) -> None:
        nonlocal path, node
        if not named:
            path = f"{path}[{name}]"
            node = node.get("additionalProperties") if isinstance(node.get("additionalProperties"), dict) else {}
            return
        path = f"{path}.{name}" if path else name
        prop = (node.get("properties") or {}).get(name)
        if prop is None:
            raise FieldPathError("does not refer to a valid field")
        node = prop

    def named_kind() -> bool:
        if node.get("properties") is not None:
            return True
        if node.get("additionalProperties") is not None:
            return False
        raise FieldPathError("does not refer to a valid field")

    while i < len(tokens):
        tok = tokens[i]
        if tok == "[":
            if i + 1 >= len(tokens):
                raise FieldPathError("unexpected end of JSON path")
            quoted = tokens[i + 1]
            if len(quoted) < 2 or quoted[0] != "'" or quoted[-1] != "'":
                raise FieldPathError(f"expected single quoted string but got {quoted}")
            name = _unquote(quoted[1:-1])
            step(name, named_kind())
            if i + 2 >= len(tokens):
                raise FieldPathError("unexpected end of JSON path")
            if tokens[i + 2] != "]":
                raise FieldPathError(f"expected ] but got {tokens[i + 2]}")
            i += 3
        elif tok == ".":
            if i + 1 >= len(tokens):
                raise FieldPathError("unexpected end of JSON path")
            step(tokens[i + 1], named_kind())
            i += 2
        else:
            raise FieldPathError(f"expected [ or . but got: {tok}")
    return path
