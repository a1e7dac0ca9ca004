"""Resource lists as kube-apiserver writes them back: rounded up to milli units, canonical form.

``SetDefaults_ResourceList`` rounds every quantity up to a multiple of 1m, and Go's JSON
encoding of a ``resource.Quantity`` writes its canonical string (``0.5`` -> ``500m``,
``1024Mi`` -> ``1Gi``, a number -> a string). A value that does not parse is left for validation.
"""

from __future__ import annotations

from typing import Any

from genericapi.apimachinery.quantity import Quantity, parse_quantity

_MILLI = -3


def parse(value: Any) -> Quantity | None:
    """The quantity a JSON string or number holds, or None when it does not parse."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        text = repr(value) if isinstance(value, float) else str(value)
    elif isinstance(value, str):
        text = value
    else:
        return None
    try:
        return parse_quantity(text)
    except ValueError:
        return None


def round_up_milli(q: Quantity) -> Quantity:
    """``Quantity.RoundUp(resource.Milli)``: values finer than 1m round away from zero."""
    if q.exponent >= _MILLI and not q.decimal_form:
        return q
    return Quantity(q.scaled_value(_MILLI), _MILLI, q.format, decimal_form=q.decimal_form)


def canonical(value: Any, *, milli: bool = False) -> Any:
    """The canonical string of a quantity value (rounded up to milli units when asked)."""
    q = parse(value)
    if q is None:
        return value
    return (round_up_milli(q) if milli else q).canonical()


def default_resource_list(parent: Any, key: str) -> None:
    """Round and canonicalise every quantity of the resource list ``parent[key]`` in place."""
    if not isinstance(parent, dict):
        return
    resources = parent.get(key)
    if not isinstance(resources, dict):
        return
    for name, value in resources.items():
        resources[name] = canonical(value, milli=True)
