"""Strategic merge patch and JSON merge patch, with apimachinery's semantics.

``kubectl apply``/``edit``/``patch`` send strategic merge patches for built-in kinds: lists
declared with ``x-kubernetes-patch-strategy: merge`` merge element-wise by their
``x-kubernetes-patch-merge-key`` (containers by name, ports by containerPort), other lists are
replaced, and a few ``$``-directives steer deletion, replacement and ordering. This module is a
port of the server-side half of ``k8s.io/apimachinery/pkg/util/strategicpatch`` (applying a
patch, with ``MergeParallelList`` and ``IgnoreUnmatchedNulls`` on, as kube-apiserver runs it),
walking our JSON schemas instead of Go struct tags.

Custom resources: kube-apiserver does not accept strategic merge patch for them at all. The
PATCH handler answers ``415 UnsupportedMediaType`` (accepted types: JSON patch, merge patch,
apply patch) before any merging, so the handler must reject
``application/strategic-merge-patch+json`` for CRs itself. The schema-less mode here (merge maps
like JSON merge patch, replace lists) exists for parts of built-in objects that carry no patch
metadata, not as a way to serve SMP for CRs.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.schemas import PatchSchema
from genericapi.apimachinery.strategicpatch_errors import (
    BAD_PRIMITIVE_LIST_FORMAT,
    BAD_RETAIN_KEYS_FORMAT,
    BAD_SET_ELEMENT_ORDER_FORMAT,
    NO_LIST_OF_LISTS,
    StrategicMergePatchError,
    bad_arg_type,
    bad_patch_type,
    go_format,
    no_merge_key,
)

__all__ = [
    "PatchSchema",
    "StrategicMergePatchError",
    "json_merge_patch",
    "strategic_merge_patch",
]

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"
SET_ELEMENT_ORDER = "$setElementOrder"

_MAP = "map[string]interface {}"
_LIST = "[]interface {}"


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _go_equal(left: Any, right: Any) -> bool:
    """Go's ``==`` on interface values: equal only with the same dynamic type."""
    return type(left) is type(right) and left == right


def _kind(value: Any) -> type:
    return type(value)


def strategic_merge_patch(original: dict[str, Any], patch: dict[str, Any],
                          schema: PatchSchema) -> dict[str, Any]:
    """Apply ``patch`` to ``original`` (neither is modified) and return the merged object.

    Raises :class:`StrategicMergePatchError` (see its ``to_api_error``) for malformed patches.
    """
    if not isinstance(patch, dict):
        raise StrategicMergePatchError("invalid JSON document")
    return _merge_map(_copy(original) if original is not None else {}, _copy(patch), schema)


def _extract_key(key: str, prefix: str) -> str:
    head, sep, rest = key.partition("/")
    if not sep or head != prefix:
        if prefix == DELETE_FROM_PRIMITIVE_LIST:
            raise StrategicMergePatchError(BAD_PRIMITIVE_LIST_FORMAT)
        raise StrategicMergePatchError(BAD_SET_ELEMENT_ORDER_FORMAT)
    return rest


def _patch_strategy(strategies: tuple[str, ...]) -> str:
    """The non-retainKeys strategy of a field ("merge", "replace" or "")."""
    if len(strategies) == 0:
        return ""
    if len(strategies) == 1:
        return "" if strategies[0] == "retainKeys" else strategies[0]
    if len(strategies) == 2:
        if strategies[0] == "retainKeys":
            return strategies[1]
        if strategies[1] == "retainKeys":
            return strategies[0]
    raise StrategicMergePatchError(f"unexpected patch strategy: [{' '.join(strategies)}]")


def _discard_nulls(value: Any) -> Any:
    """New content taken from the patch keeps no null map values and no directives."""
    if isinstance(value, dict):
        return {k: _discard_nulls(v) for k, v in value.items()
                if v is not None and k != DIRECTIVE and k != RETAIN_KEYS
                and not k.startswith((SET_ELEMENT_ORDER + "/", DELETE_FROM_PRIMITIVE_LIST + "/"))}
    if isinstance(value, list):
        return [_discard_nulls(v) for v in value]
    return value


def _merge_map(original: dict[str, Any], patch: dict[str, Any], schema: PatchSchema) -> dict[str, Any]:
    if DIRECTIVE in patch:
        directive = patch[DIRECTIVE]
        if directive == "replace":
            del patch[DIRECTIVE]
            return patch
        if directive == "delete":
            return {}
        raise bad_patch_type(directive, patch)

    _apply_retain_keys(original, patch)
    _merge_ordered_lists(original, patch, schema)

    for key, patch_value in list(patch.items()):
        is_delete_list = False
        if key.startswith(DELETE_FROM_PRIMITIVE_LIST):
            key = _extract_key(key, DELETE_FROM_PRIMITIVE_LIST)
            is_delete_list = True

        if patch_value is None:
            original.pop(key, None)
            continue

        if key not in original:
            if not is_delete_list:
                original[key] = _discard_nulls(patch_value)
            continue

        current = original[key]
        if _kind(current) is not _kind(patch_value):
            if not is_delete_list:
                original[key] = _discard_nulls(patch_value)
            continue

        if isinstance(current, dict):
            child, meta = schema.field(key)
            strategy = _patch_strategy(meta.strategies)
            original[key] = patch_value if strategy == "replace" else _merge_map(current, patch_value, child)
        elif isinstance(current, list):
            child, meta = schema.field(key)
            strategy = _patch_strategy(meta.strategies)
            original[key] = _merge_list_field(current, patch_value, child, strategy, meta.merge_key,
                                              is_delete_list)
        else:
            original[key] = patch_value
    return original


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    if RETAIN_KEYS not in patch:
        return
    retain = patch.pop(RETAIN_KEYS)
    if not isinstance(retain, list):
        raise StrategicMergePatchError(BAD_RETAIN_KEYS_FORMAT)
    allowed = {k for k in retain if isinstance(k, str)}
    for key, value in patch.items():
        if value is None or key.startswith((DELETE_FROM_PRIMITIVE_LIST, SET_ELEMENT_ORDER)):
            continue
        if key not in allowed:
            raise StrategicMergePatchError(BAD_RETAIN_KEYS_FORMAT)
    for key in [k for k in original if k not in allowed]:
        del original[key]


def _merge_list_field(original: list[Any], patch: list[Any], schema: PatchSchema, strategy: str,
                      merge_key: str, is_delete_list: bool) -> list[Any]:
    if strategy == "merge":
        return _merge_list(original, patch, schema.items(), merge_key, is_delete_list)
    return patch


def _element_kind(*lists: list[Any]) -> type:
    previous: type | None = None
    for items in lists:
        for item in items:
            current = type(item)
            if previous is None:
                previous = current
                if current is list:
                    raise StrategicMergePatchError(NO_LIST_OF_LISTS)
            elif previous is not current:
                raise StrategicMergePatchError(
                    "list element types are not identical: " + go_format(list(lists)))
    if previous is None:
        raise StrategicMergePatchError("no elements in any of the given slices")
    return previous


def _merge_list(original: list[Any], patch: list[Any], item_schema: PatchSchema, merge_key: str,
                is_delete_list: bool) -> list[Any]:
    if not original and not patch:
        return original
    kind = _element_kind(original, patch)
    if kind is not dict:
        if is_delete_list:
            return [v for v in original if not any(_go_equal(v, d) for d in patch)]
        merged = _dedupe_scalars(original + patch)
    else:
        if not merge_key:
            raise StrategicMergePatchError("cannot merge lists without merge key for type struct")
        original, patch = _apply_list_directives(original, patch, merge_key)
        merged = _merge_by_key(original, patch, merge_key, item_schema)
    patch_items, server_only = _partition(merged, patch, merge_key)
    return _normalize_order(patch_items, server_only, patch, original, merge_key, kind)


def _dedupe_scalars(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if not any(_go_equal(value, seen) for seen in out):
            out.append(value)
    return out


def _apply_list_directives(original: list[Any], patch: list[Any],
                           merge_key: str) -> tuple[list[Any], list[Any]]:
    """Handle ``$patch`` elements: deletions by merge key and whole-list replacement."""
    plain: list[Any] = []
    replace = False
    for item in patch:
        if DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[DIRECTIVE]
        if directive == "delete":
            if merge_key not in item:
                raise no_merge_key(item, merge_key)
            wanted = item[merge_key]
            original = [o for o in original if not _has_key_value(o, merge_key, wanted)]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise StrategicMergePatchError("merging lists cannot yet be specified in the patch")
        else:
            raise bad_patch_type(directive, item)
    if replace:
        return plain, []
    return original, plain


def _has_key_value(item: Any, key: str, value: Any) -> bool:
    if not isinstance(item, dict):
        raise StrategicMergePatchError("value for key is not a map.")
    return key in item and _go_equal(item[key], value)


def _find_by_key(items: list[Any], key: str, value: Any) -> int:
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise StrategicMergePatchError(f"value for key {index} is not a map.")
        if key in item and _go_equal(item[key], value):
            return index
    return -1


def _merge_by_key(original: list[Any], patch: list[Any], merge_key: str,
                  item_schema: PatchSchema) -> list[Any]:
    merged = list(original)
    for item in patch:
        if merge_key not in item:
            raise no_merge_key(item, merge_key)
        index = _find_by_key(merged, merge_key, item[merge_key])
        if index >= 0:
            merged[index] = _merge_map(merged[index], item, item_schema)
        else:
            merged.append(_discard_nulls(item))
    return merged


def _identity(item: Any, merge_key: str) -> Any:
    return item.get(merge_key) if merge_key and isinstance(item, dict) else item


def _index_of(items: list[Any], item: Any, merge_key: str) -> int:
    wanted = _identity(item, merge_key)
    for index, candidate in enumerate(items):
        if _go_equal(_identity(candidate, merge_key), wanted):
            return index
    return -1


def _partition(merged: list[Any], order: list[Any], merge_key: str) -> tuple[list[Any], list[Any]]:
    in_patch: list[Any] = []
    server_only: list[Any] = []
    for item in merged:
        if merge_key:
            if not isinstance(item, dict):
                raise bad_arg_type(_MAP, item)
            if merge_key not in item:
                raise no_merge_key(item, merge_key)
        (in_patch if _index_of(order, item, merge_key) >= 0 else server_only).append(item)
    return in_patch, server_only


def _sort_by(items: list[Any], order: list[Any], merge_key: str, kind: type) -> list[Any]:
    to_delete: list[Any] = []
    if kind is dict:
        for item in [*items, *order]:
            if not isinstance(item, dict):
                raise bad_arg_type(_MAP, item)
            if merge_key not in item:
                raise no_merge_key(item, merge_key)
        to_delete = [i for i in items if i.get(DIRECTIVE) == "delete"]
        items = [i for i in items if i.get(DIRECTIVE) != "delete"]

    def position(item: Any) -> int:
        found = _index_of(order, item, merge_key)
        return found if found >= 0 else len(order)

    return sorted(items, key=position) + to_delete


def _normalize_order(patch_items: list[Any], server_only: list[Any], patch_order: list[Any],
                     server_order: list[Any], merge_key: str, kind: type) -> list[Any]:
    """Patch items in patch order, server-only items in live order, interleaved by live order."""
    patch_items = _sort_by(patch_items, patch_order, merge_key, kind)
    server_only = _sort_by(server_only, server_order, merge_key, kind)
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patch_items):
        if i >= len(server_only):
            out.append(patch_items[j])
            j += 1
        elif j >= len(patch_items):
            out.append(server_only[i])
            i += 1
        else:
            left = _index_of(server_order, server_only[i], merge_key)
            right = _index_of(server_order, patch_items[j], merge_key)
            if left >= 0 and right >= 0 and left < right:
                out.append(server_only[i])
                i += 1
            else:
                out.append(patch_items[j])
                j += 1
    return out


def _merge_ordered_lists(original: dict[str, Any], patch: dict[str, Any], schema: PatchSchema) -> None:
    """Process ``$setElementOrder/<field>`` directives together with their lists."""
    for key in [k for k in patch if k.startswith(SET_ELEMENT_ORDER)]:
        order = patch.pop(key)
        if not isinstance(order, list):
            raise bad_arg_type(_LIST, order)
        field = _extract_key(key, SET_ELEMENT_ORDER)
        found_original = field in original
        found_patch = field in patch
        original_list: list[Any] = []
        patch_list: list[Any] = []
        if found_original:
            if not isinstance(original[field], list):
                raise bad_arg_type(_LIST, original[field])
            original_list = original[field]
        if found_patch:
            if not isinstance(patch[field], list):
                raise bad_arg_type(_LIST, patch[field])
            patch_list = patch[field]
        child, meta = schema.field(field)
        strategy = _patch_strategy(meta.strategies)
        merge_key = meta.merge_key
        _check_order_consistent(patch_list, order, merge_key)

        if found_original and not found_patch:
            merged = original_list
        elif found_patch and not found_original:
            merged = patch_list
        elif found_original and found_patch:
            merged = _merge_list_field(original_list, patch_list, child, strategy, merge_key, False)
        else:
            continue
        patch_items, server_only = _partition(merged, order, merge_key)
        kind = _element_kind(original_list, patch_list)
        original[field] = _normalize_order(patch_items, server_only, order, original_list, merge_key, kind)
        patch.pop(field, None)


def _check_order_consistent(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    """Patch items must appear in ``$setElementOrder`` in the same relative order."""
    if not order or not patch_list:
        return
    if merge_key:
        for item in patch_list:
            if not isinstance(item, dict):
                raise bad_arg_type(_MAP, item)
        kept = [i for i in patch_list if i.get(DIRECTIVE) != "delete"]
    else:
        kept = patch_list
    p = s = 0
    while p < len(kept) and s < len(order):
        item = kept[p]
        if isinstance(item, dict) and DIRECTIVE in item:
            p += 1
            continue
        if merge_key:
            if not isinstance(order[s], dict):
                raise bad_arg_type(_MAP, order[s])
            if merge_key not in item:
                raise no_merge_key(item, merge_key)
            if merge_key not in order[s]:
                raise no_merge_key(order[s], merge_key)
            same = _go_equal(item[merge_key], order[s][merge_key])
        else:
            same = _go_equal(item, order[s])
        if same:
            p += 1
        s += 1
    if p < len(kept) and s >= len(order):
        raise StrategicMergePatchError(
            f"The order in patch list:\n{go_format(patch_list)}\n doesn't match "
            f"{SET_ELEMENT_ORDER} list:\n{go_format(order)}\n")


def json_merge_patch(original: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (``application/merge-patch+json``); inputs are not modified."""
    if not isinstance(patch, dict):
        return _copy(patch)
    # Each value is copied once (copying the whole original at every level was quadratic in depth).
    source: dict[str, Any] = original if isinstance(original, dict) else {}
    target: dict[str, Any] = {}
    for key, value in source.items():
        if key not in patch:
            target[key] = _copy(value)
        elif patch[key] is not None:
            target[key] = json_merge_patch(value, patch[key])
    for key, value in patch.items():
        if key not in source and value is not None:
            target[key] = json_merge_patch(None, value)
    return target
