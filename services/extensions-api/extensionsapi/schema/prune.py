"""Structural pruning: dropping fields a CRD schema does not specify, as apiextensions does.

Unknown fields are removed unless the node (or an ancestor up to the next specified node) has
``x-kubernetes-preserve-unknown-fields``. Embedded resources (and the object root) keep
``apiVersion``/``kind`` strings and a ``metadata`` object; ``metadata`` itself is reduced to the
fields ObjectMeta knows, as decoding into ObjectMeta does. The removed paths are returned
(``spec.foo``, ``spec.items[0].bar``, ``metadata.foo``) for ``fieldValidation=Warn|Strict``.
"""

from __future__ import annotations

from typing import Any

OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
    "ownerReferences", "finalizers", "managedFields",
})
_META_FIELDS = frozenset({"apiVersion", "kind", "metadata"})


def _key(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _Pruner:
    def __init__(self) -> None:
        self.pruned: list[str] = []

    def prune(self, value: Any, node: dict[str, Any] | None, path: str) -> None:
        if node is not None and node.get("x-kubernetes-preserve-unknown-fields"):
            self.skip(value, node, path)
            return
        if isinstance(value, dict):
            self._prune_map(value, node, path)
        elif isinstance(value, list):
            items = node.get("items") if node is not None else None
            for i, item in enumerate(value):
                self.prune(item, items if isinstance(items, dict) else None, f"{path}[{i}]")

    def _embedded_keep(self, node: dict[str, Any], key: str, value: Any, path: str) -> bool:
        if not node.get("x-kubernetes-embedded-resource"):
            return False
        if key in ("apiVersion", "kind"):
            return isinstance(value, str)
        if key == "metadata" and isinstance(value, dict):
            self.prune_object_meta(value, _key(path, "metadata"))
            return True
        return False

    def _prune_map(self, value: dict[str, Any], node: dict[str, Any] | None, path: str) -> None:
        if node is None:
            for key in list(value):
                self.pruned.append(_key(path, key))
                del value[key]
            return
        props = node.get("properties") or {}
        additional = node.get("additionalProperties")
        for key in list(value):
            sub = value[key]
            if self._embedded_keep(node, key, sub, path):
                continue
            if key in props:
                self.prune(sub, props[key], _key(path, key))
            elif additional is not None and additional is not False:
                self.prune(sub, additional if isinstance(additional, dict) else None, _key(path, key))
            else:
                if key not in _META_FIELDS or path:
                    self.pruned.append(_key(path, key))
                del value[key]

    def skip(self, value: Any, node: dict[str, Any], path: str) -> None:
        """Below x-kubernetes-preserve-unknown-fields: keep unknown keys, prune inside known ones."""
        if isinstance(value, dict):
            props = node.get("properties") or {}
            additional = node.get("additionalProperties")
            for key, sub in value.items():
                if self._embedded_keep(node, key, sub, path):
                    continue
                if key in props:
                    self.prune(sub, props[key], _key(path, key))
                elif isinstance(additional, dict):
                    self.prune(sub, additional, _key(path, key))
        elif isinstance(value, list):
            items = node.get("items")
            if isinstance(items, dict):
                for i, item in enumerate(value):
                    self.skip(item, items, f"{path}[{i}]")

    def prune_object_meta(self, meta: dict[str, Any], path: str) -> None:
        for key in list(meta):
            if key not in OBJECT_META_FIELDS:
                self.pruned.append(_key(path, key))
                del meta[key]


def prune(obj: dict[str, Any], schema: dict[str, Any], *, preserve_unknown_at_root: bool = False) -> list[str]:
    """Prune ``obj`` (a whole custom resource) in place; returns the removed paths."""
    root = dict(schema)
    root["x-kubernetes-embedded-resource"] = True
    if preserve_unknown_at_root:
        root["x-kubernetes-preserve-unknown-fields"] = True
    pruner = _Pruner()
    pruner.prune(obj, root, "")
    return pruner.pruned


def prune_value(value: Any, schema: dict[str, Any]) -> None:
    """Prune a value (e.g. a schema default) against its own node, not treating it as a resource."""
    _Pruner().prune(value, schema, "")
