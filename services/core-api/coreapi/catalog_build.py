"""How one built-in catalog row is made: names, storage version hash, scale paths.

The catalog tables (``catalog_core``, ``catalog_groups``) are long lists of rows; this module
keeps the rules every row shares in one place so the tables hold only facts:

* the singular name of every built-in kind is its kind lower-cased;
* the ``storageVersionHash`` discovery publishes is derived from the group/version/kind the
  resource is *stored* as, which is not always the version being served (events.k8s.io
  Events are stored as core v1 Events, both HPA versions as autoscaling/v2, ...);
* every built-in ``scale`` subresource reads the same three fields;
* a row names the strategy class of its kind (``coreapi.kinds``): the row and the kind's
  defaulting, validation, printing and field selectors are registered in one place.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field

from genericapi.apimachinery.resources import STANDARD_VERBS, ResourceInfo, SubresourceSpec

from coreapi.kinds.base import BuiltinStrategy

#: Key in ``ResourceInfo.extra`` holding the discovery ``storageVersionHash``.
STORAGE_VERSION_HASH_KEY = "storageVersionHash"
#: Keys in ``ResourceInfo.extra`` naming the group/version objects are stored (and hashed) as.
STORAGE_GROUP_KEY = "storageGroup"
STORAGE_VERSION_KEY = "storageVersion"

#: Where every built-in scalable kind keeps what its ``autoscaling/v1`` Scale shows:
#: ``spec.replicas``, ``status.replicas`` and the selector. The selector of a built-in kind lives
#: in ``.spec.selector`` as an object (a metav1.LabelSelector for apps kinds, a plain
#: label map for ReplicationController); the Scale's ``status.selector`` is that selector in
#: its string form (``app=web,tier in (a,b)``), as kube's ``scaleFrom<Kind>`` helpers do.
#: Custom resources differ: their labelSelectorPath already points at a string.
BUILTIN_SCALE_PATHS: tuple[str, str, str] = (".spec.replicas", ".status.replicas", ".spec.selector")

#: Verbs of a namespace: no ``deletecollection`` (kube never registers it for namespaces).
NAMESPACE_VERBS: tuple[str, ...] = tuple(v for v in STANDARD_VERBS if v != "deletecollection")


@dataclass(frozen=True, eq=False)
class BuiltinResource(ResourceInfo):
    """A catalog row: the resource as discovery describes it, and the strategy class of its kind.

    ``eq=False`` keeps ``ResourceInfo``'s equality and hash (the strategy is not part of them)."""

    strategy: type[BuiltinStrategy] = field(default=BuiltinStrategy, compare=False, hash=False, repr=False)


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """The opaque ``storageVersionHash`` kube-apiserver puts in discovery.

    Kube hashes the string ``<group>/<version>/<kind>`` of the version a resource is stored as
    (the core group is the empty string, so core Pods hash ``/v1/Pod``) with SHA-256 and
    publishes the standard base64 of the first 8 bytes of the digest.
    """
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode("ascii")


def builtin(
    group: str,
    version: str,
    kind: str,
    plural: str,
    *,
    namespaced: bool,
    short_names: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    verbs: tuple[str, ...] = STANDARD_VERBS,
    subresources: tuple[str, ...] = (),
    stored_as: tuple[str, str] | None = None,
    subresource_specs: tuple[SubresourceSpec, ...] = (),
    strategy: type[BuiltinStrategy] = BuiltinStrategy,
) -> BuiltinResource:
    """One built-in resource row.

    ``stored_as`` is the (group, version) the objects are persisted in when it is not the
    served group-version; it decides the storage version hash. ``strategy`` is the kind's class
    (``BuiltinStrategy`` for a kind with no rules of its own).
    """
    storage_group, storage_version = stored_as if stored_as is not None else (group, version)
    return BuiltinResource(
        group=group,
        version=version,
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        short_names=short_names,
        categories=categories,
        verbs=verbs,
        subresources=subresources,
        scale_paths=BUILTIN_SCALE_PATHS if "scale" in subresources else None,
        subresource_specs=subresource_specs,
        extra={
            STORAGE_VERSION_HASH_KEY: storage_version_hash(storage_group, storage_version, kind),
            STORAGE_GROUP_KEY: storage_group,
            STORAGE_VERSION_KEY: storage_version,
        },
        strategy=strategy,
    )
