"""Cold start of the chain (what ``kubechain up`` and the pytest plugin wait for): N starts, each in a
fresh data dir (new certificates, empty etcd), alternating controllers on and off; prints each time
and the medians with the load average, since on a busy machine the three Python services' start-up
CPU decides it. bench/bench.py reads its cold-start line with ``cold_starts``.

``--ab DIR`` instead alternates, with controllers on, another tree (``git archive <commit> libs
services kubechain_cli proto | tar -x -C DIR`` plus the generated code copied from
``libs/genericapi/genericapi/generated``, as bench/tree_ab.py) and this one: each start runs in a
child process with that tree first on ``PYTHONPATH`` (or not), so the chain code, the fork server
and the services are all the tree's. Each round is a cold start (fresh data dir) and a warm restart
(the same data dir again: certificates made, etcd holding what the first start wrote, so the
bootstrap hooks reconcile instead of create). Both trees' medians come from one run, under the
same load. ``--new DIR`` puts another tree in this checkout's place (say, a proposed change).

``--env-ab VAR=VALUE`` alternates this checkout with ``VAR=VALUE`` ("old") and without ("new"): a
switch's effect, e.g. ``KUBECHAIN_FORK_SERVICES=0`` or ``KUBECHAIN_GC_THRESHOLD=0``.

``--fork-ab`` alternates, with controllers on, the services forked from the fork server (the
default, kubechain_cli.forkserver) and executed one by one (``KUBECHAIN_FORK_SERVICES=0``).

``--compiled`` first compiles the trees' modules into a bytecode cache of its own (a temporary
``PYTHONPYCACHEPREFIX``), as ``pip install`` of the wheel does at install time, and starts every
chain with it. Without it the services compile whatever has no current ``.pyc`` at every start: in a
checkout under ``PYTHONDONTWRITEBYTECODE=1`` (these sessions' environment) that is all of the
project's ~500 modules, ~0.8 s of CPU of a cold start's serial path (issue 15). The line printed
first says which case a run measured.

    .venv/bin/python bench/chain_start.py [N] [--ab DIR [--new DIR] | --env-ab VAR=VALUE | --fork-ab] [--compiled]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from kubechain_cli import forkserver
from kubechain_cli.chain import Chain, free_port

#: The modes a round starts, in order: "controllers on" is what ``kubechain up`` runs.
MODES = ("controllers on", "controllers off")
#: The modes of ``--fork-ab``: forked (the default) and executed services, controllers on.
FORK_AB_MODES = ("forked", "executed")


def cold_starts(rounds: int, modes: Sequence[str] = MODES) -> dict[str, list[float]]:
    """Seconds from ``Chain.start`` to a ready gateway (``/readyz``), ``rounds`` starts of each mode."""
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(rounds):
        for label, runs in times.items():
            saved = os.environ.get(forkserver.ENV_SWITCH)
            if label == "executed":
                os.environ[forkserver.ENV_SWITCH] = "0"
            try:
                with tempfile.TemporaryDirectory(prefix="kubechain-bench-") as data:
                    chain = Chain(Path(data), port=free_port(), controllers=not label.endswith("off"))
                    started = time.monotonic()
                    try:
                        chain.start()
                        runs.append(time.monotonic() - started)
                    finally:
                        chain.stop(timeout=3)
            finally:
                if saved is None:
                    os.environ.pop(forkserver.ENV_SWITCH, None)
                else:
                    os.environ[forkserver.ENV_SWITCH] = saved
    return times


#: What a child of ``--ab`` runs: a cold start, then a warm restart on the same data dir; prints
#: both times as JSON. Only ``Chain``'s long-standing interface is used, so old trees run it too.
_CHILD = """
import json, sys, tempfile, time
from pathlib import Path
from kubechain_cli.chain import Chain, free_port
out = {}
with tempfile.TemporaryDirectory(prefix="kubechain-ab-") as data:
    for label in ("cold", "warm"):
        chain = Chain(Path(data), port=free_port())
        started = time.monotonic()
        try:
            chain.start()
            out[label] = time.monotonic() - started
        finally:
            chain.stop(timeout=5)
print(json.dumps(out))
"""


def source_dirs(tree: Path | None) -> list[Path]:
    """The project's source directories of ``tree`` (None: this checkout)."""
    root = Path(__file__).resolve().parent.parent if tree is None else tree
    return [root / "libs" / "genericapi", *(p for p in sorted((root / "services").iterdir()) if p.is_dir()),
            root / "kubechain_cli"]


def compile_into(prefix: Path, trees: Sequence[Path | None]) -> None:
    """Compile the trees' modules into the bytecode cache ``prefix`` (``PYTHONPYCACHEPREFIX``) and
    use it from now on (this process's children inherit it). Under a prefix Python looks there for
    every module's bytecode, the standard library's and site-packages' too, so one start of each
    tree with writing on fills it with whatever a chain imports."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    dirs = [str(d) for tree in trees for d in source_dirs(tree)]
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", *dirs], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    for tree in trees:
        writing = {k: v for k, v in tree_env(tree).items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run([sys.executable, "-c", _CHILD], env=writing | {"PYTHONPYCACHEPREFIX": str(prefix)},
                       check=True, capture_output=True, timeout=300, cwd=tempfile.gettempdir())
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)


def bytecode_case() -> str:
    """Which bytecode the services find: what a run measured."""
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        return f"bytecode compiled ahead into {os.environ['PYTHONPYCACHEPREFIX']}"
    if sys.dont_write_bytecode:
        return "PYTHONDONTWRITEBYTECODE set: modules without a current .pyc compiled at every start"
    return "bytecode as the environment leaves it (.pyc written on first import)"


def tree_env(tree: Path | None) -> dict[str, str]:
    """The environment of a child running ``tree`` (None: this checkout, as installed)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if tree is not None:
        paths = [tree / "libs" / "genericapi", *(p for p in sorted((tree / "services").iterdir()) if p.is_dir()),
                 tree]
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    return env


def tree_starts(rounds: int, old: Path | None, new: Path | None = None,
                old_env: dict[str, str] | None = None) -> dict[str, list[float]]:
    """``rounds`` alternating (old, new) child runs: each a cold start and a warm restart (a tree
    None: this checkout; ``old_env``: variables set for the old runs only)."""
    times: dict[str, list[float]] = {f"{tree} {kind}": [] for kind in ("cold", "warm") for tree in ("old", "new")}
    for _ in range(rounds):
        for tree, path in (("old", old), ("new", new)):
            env = tree_env(path) | ((old_env or {}) if tree == "old" else {})
            done = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                                  text=True, timeout=300, cwd=tempfile.gettempdir())
            if done.returncode != 0:
                raise RuntimeError(f"{tree} tree's start failed:\n{done.stderr[-3000:]}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            for kind in ("cold", "warm"):
                times[f"{tree} {kind}"].append(float(result[kind]))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rounds", nargs="?", type=int, default=5)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--ab", metavar="DIR", type=Path,
                       help="another tree vs this one: cold start and warm restart, controllers on")
    group.add_argument("--fork-ab", action="store_true", help="forked vs executed services, controllers on")
    group.add_argument("--env-ab", metavar="VAR=VALUE",
                       help="this checkout with VAR=VALUE (old) vs without (new): cold start and warm restart")
    parser.add_argument("--new", metavar="DIR", type=Path, help="with --ab: a tree instead of this checkout")
    parser.add_argument("--compiled", action="store_true",
                        help="compile the trees' modules ahead into a temporary bytecode cache, as a wheel install")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.compiled:
            prefix = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kubechain-pycache-")))
            trees = [args.new.resolve() if args.new else None, *([args.ab.resolve()] if args.ab else [])]
            compile_into(prefix, trees)
        run(args)


def run(args: argparse.Namespace) -> None:
    print(bytecode_case())
    load = os.getloadavg()[0]
    if args.env_ab is not None:
        var, _eq, value = args.env_ab.partition("=")
        print(f"old: {var}={value}; new: {var} as the environment has it ({os.environ.get(var, 'unset')})")
        times = tree_starts(args.rounds, None, None, {var: value})
    elif args.ab is not None:
        times = tree_starts(args.rounds, args.ab.resolve(), args.new.resolve() if args.new else None)
    else:
        times = cold_starts(args.rounds, FORK_AB_MODES if args.fork_ab else MODES)
    print(f"load average {load:.1f} at start, {os.getloadavg()[0]:.1f} at end, on {os.cpu_count()} cores")
    for label, runs in times.items():
        print(f"{label:16s} median {statistics.median(runs):.2f}s  ({' '.join(f'{t:.2f}' for t in runs)})")
    if args.ab is not None or args.env_ab is not None:
        for kind in ("cold", "warm"):
            ratio = statistics.median(times[f"old {kind}"]) / statistics.median(times[f"new {kind}"])
            print(f"{kind}: old/new {ratio:.2f}x")


if __name__ == "__main__":
    main()
