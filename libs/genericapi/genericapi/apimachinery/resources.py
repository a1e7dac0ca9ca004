"""What a served resource is: the one description routes, discovery and OpenAPI derive from.

A resource is described once, here, and everything that varies by resource (URL paths,
discovery verbs, OpenAPI operations, Table columns) is derived from it so they cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Verbs of a resource whose store supports every standard operation.
STANDARD_VERBS: tuple[str, ...] = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)


@dataclass(frozen=True)
class SubresourceSpec:
    """A subresource served with verbs or a kind of its own (``pods/eviction``: create only,
    answering policy/v1 Eviction; ``pods/binding``: create, Binding). Subresources without one
    are ``status``-like: get/patch/update of the resource's own kind."""

    name: str
    verbs: tuple[str, ...]
    group: str = ""
    version: str = ""
    kind: str = ""
    #: Other apiVersions a body may carry (kube's GroupVersionAcceptor: policy/v1beta1 Evictions).
    also_accepts: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True)
class ResourceInfo:
    """One REST resource at one group-version, as discovery describes it."""

    group: str  # "" for the core (legacy) group
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = STANDARD_VERBS
    #: Subresources served beside the main resource: "status", "scale".
    subresources: tuple[str, ...] = ()
    #: For a "scale" subresource: JSON paths of spec replicas, status replicas, selector.
    scale_paths: tuple[str, str, str] | None = None
    #: Subresources (named in ``subresources``) with their own verbs or kind.
    subresource_specs: tuple[SubresourceSpec, ...] = ()
    #: Storage version hash published by discovery (opaque; stable per resource).
    extra: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def group_version(self) -> str:
        """``v1`` for the core group, else ``<group>/<version>``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        return self.group_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def qualified_resource(self) -> str:
        """``deployments.apps`` style name used in error messages (``pods`` for core)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def supports(self, verb: str) -> bool:
        return verb in self.verbs

    def subresource_spec(self, name: str) -> SubresourceSpec | None:
        """The spec of subresource ``name`` when it has its own verbs or kind."""
        return next((s for s in self.subresource_specs if s.name == name), None)
