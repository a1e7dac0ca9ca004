"""µs per ConfigMap create in the ValidatingAdmissionPolicy plugin, in process, old tree ÷ this tree.

bench/bench.py's VAP line (issue 13: creates/s with one policy of three CEL rules ÷ none) pays for
the plugin's work on each create inside core-api; this measures only that work, away from HTTP and
etcd: bench.py's policy (``VAP_RULES``, ``matchConstraints`` on configmaps) and binding (a
``namespaceSelector`` on the bench namespace) from an in-memory source, and ``validate`` of the
admission record core-api builds for one bench ConfigMap create (``configmap(name, 200)`` as
stored: uid, creationTimestamp, managedFields), a fresh record per call as each request has.
The plugin asks ``StoreEquivalents`` (core-api's; this tree's for both trees) over stand-ins for
core-api's stores (``--stores``).

Given an old tree (``git archive <commit> libs ... | tar -x -C DIR``), both trees' ``genericapi``
are imported into this one process (the old one first, its modules then set aside) and timed in
alternating rounds, so load on the machine hits both alike; the ratio old/new is the figure.

    .venv/bin/python bench/vap_eval_bench.py [OLD_TREE] [--rounds R] [--n N] [--profile]

``--profile`` prints cProfile's top functions for this tree's plugin instead.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib
import pstats
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from genericapi.admission.equivalents import StoreEquivalents  # this tree's, for both (not under test)

from bench import VAP_RULES, configmap

NS = "bench-vap"
POLICY = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
          "metadata": {"name": "bench-three-rules", "uid": "6f0c1d1e-0000-4000-8000-000000000001", "generation": 1},
          "spec": {"failurePolicy": "Fail", "validations": VAP_RULES, "matchConstraints": {"resourceRules": [
              {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
               "resources": ["configmaps"]}]}}}
BINDING = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
           "metadata": {"name": "bench-three-rules", "uid": "6f0c1d1e-0000-4000-8000-000000000002"},
           "spec": {"policyName": "bench-three-rules", "validationActions": ["Deny"], "matchResources": {
               "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}}}}}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": NS, "uid": "6f0c1d1e-0000-4000-8000-000000000003", "resourceVersion": "12",
                          "creationTimestamp": "2026-11-28T10:00:00Z",
                          "labels": {"kubernetes.io/metadata.name": NS}},
             "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


class Source:
    """The watch caches' view: one policy, one binding, the bench namespace, no params."""

    def revision(self) -> Any:
        return 1

    def policies(self) -> list[dict[str, Any]]:
        return [POLICY]

    def bindings(self) -> list[dict[str, Any]]:
        return [BINDING]

    def namespace(self, name: str) -> dict[str, Any] | None:
        return NAMESPACE if name == NS else None

    def param_store(self, api_version: str, kind: str) -> Any:
        return None


def fake_stores(n: int) -> list[Any]:
    """What ``StoreEquivalents`` reads of core-api's stores (its key prefix, group, version, plural,
    kind): configmaps and ``n - 1`` others, one resource each."""
    stores = [SimpleNamespace(key_prefix="/registry/configmaps",
                              info=SimpleNamespace(group="", version="v1", plural="configmaps", kind="ConfigMap"))]
    for i in range(n - 1):
        stores.append(SimpleNamespace(key_prefix=f"/registry/r{i}",
                                      info=SimpleNamespace(group="g", version="v1", plural=f"r{i}", kind=f"R{i}")))
    return stores


def stored_configmap(i: int) -> dict[str, Any]:
    """The object admission sees for bench.py's ConfigMap create (defaults and metadata filled in)."""
    obj = configmap(f"v1-{i:06d}", 200)
    meta = obj["metadata"]
    meta.update({"namespace": NS, "uid": f"0a1b2c3d-0000-4000-8000-{i:012d}",
                 "creationTimestamp": "2026-11-28T11:00:00Z",
                 "managedFields": [{"manager": "python-aiohttp", "operation": "Update", "apiVersion": "v1",
                                    "time": "2026-11-28T11:00:00Z", "fieldsType": "FieldsV1",
                                    "fieldsV1": {"f:data": {".": {}, "f:v": {}}}}]})
    return obj


def _forget_genericapi() -> None:
    for name in [n for n in sys.modules if n == "genericapi" or n.startswith("genericapi.")]:
        del sys.modules[name]


class Tree:
    """One tree's plugin and record constructor, imported under its own ``genericapi``."""

    def __init__(self, root: Path | None, stores: int) -> None:
        saved = sys.path[:]
        if root is not None:
            sys.path.insert(0, str(root / "libs" / "genericapi"))
            _forget_genericapi()  # bench.py's imports loaded this tree's
        try:
            adm = importlib.import_module("genericapi.apimachinery.admission")
            plugin = importlib.import_module("genericapi.apimachinery.policy.plugin")
            user = importlib.import_module("genericapi.apimachinery.user")
            importlib.import_module("genericapi.apimachinery.cel.admission")
        finally:
            sys.path[:] = saved
        if root is not None:  # set the old tree's modules aside: the next import is this tree's
            assert str(root) in str(plugin.__file__), plugin.__file__
            _forget_genericapi()
        self.label = "old" if root is not None else "new"
        self.adm = adm
        self.user = user.UserInfo("system:admin", ("system:masters", "system:authenticated"))
        listed = fake_stores(stores)
        self.plugin = plugin.ValidatingAdmissionPolicyPlugin(Source(), None,
                                                             StoreEquivalents(lambda: listed))

    def attrs(self, i: int) -> Any:
        obj = stored_configmap(i)
        options = {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        return self.adm.Attributes("CREATE", "", "v1", "ConfigMap", "configmaps", "", NS, obj["metadata"]["name"],
                                   obj, None, self.user, False, options)

    async def run(self, n: int) -> float:
        """CPU µs (this thread's) per validate over ``n`` fresh records, built before the clock starts."""
        records = [self.attrs(i) for i in range(n)]
        validate = self.plugin.validate
        start = time.thread_time()
        for a in records:
            await validate(a)
        return (time.thread_time() - start) / n * 1e6


async def check_denies(tree: Tree) -> str:
    """The probe bench.py waits for (a forbidden label) must be denied, by both trees alike."""
    a = tree.attrs(0)
    a.obj["metadata"]["labels"] = {"forbidden": "yes"}
    try:
        await tree.plugin.validate(a)
    except Exception as e:
        return str(e)
    raise AssertionError(f"{tree.label} tree admitted the forbidden label")


async def main_async(args: argparse.Namespace, trees: list[Tree]) -> None:
    texts = {t.label: await check_denies(t) for t in trees}
    assert len(set(texts.values())) == 1, texts
    for t in trees:
        await t.run(200)  # compile the policy, warm the contexts
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        await trees[-1].run(args.n)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return
    samples: dict[str, list[float]] = {t.label: [] for t in trees}
    for r in range(args.rounds):
        for t in trees if r % 2 == 0 else reversed(trees):
            samples[t.label].append(await t.run(args.n))
    for label, xs in samples.items():
        print(f"{label}: median {statistics.median(xs):.1f} µs per create, min {min(xs):.1f} "
              f"({len(xs)} rounds of {args.n})")
    if len(trees) == 2:
        old, new = statistics.median(samples["old"]), statistics.median(samples["new"])
        print(f"old/new: {old / new:.2f} (medians), {min(samples['old']) / min(samples['new']):.2f} (minimums)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old", nargs="?", help="an old tree (git archive of libs ...) to compare with")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--stores", type=int, default=70, help="core-api's store count, for StoreEquivalents")
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    trees = [Tree(Path(args.old).resolve(), args.stores)] if args.old else []
    trees.append(Tree(None, args.stores))
    asyncio.run(main_async(args, trees))


if __name__ == "__main__":
    main()
