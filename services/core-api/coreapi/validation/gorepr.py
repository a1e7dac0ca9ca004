"""Go's ``%#v`` rendering of the struct values kube-apiserver puts in field errors.

``field.Invalid`` with a struct (a selector, an IntOrString, a label map) prints the value with
``%#v``, e.g. ``v1.LabelSelector{MatchLabels:map[string]string{"app":"web"}, ...}``; clients
show that text, so it is rebuilt here from the plain-dict objects
(the primitives — strings, slices, maps — come from ``genericapi.apimachinery.gofmt``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from genericapi.apimachinery.gofmt import GoRendered, go_quote, string_map, string_slice


def label_selector(selector: Mapping[str, Any] | None) -> GoRendered:
    """A ``metav1.LabelSelector`` as ``%#v`` prints it (``null`` for a nil selector)."""
    if selector is None:
        return GoRendered("null")
    labels = selector.get("matchLabels")
    expressions = selector.get("matchExpressions")
    if expressions is None:
        exprs = "[]v1.LabelSelectorRequirement(nil)"
    else:
        parts = []
        for expr in expressions:
            expr = expr if isinstance(expr, Mapping) else {}
            parts.append("v1.LabelSelectorRequirement{Key:" + go_quote(str(expr.get("key", "")))
                         + ", Operator:" + go_quote(str(expr.get("operator", "")))
                         + ", Values:" + string_slice(expr.get("values")) + "}")
        exprs = "[]v1.LabelSelectorRequirement{" + ", ".join(parts) + "}"
    return GoRendered(f"v1.LabelSelector{{MatchLabels:{string_map(labels)}, MatchExpressions:{exprs}}}")


def int_or_string(value: Any) -> GoRendered:
    """An ``intstr.IntOrString`` as ``%#v`` prints it."""
    if isinstance(value, str):
        return GoRendered(f"intstr.IntOrString{{Type:1, IntVal:0, StrVal:{go_quote(value)}}}")
    number = value if isinstance(value, int) and not isinstance(value, bool) else 0
    return GoRendered(f'intstr.IntOrString{{Type:0, IntVal:{number}, StrVal:""}}')


def labels_value(labels: Mapping[str, Any] | None) -> GoRendered:
    """A label map as the value of a field error."""
    return string_map(labels)


def statefulset_rolling_update(rolling: Any) -> GoRendered:
    """``apps.RollingUpdateStatefulSetStrategy`` (a set maxUnavailable is a pointer Go prints as an address)."""
    rolling = rolling if isinstance(rolling, Mapping) else {}
    partition = rolling.get("partition")
    partition = partition if isinstance(partition, int) else 0
    unavailable = "(*intstr.IntOrString)(nil)" if rolling.get("maxUnavailable") is None else \
        "(*intstr.IntOrString)(0xc000000000)"
    return GoRendered(f"apps.RollingUpdateStatefulSetStrategy{{Partition:{partition}, MaxUnavailable:{unavailable}}}")
