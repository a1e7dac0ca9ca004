"""Defaults shared by several places of the core/v1 types: embedded object meta and the downward
API selectors (used by container env and by downwardAPI/projected volumes)."""

from __future__ import annotations

from .fields import JSON, default_str, ensure_obj
from .quantities import canonical


def default_embedded_meta(parent: JSON, key: str = "metadata") -> None:
    """A nested ObjectMeta as Go writes it: always present, a zero creationTimestamp as null
    (kube 1.33 still encodes a zero ``metav1.Time`` as ``null``)."""
    meta = ensure_obj(parent, key)
    if meta is not None and "creationTimestamp" not in meta:
        meta["creationTimestamp"] = None


def default_field_ref(ref: JSON | None) -> None:
    """An ObjectFieldSelector reads from ``v1`` unless it says otherwise."""
    if ref is not None:
        default_str(ref, "apiVersion", "v1")


def default_resource_field_ref(ref: JSON | None) -> None:
    """A ResourceFieldSelector's divisor is a non-pointer Quantity: Go writes ``"0"`` when unset."""
    if ref is not None:
        divisor = ref.get("divisor")
        ref["divisor"] = "0" if divisor is None else canonical(divisor)
