"""Field selectors: the ``fieldSelector`` query parameter and what each kind lets clients select.

Parsing follows ``k8s.io/apimachinery/pkg/fields`` (``=``/``==``/``!=`` terms joined by commas,
backslash escaping in values). What a resource accepts is registered by the service serving it:
a built-in kind's ``FieldSupport`` by its strategy class in core-api (``coreapi.kinds.fieldsets``:
kube-apiserver's per-kind ``AddFieldLabelConversionFunc``s and ``GetAttrs``), a custom resource's
by the CRD controller (``selectableFields``); unregistered resources select on metadata alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from genericapi.apimachinery import errors


class FieldSelectorError(ValueError):
    """A selector that does not parse; ``str()`` is the Go error text."""


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    operator: str  # "=" (also for "=="), or "!="
    value: str

    def matches(self, values: Mapping[str, str]) -> bool:
        have = values.get(self.field, "")
        return have == self.value if self.operator == "=" else have != self.value

    def __str__(self) -> str:
        return f"{self.field}{self.operator}{escape_value(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """An AND of field terms, in the order the Go parser leaves them (sorted raw terms)."""

    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, values: Mapping[str, str]) -> bool:
        for requirement in self.requirements:
            if not requirement.matches(values):
                return False
        return True

    def requires_exact_match(self, name: str) -> str | None:
        for requirement in self.requirements:
            if requirement.field == name and requirement.operator == "=":
                return requirement.value
        return None

    def fields(self) -> list[str]:
        return [r.field for r in self.requirements]

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def escape_value(value: str) -> str:
    """``fields.EscapeValue``: backslash-escape ``\\``, ``,`` and ``=``."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_value(value: str) -> str:
    """``fields.UnescapeValue`` with its error texts."""
    if "\\" not in value and "," not in value and "=" not in value:
        return value
    out: list[str] = []
    in_slash = False
    for ch in value:
        if in_slash:
            if ch in "\\,=":
                out.append(ch)
            else:
                raise FieldSelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            in_slash = False
            continue
        if ch == "\\":
            in_slash = True
        elif ch in ",=":
            raise FieldSelectorError(f"invalid field selector: unescaped character in value: {ord(ch)}")
        else:
            out.append(ch)
    if in_slash:
        raise FieldSelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    if not text:
        return []
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, ch in enumerate(text):
        if in_slash:
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


_TERM_OPERATORS = ("!=", "==", "=")


def _split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in _TERM_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def parse_field_selector(text: str) -> FieldSelector:
    """Parse ``fieldSelector`` text (``fields.ParseSelector``)."""
    requirements: list[FieldRequirement] = []
    for term in sorted(_split_terms(text)):
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise FieldSelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        lhs, op, rhs = split
        requirements.append(FieldRequirement(lhs, "!=" if op == "!=" else "=", unescape_value(rhs)))
    return FieldSelector(tuple(requirements))


# --- per-resource support -------------------------------------------------------------------


def get_path(obj: Mapping[str, Any], *path: str) -> Any:
    current: Any = obj
    for key in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(key)
    return current


def text_at(obj: Mapping[str, Any], *path: str) -> str:
    value = get_path(obj, *path)
    return value if isinstance(value, str) else ("" if value is None else str(value))


def go_bool(value: Any) -> str:
    return "true" if value is True else "false"


def go_int(value: Any) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "0"


ValuesFunc = Callable[[Mapping[str, Any]], dict[str, str]]


@dataclass(frozen=True)
class FieldSupport:
    """What one resource accepts in a field selector and how its objects answer."""

    #: Labels the conversion func accepts, mapped to the label matched against object values.
    accepted: Mapping[str, str]
    #: Builds the rejection message for an unsupported label.
    reject: Callable[[str], str]
    #: Kind-specific selectable values (metadata.* are added by :func:`field_values`).
    values: ValuesFunc | None = None
    #: Whether ``metadata.namespace`` appears in the object's field set.
    namespaced: bool = True


def default_reject(label: str) -> str:
    return f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"'


def not_supported(label: str) -> str:
    return f"field label not supported: {label}"


def identity(*labels: str) -> dict[str, str]:
    return {label: label for label in labels}


_registered: dict[tuple[str, str], FieldSupport] = {}


def register_selectable_fields(group: str, resource: str, fields: Iterable[str], *,
                               namespaced: bool,
                               values: Callable[[Mapping[str, Any]], dict[str, str]] | None = None) -> None:
    """Declare a custom resource's selectable fields (CRD ``selectableFields``).

    Mirrors the apiextensions converter: ``metadata.name`` always, ``metadata.namespace`` only when
    namespaced, then the declared JSON paths (given without the leading dot); anything else is
    rejected with ``field label not supported``. Without ``values``, each declared path is read from
    the object and rendered like the CRD handler does (strings as-is, booleans/integers formatted).
    """
    declared = [f.lstrip(".") for f in fields]
    accepted = identity("metadata.name", *(["metadata.namespace"] if namespaced else []), *declared)

    def read_declared(obj: Mapping[str, Any]) -> dict[str, str]:
        out: dict[str, str] = {}
        for path in declared:
            value = get_path(obj, *path.split("."))
            if isinstance(value, bool):
                out[path] = go_bool(value)
            elif value is None:
                out[path] = ""
            else:
                out[path] = str(value)
        return out

    _registered[(group, resource)] = FieldSupport(accepted, not_supported, values or read_declared,
                                                  namespaced=namespaced)


def register_field_support(group: str, resource: str, support: FieldSupport) -> None:
    """Declare a built-in resource's field selectors (what its kind's strategy carries): the
    hook through which a service provides them, as ``register_selectable_fields`` does for a CRD."""
    _registered[(group, resource)] = support


def unregister_selectable_fields(group: str, resource: str) -> None:
    _registered.pop((group, resource), None)


def _support(group: str, resource: str) -> FieldSupport | None:
    return _registered.get((group, resource))


def convert_field_selector(group: str, version: str, resource: str, selector: FieldSelector) -> FieldSelector:
    """Run the kind's field-label conversion over every term (renames legacy labels).

    Raises ``errors.bad_request`` with kube-apiserver's message for the first unsupported label.
    """
    del version  # every served version of these kinds shares one conversion func
    support = _support(group, resource)
    converted: list[FieldRequirement] = []
    for requirement in selector.requirements:
        if support is None:
            if requirement.field not in ("metadata.name", "metadata.namespace"):
                raise errors.bad_request(default_reject(requirement.field))
            converted.append(requirement)
            continue
        target = support.accepted.get(requirement.field)
        if target is None:
            raise errors.bad_request(support.reject(requirement.field))
        if target != requirement.field:
            requirement = FieldRequirement(target, requirement.operator, requirement.value)
        converted.append(requirement)
    return FieldSelector(tuple(converted))


def check_supported(group: str, version: str, resource: str, selector: FieldSelector) -> None:
    """Raise ``errors.bad_request`` if any term names a field the resource does not support."""
    convert_field_selector(group, version, resource, selector)


def field_values(group: str, resource: str, obj: Mapping[str, Any], *,
                 namespaced: bool | None = None) -> dict[str, str]:
    """The selectable field set of ``obj`` (``GetAttrs``): missing values are ``""``.

    ``namespaced`` overrides whether ``metadata.namespace`` is part of the set; by default the
    registered support says (namespaced when none is registered).
    """
    support = _support(group, resource)
    metadata = obj.get("metadata") or {}
    values: dict[str, str] = {}
    if support is not None and support.values is not None:
        values.update(support.values(obj))
    values["metadata.name"] = str(metadata.get("name") or "")
    if namespaced is None:
        namespaced = support.namespaced if support is not None else True
    if namespaced:
        values["metadata.namespace"] = str(metadata.get("namespace") or "")
    return values
