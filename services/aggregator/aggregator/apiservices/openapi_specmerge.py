"""Merging a service-backed APIService's Swagger 2.0 document into the gateway's, as kube-openapi does.

kube-aggregator keeps of an aggregated server's ``/openapi/v2`` only the paths under
``/apis/<group>/<version>/`` and the definitions they use (``filter_by_path_prefixes``), then
merges it into the combined document ignoring path conflicts (the paths already there win, the
source's other paths are kept) and renaming definitions and parameters whose name is taken by a
different schema to ``<name>_v2``, ``<name>_v3``, ... with every ``$ref`` rewritten (an existing
``_vN`` with the same schema is reused). Definitions equal but for their
``x-kubernetes-group-version-kind`` list are merged into one, the GVK lists joined and sorted.

Documents are plain dicts; the source is never mutated (callers keep it as their cache).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

DEFINITION_REF = "#/definitions/"
PARAMETER_REF = "#/parameters/"
GVK_KEY = "x-kubernetes-group-version-kind"


def _refs(node: Any, out: set[str]) -> None:
    """Every ``$ref`` string in a JSON value."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            out.add(ref)
        for value in node.values():
            _refs(value, out)
    elif isinstance(node, list):
        for value in node:
            _refs(value, out)


def _section(doc: dict[str, Any], name: str) -> dict[str, Any]:
    value = doc.get(name)
    return value if isinstance(value, dict) else {}


def used_definitions(doc: dict[str, Any]) -> set[str]:
    """Definitions reachable from the document's paths (through parameters and other definitions)."""
    pending: set[str] = set()
    _refs(_section(doc, "paths"), pending)
    definitions, parameters = _section(doc, "definitions"), _section(doc, "parameters")
    seen: set[str] = set()
    used: set[str] = set()
    while pending:
        ref = pending.pop()
        if ref in seen:
            continue
        seen.add(ref)
        found: set[str] = set()
        if ref.startswith(DEFINITION_REF):
            name = ref[len(DEFINITION_REF):]
            used.add(name)
            _refs(definitions.get(name), found)
        elif ref.startswith(PARAMETER_REF):
            _refs(parameters.get(ref[len(PARAMETER_REF):]), found)
        pending |= found - seen
    return used


def filter_by_path_prefixes(doc: dict[str, Any], prefixes: Iterable[str]) -> dict[str, Any]:
    """The document with only the paths starting with one of ``prefixes``; a definition is dropped
    only if the dropped paths used it and the kept ones do not (kube's ``FilterSpecByPaths...``).
    The result shares unchanged values with ``doc``."""
    if not isinstance(doc.get("paths"), dict):
        return doc
    keep = tuple(prefixes)
    before = used_definitions(doc)
    out = {**doc, "paths": {p: item for p, item in doc["paths"].items() if p.startswith(keep)}}
    after = used_definitions(out)
    out["definitions"] = {k: v for k, v in _section(doc, "definitions").items() if k in after or k not in before}
    return out


def _rewrite_refs(node: Any, renames: dict[str, str]) -> Any:
    """A copy of ``node`` with the ``$ref`` values in ``renames`` replaced (unchanged parts shared)."""
    if isinstance(node, dict):
        changed = False
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value in renames:
                new: Any = renames[value]
            else:
                new = _rewrite_refs(value, renames)
            changed = changed or new is not value
            out[key] = new
        return out if changed else node
    if isinstance(node, list):
        items = [_rewrite_refs(v, renames) for v in node]
        return items if any(a is not b for a, b in zip(items, node, strict=True)) else node
    return node


def _without_gvk(schema: Any) -> Any:
    if isinstance(schema, dict) and GVK_KEY in schema:
        return {k: v for k, v in schema.items() if k != GVK_KEY}
    return schema


def equal_modulo_gvks(a: Any, b: Any) -> bool:
    """Schemas equal once their ``x-kubernetes-group-version-kind`` lists are ignored."""
    return bool(_without_gvk(a) == _without_gvk(b))


def merged_gvks(existing: dict[str, Any], other: dict[str, Any]) -> list[Any] | None:
    """``existing``'s GVK list joined with ``other``'s, sorted by ``group/version.kind``; None when
    ``other`` adds nothing."""
    mine, theirs = existing.get(GVK_KEY), other.get(GVK_KEY)
    if not isinstance(theirs, list) or not theirs:
        return None
    if not isinstance(mine, list):
        return list(theirs)

    def key(gvk: Any) -> str:
        g = gvk if isinstance(gvk, dict) else {}
        return f"{g.get('group')}/{g.get('version')}.{g.get('kind')}"

    seen = {key(g) for g in mine}
    extra = [g for g in theirs if key(g) not in seen]
    if not extra:
        return None
    return sorted([*mine, *extra], key=key)


def _renames(dest: dict[str, Any], source: dict[str, Any], same: Any) -> dict[str, str]:
    """Names in ``source`` taken in ``dest`` by a different value -> their new ``<name>_vN``."""
    used = set(dest)
    out: dict[str, str] = {}
    for name, value in source.items():
        if name not in dest or same(dest[name], value):
            continue
        i = 1
        new = name
        while new in dest:  # reuse an earlier rename holding the same value
            i += 1
            new = f"{name}_v{i}"
            if new in dest and same(dest[new], value):
                break
        else:
            while new in used or new in source:
                i += 1
                new = f"{name}_v{i}"
            used.add(new)
        out[name] = new
    return out


def merge_ignoring_path_conflicts(dest: dict[str, Any], source: dict[str, Any]) -> None:
    """Merge ``source`` into ``dest`` (mutated) as kube-openapi's
    ``MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters``."""
    src_paths = source.get("paths")
    if not isinstance(src_paths, dict):
        return  # a document without paths uses none of its definitions
    dest_paths = dest.setdefault("paths", {})
    keep = [p for p in src_paths if p not in dest_paths]
    if not keep:
        return
    if len(keep) != len(src_paths):
        source = filter_by_path_prefixes(source, keep)
    dest_defs = dest.setdefault("definitions", {})
    dest_params = _section(dest, "parameters")
    src_defs, src_params = _section(source, "definitions"), _section(source, "parameters")
    def_renames = _renames(dest_defs, src_defs, equal_modulo_gvks)
    param_renames = _renames(dest_params, src_params, lambda a, b: a == b)
    if def_renames or param_renames:
        refs = {DEFINITION_REF + k: DEFINITION_REF + v for k, v in def_renames.items()}
        refs.update({PARAMETER_REF + k: PARAMETER_REF + v for k, v in param_renames.items()})
        source = _rewrite_refs(source, refs)
        src_defs = {def_renames.get(k, k): v for k, v in _section(source, "definitions").items()}
        src_params = {param_renames.get(k, k): v for k, v in _section(source, "parameters").items()}
    for name, schema in src_defs.items():
        existing = dest_defs.get(name)
        if existing is None:
            dest_defs[name] = schema
        elif isinstance(existing, dict) and isinstance(schema, dict):
            gvks = merged_gvks(existing, schema)
            if gvks is not None:
                dest_defs[name] = {**existing, GVK_KEY: gvks}
    if src_params:
        params = dest.setdefault("parameters", {})
        for name, param in src_params.items():
            params.setdefault(name, param)
    for path in keep:
        dest_paths[path] = source["paths"][path]
