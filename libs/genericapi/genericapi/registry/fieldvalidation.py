"""fieldValidation (Ignore, Warn, Strict) applied to a decoded object of a known kind.

Unknown fields are reported (Warn: ``Warning`` headers; Strict: 400) and then pruned, since a
typed Kubernetes object cannot hold them; fields of the wrong type fail decoding with 400 as
kube-apiserver's decoder does.
"""

from __future__ import annotations

import re
from typing import Any

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery import gowire, validation

from .strategy import Strategy


def check_fields(strategy: Strategy, obj: dict[str, Any], mode: str, duplicates: list[str]) -> list[str]:
    """Apply the policy; returns warnings to send. Prunes unknown fields from ``obj``."""
    return check_fields_clean(strategy, obj, mode, duplicates)[0]


def check_fields_clean(strategy: Strategy, obj: dict[str, Any], mode: str,
                       duplicates: list[str]) -> tuple[list[str], bool]:
    """``check_fields``, and whether the schema walk of ``obj`` found nothing at all: no decode
    problem, unknown field, value rewritten, required or enum error. A create then need not walk
    the object again to validate it if nothing but server-set metadata changes in between
    (``Store.create``, ``Strategy.validate_schema_clean``): the walk was ~35 us of a ConfigMap's."""
    info = strategy.info
    own = strategy.prune_unknown_fields(obj)
    if own is not None:
        # A kind with its own schema (a custom resource) pruned itself, as kube's CR decoder does;
        # its metadata still round-trips through ObjectMeta (kube's objectmeta.Coerce).
        unknown = own
        gowire.drop_empty_meta_collections(obj.get("metadata"))
        clean = False  # the strategy's own schema: nothing of the catalog's walk to reuse
    else:
        schemas = strategy.schemas
        if schemas is None:
            return [], False
        result = validation.validate_object(obj, schemas, info.group, info.version, info.kind)
        if result.decode_error:
            raise apierrors.bad_request(validation.decode_error_message(info.kind, info.version,
                                                                        result.decode_error))
        unknown = result.unknown_fields
        clean = not (unknown or result.canonical or result.errors)
        for path in unknown:
            prune_path(obj, path)
        result.apply_canonical()
    problems = []
    if mode != "Ignore" and (duplicates or unknown):
        problems = validation.strict_field_messages(obj, duplicates, unknown)
    if not problems:
        return [], clean
    if mode == "Strict":
        raise apierrors.bad_request(validation.decode_error_message(
            info.kind, info.version, validation.strict_decoding_error(problems)))
    return problems, clean


_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def prune_path(obj: Any, path: str) -> None:
    """Remove the field at a validation path such as ``spec.containers[0].foo``.

    A typed Kubernetes object cannot hold unknown fields: kube-apiserver's decoder drops them
    (after reporting them under Warn/Strict), so they must never reach storage.
    """
    tokens = [(m.group(1), m.group(2)) for m in _TOKEN.finditer(path)]
    cur = obj
    for i, (name, index) in enumerate(tokens):
        last = i == len(tokens) - 1
        if index is not None:
            idx = int(index)
            if not isinstance(cur, list) or idx >= len(cur):
                return
            if last:
                return
            cur = cur[idx]
        else:
            if not isinstance(cur, dict) or name not in cur:
                return
            if last:
                del cur[name]
                return
            cur = cur[name]
