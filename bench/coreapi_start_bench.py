"""core-api's start alone, in-process (issue 15, cold start): CPU and wall seconds of each post-start
hook (the bootstrap, ``rbac/bootstrap-roles``, APF's configuration producer, ...) and of the whole
``GenericAPIServer.start``, on an empty etcd (cold) and again on the same etcd (warm: the defaults
exist and are reconciled). With ``--ab DIR`` each round runs once with another tree first on
``PYTHONPATH`` (as bench/tree_ab.py) and once with this one, alternating, so the ratio comes from
one run; ``--profile FILE`` writes a cProfile of the post-start hooks of this tree's cold start.

    .venv/bin/python bench/coreapi_start_bench.py [ROUNDS] [--ab DIR] [--profile FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from kubechain_cli.chain import _die_with_parent, etcd_binary, free_ports


def _start_etcd(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    client, peer = free_ports(2)
    url = f"http://127.0.0.1:{client}"
    proc = subprocess.Popen([
        etcd_binary(), "--name", "bench", "--data-dir", str(data / "etcd"), "--listen-client-urls", url,
        "--advertise-client-urls", url, "--listen-peer-urls", f"http://127.0.0.1:{peer}",
        "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
        "--initial-cluster", f"bench=http://127.0.0.1:{peer}", "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=_die_with_parent)  # a child killed by the parent's timeout takes its etcd along
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if json.loads(r.read()).get("health") == "true":
                    return proc, url
        except OSError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("etcd did not start")


def _label(hook: Any) -> str:
    for cell in getattr(hook, "__closure__", None) or ():
        value = cell.cell_contents
        if callable(value) and hasattr(value, "__qualname__"):
            return str(value.__qualname__)
    return str(getattr(hook, "__qualname__", repr(hook)))


async def _one_start(endpoint: str, profile: cProfile.Profile | None) -> dict[str, list[float]]:
    from coreapi.controllers.manager import ControllerOptions
    from coreapi.server import build_server
    from genericapi.server.apiserver import ServerConfig

    config = ServerConfig(name="core-api", etcd_endpoints=[endpoint], shutdown_delay=0.0)
    server = build_server(config, controllers=ControllerOptions(), authorization_mode="RBAC")
    spent: dict[str, list[float]] = {}

    def timed(label: str, hook: Any) -> Any:
        async def run(s: Any) -> None:
            cpu, wall = time.process_time(), time.monotonic()
            if profile is not None:
                profile.enable()
            try:
                await hook(s)
            finally:
                if profile is not None:
                    profile.disable()
            spent[label] = [time.process_time() - cpu, time.monotonic() - wall]
        return run

    server.post_start = [timed(_label(h), h) for h in server.post_start]
    cpu, wall = time.process_time(), time.monotonic()
    await server.start()
    spent["GenericAPIServer.start"] = [time.process_time() - cpu, time.monotonic() - wall]
    await server.stop()
    return spent


def child(profile_path: str) -> None:
    """One cold and one warm start on a fresh etcd; prints {kind: {label: [cpu, wall]}}."""
    data = Path(tempfile.mkdtemp(prefix="coreapi-start-"))
    proc, url = _start_etcd(data)
    try:
        out = {}
        for kind in ("cold", "warm"):
            profile = cProfile.Profile() if profile_path and kind == "cold" else None
            out[kind] = asyncio.run(_one_start(url, profile))
            if profile is not None:
                profile.dump_stats(profile_path)
        print(json.dumps(out))
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)


def _env(tree: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if tree is not None:
        paths = [tree / "libs" / "genericapi", *(p for p in sorted((tree / "services").iterdir()) if p.is_dir()),
                 tree]
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rounds", nargs="?", type=int, default=3)
    parser.add_argument("--ab", metavar="DIR", type=Path, help="another tree, alternating with this one")
    parser.add_argument("--profile", default="", help="cProfile of this tree's (last) cold start")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.profile)
        return
    trees: list[tuple[str, Path | None]] = [("old", args.ab.resolve()), ("new", None)] if args.ab else [("new", None)]
    results: dict[str, dict[str, dict[str, list[list[float]]]]] = {}
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        for name, tree in trees:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child"]
            if name == "new" and args.profile:
                cmd += ["--profile", args.profile]
            done = subprocess.run(cmd, env=_env(tree), capture_output=True, text=True, timeout=300,
                                  cwd=tempfile.gettempdir())
            if done.returncode != 0:
                raise RuntimeError(f"{name}: {done.stderr[-3000:]}")
            for kind, spent in json.loads(done.stdout.strip().splitlines()[-1]).items():
                for label, pair in spent.items():
                    results.setdefault(kind, {}).setdefault(label, {}).setdefault(name, []).append(pair)
    print(f"load average {load:.1f} at start, {os.getloadavg()[0]:.1f} at end; median CPU / wall ms per start")
    for kind, labels in results.items():
        print(f"-- {kind}")
        for label, by_tree in labels.items():
            cells = []
            for name, _tree in trees:
                pairs = by_tree.get(name, [])
                if pairs:
                    cpu = statistics.median(p[0] for p in pairs) * 1000
                    wall = statistics.median(p[1] for p in pairs) * 1000
                    cells.append(f"{name} {cpu:6.0f} / {wall:6.0f}")
                else:
                    cells.append(f"{name} {'-':>15s}")
            print(f"  {label[:48]:48s} " + "   ".join(cells))


if __name__ == "__main__":
    main()
