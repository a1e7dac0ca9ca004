"""What one write looks like to admission: kube's ``admission.Attributes`` and plugin interfaces.

kube-apiserver runs every write through a chain of plugins: the mutating ones first (built-in
defaulting plugins, then MutatingAdmissionWebhook), then the validating ones (built-in checks,
ValidatingAdmissionPolicy, ValidatingAdmissionWebhook). Each plugin sees the same record of the
request. This module is that record and the two interfaces, as pure data so that the store
(registry), webhook dispatch and CEL policies all speak one vocabulary without importing each
other. A plugin denies by raising an ``APIError``; it adds response warnings and audit
annotations through the record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .user import UserInfo

#: kube's admission.Operation values.
CREATE = "CREATE"
UPDATE = "UPDATE"
DELETE = "DELETE"
CONNECT = "CONNECT"


@dataclass
class Attributes:
    """One request as admission sees it (kube's ``admission.Attributes``).

    ``obj`` is the object being written (``None`` for DELETE); mutating plugins change it in
    place. ``old_obj`` is the stored object for UPDATE and DELETE. ``kind`` and ``resource`` are
    what the request addressed (group, version, name); ``subresource`` is ``""`` for the object
    itself. ``options`` is the request's CreateOptions / UpdateOptions / DeleteOptions as a
    ``meta.k8s.io/v1`` object (what AdmissionReview carries).

    The kind is in the resource's group and version unless ``kind_group`` / ``kind_version`` say
    otherwise: a subresource served as another kind (``deployments/scale`` in ``apps/v1`` is an
    ``autoscaling/v1`` Scale) names it there, as kube's record does; ``gvk`` reads it."""

    operation: str
    group: str
    version: str
    kind: str
    resource: str
    subresource: str
    namespace: str
    name: str
    obj: dict[str, Any] | None
    old_obj: dict[str, Any] | None
    user: UserInfo
    dry_run: bool = False
    options: dict[str, Any] | None = None
    #: ``Warning`` headers the response carries (plugins append).
    warnings: list[str] = field(default_factory=list)
    #: Audit annotations added by plugins ("<plugin-or-webhook>/<key>": value).
    annotations: dict[str, str] = field(default_factory=dict)

    #: Annotations for events at a higher audit level only (kube's AddAnnotationWithLevel):
    #: key -> (level, value).
    leveled_annotations: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: The kind's group and version when they are not the resource's (None: the resource's).
    kind_group: str | None = None
    kind_version: str | None = None

    def gvk(self) -> tuple[str, str, str]:
        """(group, version, kind) of the objects in the record (kube's ``GetKind``)."""
        group = self.group if self.kind_group is None else self.kind_group
        version = self.version if self.kind_version is None else self.kind_version
        return group, version, self.kind

    def add_annotation(self, key: str, value: str) -> None:
        """kube's AddAnnotation: the first value for a key wins."""
        self.annotations.setdefault(key, value)

    def add_annotation_with_level(self, key: str, value: str, level: str) -> None:
        """kube's AddAnnotationWithLevel: only events at ``level`` or above show it."""
        if level == "Metadata":
            self.add_annotation(key, value)
        elif key not in self.annotations:
            self.leveled_annotations.setdefault(key, (level, value))


class MutatingPlugin(Protocol):
    """kube's ``admission.MutationInterface``: may change ``attrs.obj``; raises to deny."""

    def handles(self, operation: str) -> bool: ...

    async def admit(self, attrs: Attributes) -> None: ...


class ValidatingPlugin(Protocol):
    """kube's ``admission.ValidationInterface``: may not change anything; raises to deny."""

    def handles(self, operation: str) -> bool: ...

    async def validate(self, attrs: Attributes) -> None: ...
