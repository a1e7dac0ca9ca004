"""What the API server does on DELETE when a garbage collector runs (kube's EnableGarbageCollection).

With a collector, DELETE adds the ``orphan`` / ``foregroundDeletion`` finalizers the request asks
for (``Store.gc_enabled``), and a DELETE that names no propagation uses the resource's default
policy (``DefaultGarbageCollectionPolicy``): background for every resource core-api serves, except
batch/v1 Jobs, which orphan their pods for backwards compatibility and say so in a warning. (The
other legacy orphaning group-versions, extensions/v1beta1 and apps/v1beta1-2, are not served in
1.33.) Every replica of core-api applies this, whichever one runs the collector.
"""

from __future__ import annotations

from collections.abc import Iterable

from genericapi.registry.store import Store

#: (group, version, plural) -> default propagation other than Background.
ORPHAN_BY_DEFAULT = frozenset({("batch", "v1", "jobs")})
JOB_DELETE_WARNING = ("child pods are preserved by default when jobs are deleted; set propagationPolicy=Background "
                      "to remove them or set propagationPolicy=Orphan to suppress this warning")


def enable(stores: Iterable[Store]) -> None:
    for store in stores:
        store.gc_enabled = True
        info = store.info
        if (info.group, info.version, info.plural) in ORPHAN_BY_DEFAULT:
            store.default_gc_policy = "Orphan"
            store.default_policy_warning = JOB_DELETE_WARNING
