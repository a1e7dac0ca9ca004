"""Label and field selector text -> a predicate over objects (what a list or watch filters by).

The handlers build the same predicate from query parameters; controllers calling a store
directly need it without the HTTP layer, from the pure parsers in ``apimachinery``.
"""

from __future__ import annotations

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery import fields, labels
from genericapi.registry.options import Predicate
from genericapi.registry.selection import selection_predicate


def selector_predicate(group: str, version: str, plural: str, namespaced: bool,
                       label_selector: str = "", field_selector: str = "") -> Predicate | None:
    """The predicate of both selectors (None when neither filters); bad syntax -> 400."""
    sel: labels.LabelSelector | None = None
    if label_selector:
        try:
            sel = labels.parse_label_selector(label_selector)
        except labels.LabelSelectorError as err:
            raise apierrors.bad_request(str(err)) from None
    fsel: fields.FieldSelector | None = None
    if field_selector:
        try:
            parsed = fields.parse_field_selector(field_selector)
        except fields.FieldSelectorError as err:
            raise apierrors.bad_request(str(err)) from None
        if parsed.requirements:
            fsel = fields.convert_field_selector(group, version, plural, parsed)
    return selection_predicate(group, plural, namespaced, sel, fsel)
