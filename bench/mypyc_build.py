"""A copy of a commit's tree with the gateway's per-request modules compiled by mypyc (issue 15's measurement).

Why it exists: issue 15 asked whether compiling the gateway's hot path pays. This builds the compiled copy
outside the checkout, so the figures can be taken with the A/B benches (the compiled copy is "new" when a
bench runs with its PYTHONPATH) and nobody runs a stale build by accident: the ``.so`` files land only in
OUT, each beside its ``.py`` (in one directory an extension module is imported before a ``.py`` of the same
name), with the group's shared library at OUT's top (on the PYTHONPATH printed at the end).

    .venv/bin/python bench/mypyc_build.py OUT [--commit REV] [--groups server,chain,audit,apf] [--patch FILE]

``--patch`` applies a diff to the copy first (``bench/mypyc_compat.patch``: what mypyc refused at the commit
this was written at, see its header). The build checks that every module of the groups then loads from its
``.so``. Then, e.g.::

    PYTHONPATH=<printed> .venv/bin/python OUT/bench/gateway_side_by_side.py OLD_DIR 6 2000
    PYTHONPATH=<printed> .venv/bin/python OUT/bench/gateway_chain_bench.py OLD_DIR 6 20000
    cd OUT && .venv/bin/python -m pytest tests/unit/test_leanhttp_protocol.py   # the tests, compiled

(the tests run from OUT's own copy: /work/main's pyproject puts /work/main's sources first on sys.path).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
G = "libs/genericapi/genericapi"
A = "services/aggregator/aggregator"

#: The modules where the gateway's per-request self time is (py-spy --gil, GETs at c=32), by role.
GROUPS: dict[str, list[str]] = {
    "server": [f"{G}/server/{m}.py" for m in ("leanhttp", "leanexchange", "unixhttp", "proxy", "headcheck",
                                              "wholeanswer")],
    "chain": [f"{A}/{m}.py" for m in ("gatewaychain", "filters", "auth", "impersonation", "routing")]
    + [f"{G}/apimachinery/{m}.py" for m in ("authorization", "uuids")],
    "audit": [f"{A}/audit/{m}.py" for m in ("filter", "event", "context")],
    "apf": [f"{A}/flowcontrol/{m}.py" for m in ("queueset", "filter", "controller")],
}


def module_name(path: str) -> str:
    """``libs/genericapi/genericapi/server/leanhttp.py`` -> ``genericapi.server.leanhttp``."""
    parts = Path(path).with_suffix("").parts
    return ".".join(parts[2:])


def python_path(tree: Path) -> str:
    paths = [tree / "libs" / "genericapi", *(p for p in sorted((tree / "services").iterdir()) if p.is_dir()), tree]
    return os.pathsep.join(str(p) for p in paths)


def make_tree(out: Path, rev: str, patch: Path | None) -> None:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    paths = ["libs", "services", "kubechain_cli", "proto", "bench", "tests", "deploy", "kubechain_testing",
             "pyproject.toml"]
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, *paths], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    generated = ROOT / G / "generated"
    shutil.copytree(generated, out / G / "generated")
    if patch is not None:
        subprocess.run(["git", "apply", "-p1", str(patch.resolve())], cwd=out, check=True)


def build(out: Path, files: list[str]) -> float:
    started = time.monotonic()
    env = dict(os.environ, MYPYC_OPT_LEVEL=os.environ.get("MYPYC_OPT_LEVEL", "3"))
    done = subprocess.run([sys.executable, "-m", "mypyc", *files], cwd=out, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stdout.write("\n".join(line for line in done.stdout.splitlines()
                                   if "error:" in line or "note:" in line) + "\n")
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"mypyc failed (exit {done.returncode})")
    return time.monotonic() - started


def check(out: Path, files: list[str]) -> None:
    """Every compiled module must load from its extension, not from the .py beside it."""
    names = [module_name(f) for f in files]
    probe = ("import importlib, sys\n"
             "bad = [n for n in sys.argv[1:] if not importlib.import_module(n).__spec__.origin.endswith('.so')]\n"
             "print(' '.join(bad))\n")
    got = subprocess.run([sys.executable, "-c", probe, *names], env=dict(os.environ, PYTHONPATH=python_path(out)),
                         check=True, capture_output=True, text=True).stdout.split()
    if got:
        raise SystemExit(f"not loaded from a compiled extension: {got}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated, of {', '.join(GROUPS)}")
    parser.add_argument("--patch", type=Path)
    args = parser.parse_args()
    files = [f for g in args.groups.split(",") for f in GROUPS[g]]
    out = args.out.resolve()
    make_tree(out, args.commit, args.patch)
    took = build(out, files)
    check(out, files)
    print(f"compiled {len(files)} modules ({args.groups}) in {took:.0f}s (load {os.getloadavg()[0]:.1f})")
    print(f"PYTHONPATH={python_path(out)}")


if __name__ == "__main__":
    main()
