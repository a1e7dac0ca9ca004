"""CPU of the managedFields bookkeeping of one create, in-process, per kind.

    .venv/bin/python bench/managedfields_bench.py [--rounds N]

Throughput through the chain on this shared 2-core machine moves by more than the bookkeeping
costs, so the bookkeeping is timed on its own: what core-api's store runs for a create with a
field manager (the snapshot before admission, the defaulted object kube's field manager sees, the
field manager's update against the kind's empty Go object), on the bench's ConfigMap, its 2 KiB
Deployment and a small Pod, minus the same create without it (copy, defaulting). CPU time
(``time.process_time``), best of several rounds; compare runs of two trees on the same machine.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "services" / "core-api"))

from coreapi.catalog import find_resource  # noqa: E402
from coreapi.strategies import strategy_for  # noqa: E402
from genericapi.apimachinery.schemas import SchemaCatalog  # noqa: E402
from genericapi.registry.fieldtracking import FieldTracker, Writer  # noqa: E402

ENV = [{"name": f"SETTING_{i:02d}", "value": f"value-{i:02d}-" + "v" * 24} for i in range(24)]
OBJECTS: dict[tuple[str, str, str], dict[str, Any]] = {
    ("", "v1", "configmaps"): {"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "c000001", "namespace": "bench"}, "data": {"v": "x" * 200}},
    ("apps", "v1", "deployments"): {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "bench", "labels": {"app": "d"}, "annotations": {"bench/rev": "1"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx:1.25", "env": ENV,
                                                       "ports": [{"containerPort": 80}]}]}}}},
    ("", "v1", "pods"): {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "bench"},
                         "spec": {"containers": [{"name": "a", "image": "nginx", "ports": [{"containerPort": 80}]}]}},
}


def best_us(work: Callable[[], Any], n: int, rounds: int) -> float:
    work()
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(n):
            work()
        best = min(best, (time.process_time() - start) / n * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    schemas = SchemaCatalog.load("1.33")
    writer = Writer("bench")
    for (group, version, plural), obj in OBJECTS.items():
        info = find_resource(group, version, plural)
        assert info is not None
        strategy = strategy_for(info, schemas)
        tracker = FieldTracker(strategy)

        def plain(obj: dict[str, Any] = obj, strategy: Any = strategy) -> dict[str, Any]:
            out = copy.deepcopy(obj)
            strategy.prepare_for_create(out)
            strategy.default(out)
            out["metadata"].update({"uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z"})
            return out

        def tracked(obj: dict[str, Any] = obj, strategy: Any = strategy, tracker: FieldTracker = tracker) -> None:
            out = copy.deepcopy(obj)
            snapshot = tracker.before_admission(out, writer)
            observed = snapshot.added(out) if snapshot is not None else None
            strategy.prepare_for_create(out)
            strategy.default(out)
            out["metadata"].update({"uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z"})
            tracker.track(None, out, writer, admitted=observed)
            assert out["metadata"]["managedFields"]

        n = 2000 if plural == "configmaps" else 300
        base, with_fields = best_us(plain, n, args.rounds), best_us(tracked, n, args.rounds)
        print(f"{info.kind}: create {base:.0f} us without managedFields, {with_fields:.0f} us with: "
              f"bookkeeping {with_fields - base:.0f} us")


if __name__ == "__main__":
    main()
