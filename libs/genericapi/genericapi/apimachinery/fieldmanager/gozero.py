"""The empty Go object of a built-in kind as kube's field manager sees it on a create.

kube-apiserver records a create as an update from ``Creater.New(kind)`` (an empty Go struct,
not defaulted) to the decoded object. That empty struct is turned into JSON by apimachinery's
``DefaultUnstructuredConverter.ToUnstructured``, which writes a field unless it is
``omitempty`` *and* zero, and never counts a struct as zero. So the empty object has:

* every value (non-pointer) struct field, recursively (``metadata``, ``spec``, ``template``,
  ``strategy``, ``involvedObject`` ...), even when ``omitempty``;
* value structs with their own JSON form as that form (``metav1.Time``: ``null``, so
  ``creationTimestamp: null``; ``Quantity``: ``"0"``; ``IntOrString``: ``0``; ``Duration``: ``"0s"``);
* every field without ``omitempty`` at its zero value: ``null`` for pointers, slices and maps
  (``containers: null``, ``selector: null``), ``""``/``0``/``false`` for value scalars.

structured-merge-diff's comparison then marks as *added* exactly the fields that empty object
lacks, and a field added with fields below it is what the ``.`` entry of ``fieldsV1`` says
(``f:labels: {.: {}, f:app: {}}``, but ``f:containers`` without one). Which fields are value
fields comes from Kubernetes' protobuf descriptors (gogo's ``nullable=false``); which have no
``omitempty`` from the OpenAPI ``required`` lists (kube-openapi marks a field required exactly when
its JSON tag has no ``omitempty`` and it is not ``+optional``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Value structs that marshal themselves: their JSON when zero.
_CUSTOM_ZERO: dict[str, Any] = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": None,
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": None,
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration": "0s",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "0",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": 0,
    "k8s.io.apimachinery.pkg.runtime.RawExtension": None,
}

_REF = "#/$defs/"


@dataclass(frozen=True, slots=True)
class GoField:
    """One Go struct field as the protobuf descriptors show it."""

    value: bool
    #: full name of the message of a non-repeated message field ("" otherwise)
    message: str = ""


#: message full name -> field name -> facts
GoTypes = Mapping[str, Mapping[str, GoField]]


def proto_name(definition: str) -> str:
    """``io.k8s.api.apps.v1.Deployment`` -> ``k8s.io.api.apps.v1.Deployment``."""
    return "k8s.io." + definition[len("io.k8s."):] if definition.startswith("io.k8s.") else definition


def _ref(schema: Mapping[str, Any]) -> str:
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], Mapping):
            ref = all_of[0].get("$ref")
    if isinstance(ref, str):
        return ref[len(_REF):] if ref.startswith(_REF) else ref.rsplit("/", 1)[-1]
    return ""


def _scalar_zero(schema: Mapping[str, Any]) -> Any:
    declared = schema.get("type")
    types = {declared} if isinstance(declared, str) else set(declared or ())
    if "string" in types:
        return ""
    if "integer" in types or "number" in types:
        return 0
    if "boolean" in types:
        return False
    return None


def zero_object(definitions: Mapping[str, Any], definition: str, go: GoTypes) -> dict[str, Any] | None:
    """The empty object of ``definition`` as ``ToUnstructured`` writes it; None when the
    descriptors do not know the type."""
    if proto_name(definition) not in go:
        return None
    return _zero(definitions, definition, go, 0)


def _zero(definitions: Mapping[str, Any], definition: str, go: GoTypes, depth: int) -> dict[str, Any]:
    schema = definitions.get(definition)
    fields = go.get(proto_name(definition), {})
    out: dict[str, Any] = {}
    if not isinstance(schema, Mapping) or depth > 16:
        return out
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return out
    required = set(schema.get("required") or ())
    for name, prop in props.items():
        facts = fields.get(name)
        if facts is None or not isinstance(prop, Mapping):
            continue  # not a Go field (apiVersion and kind are the inline TypeMeta's, omitempty)
        if facts.value and facts.message:
            if facts.message in _CUSTOM_ZERO:
                out[name] = _CUSTOM_ZERO[facts.message]
                continue
            ref = _ref(prop)
            if ref:
                out[name] = _zero(definitions, ref, go, depth + 1)
                continue
        if name not in required:
            continue  # omitempty and zero
        if facts.value and not facts.message and "items" not in prop and "additionalProperties" not in prop:
            out[name] = _scalar_zero(prop)
        else:
            out[name] = None
    return out
