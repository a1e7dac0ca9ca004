"""Label and field selectors as one predicate the watch cache evaluates without decoding objects.

kube's ``storage.SelectionPredicate``: a selector pair plus ``GetAttrs`` (an object's labels and
the selectable fields of its kind). The watch cache keeps each object as JSON bytes with the
attributes ``attrs_function`` computed when the object changed, and asks ``match_attrs`` first:
labels and kind fields come from those attributes, ``metadata.name`` and ``metadata.namespace``
from the key (``<prefix>/<namespace>/<name>``, or ``<prefix>/<name>`` when cluster-scoped). Called
with an object (a list read from etcd, a converted custom resource, anything without attributes)
it answers as before, from ``fields.field_values`` over the object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from genericapi.apimachinery import fields, labels
from genericapi.storage.cacher import NO_ATTRS, Attrs, AttrsFunc

_KEY_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


class SelectionPredicate:
    """Objects matching a label selector and a (converted) field selector; either may be None."""

    __slots__ = ("_extra", "_terms", "field", "group", "label", "namespaced", "plural")

    def __init__(self, group: str, plural: str, namespaced: bool, label: labels.LabelSelector | None,
                 field: fields.FieldSelector | None) -> None:
        self.group, self.plural, self.namespaced = group, plural, namespaced
        self.label = label
        self.field = field
        #: Fields the selector reads beyond those the key holds.
        self._extra = tuple(sorted({r.field for r in field.requirements} - _KEY_FIELDS)) if field else ()
        #: Each field term as (field, wants equal, value, b"/" + value): a name term is the key's end.
        self._terms = tuple((r.field, r.operator == "=", r.value, b"/" + r.value.encode())
                            for r in field.requirements) if field else ()

    def __call__(self, obj: dict[str, Any]) -> bool:
        if self.label is not None and not self.label.matches((obj.get("metadata") or {}).get("labels")):
            return False
        if self.field is not None:
            values = fields.field_values(self.group, self.plural, obj, namespaced=self.namespaced)
            return self.field.matches(values)
        return True

    def match_attrs(self, key: bytes, attrs: Attrs) -> bool | None:
        """The answer from the cache's attributes, or None when they lack a field (the cache then
        asks with the object). Evaluated per watcher per event: no dict is built, a name term is
        the key's last segment compared in place."""
        obj_labels, extra = attrs
        if self.label is not None and not self.label.matches(obj_labels):
            return False
        if not self._terms:
            return True
        if self._extra and (extra is None or any(f not in extra for f in self._extra)):
            return None
        for name, equal, value, tail in self._terms:
            if name == "metadata.name":
                # Names hold no "/": the key ends with "/<value>" exactly when the name is the value
                # (an empty value never matches a stored object's name).
                if key.endswith(tail) != equal:
                    return False
                continue
            if name == "metadata.namespace":
                if self.namespaced:
                    cut = key.rfind(b"/")
                    have = key[key.rfind(b"/", 0, cut) + 1:cut].decode()
                else:
                    have = ""
            else:
                have = extra.get(name, "") if extra is not None else ""
            if (have == value) != equal:
                return False
        return True


def selection_predicate(group: str, plural: str, namespaced: bool, label: labels.LabelSelector | None,
                        field: fields.FieldSelector | None) -> SelectionPredicate | None:
    """The predicate of both selectors, or None when neither filters (empty selectors select all)."""
    if label is not None and label.empty:
        label = None
    if field is not None and not field.requirements:
        field = None
    if label is None and field is None:
        return None
    return SelectionPredicate(group, plural, namespaced, label, field)


def attrs_function(group: str, plural: str) -> AttrsFunc:
    """kube's GetAttrs for a resource: the labels and the kind's selectable fields besides
    metadata.name/namespace (read when the object changes, so CRD selectableFields registered
    later show as missing and a predicate needing them decodes)."""

    def attrs(obj: dict[str, Any]) -> Attrs:
        meta = obj.get("metadata")
        obj_labels = meta.get("labels") if isinstance(meta, dict) else None
        if not isinstance(obj_labels, Mapping) or not obj_labels:
            obj_labels = None
        extra = fields.field_values(group, plural, obj, namespaced=False)
        del extra["metadata.name"]
        if obj_labels is None and not extra:
            return NO_ATTRS
        return obj_labels, extra or None

    return attrs
