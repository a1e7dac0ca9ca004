"""A subresource served as another kind, as admission and validation see its writes.

kube's scale REST storage (``ScaleREST.Update`` with ``scaleUpdatedObjectInfo``) writes the parent
object but runs the request's change and the admission plugins on an ``autoscaling/v1`` Scale built
from it: mutating admission sees the new and old Scale, the Scale it returns is validated and its
replicas copied to the parent, and validating admission sees the Scales of the new and old parent.
``SubresourceView`` is that mapping, handed to ``Store.guaranteed_update``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SubresourceView:
    """How one subresource is seen: its name and kind, and the two conversions."""

    subresource: str
    #: The view's kind: (group, version, kind), e.g. ("autoscaling", "v1", "Scale").
    gvk: tuple[str, str, str]
    #: The stored (parent) object -> the view.
    to_view: Callable[[dict[str, Any]], dict[str, Any]]
    #: (a private copy of the stored object, the admitted view) -> the new parent object; raises an
    #: APIError when the view is invalid.
    to_parent: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]
