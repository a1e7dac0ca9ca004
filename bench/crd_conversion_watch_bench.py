"""Watchers of a webhook-converted custom resource: webhook calls and CPU per delivery, another tree ÷ this one.

Issue 15: a CRD with ``conversion: Webhook`` watched at a version other than the stored one. kube's
cacher converts each event once per version; a tree that converts per watcher makes one webhook
call (and one encode) per watcher per event. Two chains run side by side, one on another tree (made
as bench/tree_ab.py says; it goes first on ``PYTHONPATH``) and one on this working tree, each with
its own conversion webhook process (tests/support/conversion_webhook.py, which counts the
ConversionReviews it answers); rounds alternate between them. A round makes E updates at the
storage version of the one watched object and waits until every one of W watchers at the served
version has every event; reported per round: ConversionReviews per event and each process's CPU
(/proc) per delivery (E x W), the webhook's own CPU included.

    .venv/bin/python bench/crd_conversion_watch_bench.py DIR [--watchers 20] [--rounds 4] [--events 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from gc_bench import start
from proccpu import ProcCPU
from support.conversion_webhook import WebhookProcess, make_pki
from watch_fanout_bench import Fanout

from kubechain_cli.chain import Chain

GROUP = "bench-conv.example.com"
NS = "bench"  # the namespace Fanout.setup makes


def crd(hook: WebhookProcess) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"backends.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "names": {"kind": "Backend", "plural": "backends"},
                     "conversion": {"strategy": "Webhook", "webhook": {
                         "conversionReviewVersions": ["v1"],
                         "clientConfig": {"url": f"{hook.url}/convert", "caBundle": hook.pki.ca_bundle}}},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema},
                                  {"name": "v2", "served": True, "storage": False, "schema": schema}]}}


class BackendFanout(Fanout):
    """W watchers at v2 of one Backend (stored at v1, converted by the webhook)."""

    def __init__(self, chain: Chain, hook: WebhookProcess, watchers: int) -> None:
        super().__init__(chain, watchers)
        self.hook = hook

    async def create_watched(self) -> str:
        url = self.chain.server_url
        async with self.session.post(url + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                     json=crd(self.hook)) as r:
            assert r.status == 201, await r.text()
        base = f"{url}/apis/{GROUP}/v1/namespaces/{NS}/backends"
        for _ in range(300):  # until the CRD is served
            async with self.session.post(base, json={
                    "apiVersion": f"{GROUP}/v1", "kind": "Backend", "metadata": {"name": "watched"},
                    "spec": {"host": "h", "port": 0}}) as r:
                if r.status == 201:
                    rv = (await r.json())["metadata"]["resourceVersion"]
                    break
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError("the CRD was not served in 30 s")
        return (f"{url}/apis/{GROUP}/v2/namespaces/{NS}/backends?watch=1&resourceVersion={rv}"
                "&fieldSelector=metadata.name%3Dwatched")

    async def update(self) -> None:
        async with self.session.patch(
                f"{self.chain.server_url}/apis/{GROUP}/v1/namespaces/{NS}/backends/watched",
                json={"spec": {"port": self.value}},
                headers={"Content-Type": "application/merge-patch+json"}) as r:
            assert r.status == 200, await r.text()

    def check(self, line: bytes) -> None:
        event = json.loads(line)
        assert event["type"] == "MODIFIED" and event["object"]["apiVersion"] == f"{GROUP}/v2", event


def reviews(hook: WebhookProcess) -> int:
    return hook.calls()["reviews"].get("convert", 0)


async def main_async(old: Path, watchers: int, rounds: int, events: int) -> None:
    paths = [old / "libs" / "genericapi", *(p for p in sorted((old / "services").iterdir()) if p.is_dir()), old]
    modes = {"old": {"PYTHONPATH": os.pathsep.join(str(p) for p in paths)}, "new": {}}
    pki = make_pki(Path(tempfile.mkdtemp(prefix="bench-hook-")), ["localhost"])
    hooks: dict[str, WebhookProcess] = {}
    chains: dict[str, Chain] = {}
    fanouts: dict[str, BackendFanout] = {}
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    try:
        for mode, env in modes.items():
            hooks[mode] = WebhookProcess.start(pki)
            chains[mode] = start(mode, env)
        for mode, chain in chains.items():
            fanouts[mode] = BackendFanout(chain, hooks[mode], watchers)
            await fanouts[mode].setup()
        for round_ in range(rounds):
            for mode in (list(modes) if round_ % 2 == 0 else list(reversed(list(modes)))):
                procs = {**chains[mode].processes, "webhook": hooks[mode].process}
                cpu = ProcCPU(procs)
                before, calls = cpu.snapshot(), reviews(hooks[mode])
                await fanouts[mode].round(events)
                per = cpu.per_request(before, cpu.snapshot(), events * watchers)
                per["reviews/event"] = (reviews(hooks[mode]) - calls) / events
                results[mode].append(per)
                print(f"round {round_} {mode} load {os.getloadavg()[0]:4.1f}  "
                      + ", ".join(f"{k} {v:.1f}" for k, v in sorted(per.items())), flush=True)
    finally:
        for f in fanouts.values():
            await f.close()
        for chain in chains.values():
            chain.stop(timeout=5)
            shutil.rmtree(chain.data_dir, ignore_errors=True)
        for hook in hooks.values():
            hook.stop()
    print(f"{watchers} watchers at v2 (stored v1, webhook conversion), {events} events a round, {rounds} rounds; "
          "medians (ConversionReviews per event; µs of CPU per delivery):")
    for key in ("reviews/event", "extensions-api", "aggregator", "webhook"):
        a = statistics.median(r[key] for r in results["old"])
        b = statistics.median(r[key] for r in results["new"])
        print(f"  {key:15s} old {a:7.1f}  new {b:7.1f}  new/old {b / a:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path, help="the other tree (see above)")
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--events", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main_async(args.old.resolve(), args.watchers, args.rounds, args.events))


if __name__ == "__main__":
    main()
