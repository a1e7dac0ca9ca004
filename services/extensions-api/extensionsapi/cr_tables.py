"""Server-side Table columns of a custom resource from its ``additionalPrinterColumns``.

As apiextensions' table convertor: a ``Name`` column, then one column per printer column (or
``Age`` from ``.metadata.creationTimestamp`` when the version declares none). Cells are read with
the simple JSONPath kubectl users write (``.spec.x``, ``.a['b.c']``, ``[0]``, ``[*]``,
``[?(@.type=="Ready")]``); the first match is printed by the column's type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson
from genericapi.apimachinery.tables_common import META, Printer, RowResult, column, doc, name_column, since

_MISSING = object()
_TOKEN = re.compile(
    r"""\.\s*(?P<name>(?:\\.|[^.\[\\])+)"""            # .name (with \. escapes)
    r"""|\[\s*'(?P<quoted>[^']*)'\s*\]"""               # ['name']
    r"""|\[\s*"(?P<dquoted>[^"]*)"\s*\]"""              # ["name"]
    r"""|\[\s*(?P<index>-?\d+)\s*\]"""                  # [0]
    r"""|\[\s*(?P<star>\*)\s*\]"""                      # [*]
    r"""|\[\s*\?\(\s*@(?P<fpath>(?:\.[\w\-/]+)+)\s*(?P<op>==|!=)\s*(?P<fval>'[^']*'|"[^"]*"|[\w.\-]+)\s*\)\s*\]"""
)


class JSONPathError(ValueError):
    pass


def parse_path(path: str) -> list[tuple[str, Any]]:
    """Steps of a printer column's JSONPath; raises JSONPathError for anything else."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if text.startswith("$"):
        text = text[1:]
    steps: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise JSONPathError(f"unrecognized column definition {path!r}")
        pos = m.end()
        if m.group("name") is not None:
            steps.append(("key", m.group("name").replace("\\.", ".").strip()))
        elif m.group("quoted") is not None or m.group("dquoted") is not None:
            steps.append(("key", m.group("quoted") if m.group("quoted") is not None else m.group("dquoted")))
        elif m.group("index") is not None:
            steps.append(("index", int(m.group("index"))))
        elif m.group("star") is not None:
            steps.append(("all", None))
        else:
            raw = m.group("fval")
            value: Any = raw[1:-1] if raw[:1] in "'\"" else _literal(raw)
            steps.append(("filter", (m.group("fpath")[1:].split("."), m.group("op"), value)))
    return steps


def _literal(raw: str) -> Any:
    if raw in ("true", "false"):
        return raw == "true"
    try:
        return int(raw)
    except ValueError:
        try:
            return float(raw)
        except ValueError:
            return raw


def _follow(values: list[Any], step: tuple[str, Any]) -> list[Any]:
    kind, arg = step
    out: list[Any] = []
    for v in values:
        if kind == "key":
            if isinstance(v, Mapping) and arg in v:
                out.append(v[arg])
        elif kind == "index":
            if isinstance(v, list) and -len(v) <= arg < len(v):
                out.append(v[arg])
        elif kind == "all":
            if isinstance(v, list):
                out.extend(v)
            elif isinstance(v, Mapping):
                out.extend(v.values())
        else:
            fpath, op, want = arg
            for item in v if isinstance(v, list) else []:
                cur: Any = item
                for part in fpath:
                    cur = cur.get(part, _MISSING) if isinstance(cur, Mapping) else _MISSING
                if cur is _MISSING:
                    continue
                if (cur == want) == (op == "=="):
                    out.append(item)
    return out


def find_first(obj: Any, steps: list[tuple[str, Any]]) -> Any:
    values = [obj]
    for step in steps:
        values = _follow(values, step)
        if not values:
            return _MISSING
    return values[0]


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    if value is None:
        return "<nil>"
    return orjson.dumps(value).decode()


def _cell(type_: str, value: Any, now: datetime) -> Any:
    if value is _MISSING or value is None:
        return None
    if type_ == "string":
        return _as_text(value)
    if type_ == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if type_ == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if type_ == "boolean" and isinstance(value, bool):
        return value
    if type_ == "date" and isinstance(value, str):
        age = since(value, now)
        return "<invalid>" if age == "<unknown>" else age
    return None


_DEFAULT_COLUMNS = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
                     "description": doc(META, "creationTimestamp")}]


def printer_for(columns: list[dict[str, Any]] | None) -> Printer:
    """The Table printer of one served version (``columns``: its additionalPrinterColumns)."""
    declared = columns or _DEFAULT_COLUMNS
    headers = [name_column()]
    paths: list[tuple[str, list[tuple[str, Any]]]] = []
    for col in declared:
        json_path = str(col.get("jsonPath", ""))
        try:
            steps = parse_path(json_path)
        except JSONPathError:
            steps = []  # validation rejects these on CRD write; never print garbage
        desc = col.get("description") or f"Custom resource definition column (in JSONPath format): {json_path}"
        headers.append(column(str(col.get("name", "")), str(col.get("type", "")), str(desc),
                              priority=int(col.get("priority") or 0), format_=str(col.get("format") or "")))
        paths.append((str(col.get("type", "")), steps))

    def cells(obj: Mapping[str, Any], now: datetime) -> RowResult:
        row: list[Any] = [(obj.get("metadata") or {}).get("name", "")]
        for type_, steps in paths:
            row.append(_cell(type_, find_first(obj, steps) if steps else _MISSING, now))
        return RowResult(row)

    return Printer(tuple(headers), cells)
