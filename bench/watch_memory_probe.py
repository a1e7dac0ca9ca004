"""Where the memory of an open watch goes, per process (issue 15: memory per watcher).

Starts a chain as bench/bench.py does, opens W plain JSON watches of one ConfigMap through the
gateway (bench/watchers_bench.py's ``TimedFanout``), sends one event to all, and prints each
process's growth per watcher in VmRSS and in /proc/<pid>/smaps_rollup (Pss, anonymous). With
``--tracemalloc N`` every service runs with tracemalloc (N frames, bench/wmprobe_site's opt-in
sitecustomize) and the Python heap grown per watcher is printed too, by file and line of
allocation (its most recent frame in this tree or uvicorn/starlette; "native caller": uvloop's
own PyMem_RawMalloc, its 256 KiB TLS read buffer per connection, mostly never touched). RSS
figures under tracemalloc are not representative (compare runs without it); the heap diff is.

    .venv/bin/python bench/watch_memory_probe.py --watchers 300 [--tracemalloc 6]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from watchers_bench import TimedFanout

from kubechain_cli.chain import Chain, free_port

FIELDS = ("Rss", "Pss", "Anonymous")
ROOT = str(Path(__file__).resolve().parent.parent) + "/"


class BatchedFanout(TimedFanout):
    """``TimedFanout`` whose watches open ``batch`` at a time (0: all at once, as the bench)."""

    def __init__(self, chain: Chain, watchers: int, batch: int) -> None:
        super().__init__(chain, watchers)
        self.batch = batch

    async def setup(self) -> None:
        if not self.batch:
            await super().setup()
            return
        watch_url = await self.create_watched()
        for i in range(self.watchers):
            self.tasks.append(asyncio.create_task(self._watch(i, watch_url)))
            if (i + 1) % self.batch == 0:
                while self.started < i + 1:  # noqa: ASYNC110 (Fanout counts, it has no event per batch)
                    await asyncio.sleep(0.02)
        await asyncio.wait_for(self.all_started.wait(), 300)


def smaps(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, value = line.split(":", 1)
        if key in FIELDS:
            out[key] = int(value.split()[0])
    return out


def read_all(chain: Chain) -> dict[str, dict[str, int]]:
    return {name: smaps(p.pid) for name, p in chain.processes.items()
            if p.poll() is None and name in ("aggregator", "core-api")}


def snapshots(chain: Chain, snapdir: Path, names: tuple[str, ...], suffix: str) -> dict[str, Path]:
    """A probe's dump (``.snap``, ``.mallinfo``) of each named process (SIGUSR2), waited for."""
    out: dict[str, Path] = {}
    for name in names:
        pid = chain.processes[name].pid
        before = set(snapdir.glob(f"{pid}-*{suffix}"))
        os.kill(pid, signal.SIGUSR2)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            new = set(snapdir.glob(f"{pid}-*{suffix}")) - before
            if new:
                out[name] = new.pop()
                break
            time.sleep(0.2)
    return out


def site(tb: tracemalloc.Traceback) -> str:
    """Where an allocation was made: its most recent frame in this tree or in uvicorn/starlette."""
    frames = list(tb)[::-1]  # most recent first
    for fr in frames:
        f = fr.filename
        if "/site-packages/" in f:
            if any(p in f for p in ("/uvicorn/", "/starlette/", "/anyio/")):
                return f"{f.split('/site-packages/')[1]}:{fr.lineno}"
            continue
        if f.startswith(ROOT):
            return f"{f[len(ROOT):]}:{fr.lineno}"
    return f"{frames[0].filename}:{frames[0].lineno} (native caller)"


def heap_report(name: str, path0: Path, path1: Path, watchers: int, top: int) -> None:
    """Python heap grown per watcher between two snapshots, by file and by line of allocation."""
    by_line: dict[str, list[int]] = {}
    for snap_path, sign in ((path1, 1), (path0, -1)):
        for trace in tracemalloc.Snapshot.load(str(snap_path)).traces:
            entry = by_line.setdefault(site(trace.traceback), [0, 0])
            entry[0] += sign * trace.size
            entry[1] += sign
    by_file: dict[str, int] = {}
    for where, (size, _n) in by_line.items():
        file = where.rsplit(":", 1)[0]
        by_file[file] = by_file.get(file, 0) + size
    total = sum(size for size, _n in by_line.values())
    print(f"\n{name}: Python heap grown {total / 1024 / watchers:.1f} KiB per watcher; by file (B per watcher):")
    for file, size in sorted(by_file.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {size / watchers:8.0f}  {file}")
    print("  by line (B, allocations per watcher):")
    for where, (size, n) in sorted(by_line.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {size / watchers:8.0f} {n / watchers:5.1f}x  {where}")


async def poke(chain: Chain) -> None:
    """One request so each process runs Python code (a pending signal handler runs)."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=chain.ssl_context())) as s:
        async with s.get(chain.server_url + "/api/v1/namespaces/default") as r:
            await r.read()


SITE = str(Path(__file__).resolve().parent / "wmprobe_site")


async def main_async(args: argparse.Namespace) -> None:
    data = Path(tempfile.mkdtemp(prefix="kubechain-wmprobe-"))
    snapdir = data / "snaps"
    snapdir.mkdir()
    probing = bool(args.tracemalloc or args.mallinfo)
    suffix = ".snap" if args.tracemalloc else ".mallinfo"
    if probing:
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [SITE, os.environ.get("PYTHONPATH", "")])
        os.environ["WMPROBE_TRACEMALLOC"] = str(args.tracemalloc)
        os.environ["WMPROBE_MALLINFO"] = "1" if args.mallinfo else ""
        os.environ["WMPROBE_TRIM"] = "1" if args.trim else ""
        os.environ["WMPROBE_DIR"] = str(snapdir)
    chain = Chain(data, port=free_port())
    chain.start(timeout=300 if args.tracemalloc else 60)
    names = ("aggregator", "core-api")
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=chain.ssl_context())) as s:
            async with s.post(chain.server_url + "/api/v1/namespaces", json={
                    "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}) as r:
                assert r.status == 201
        # warm-up: a few watches opened and closed, so one-time costs are not counted per watcher
        warm = TimedFanout(chain, 20)
        await warm.setup()
        await warm.timed_event()
        await warm.close()
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=chain.ssl_context())) as s:
            async with s.delete(chain.server_url + "/api/v1/namespaces/bench/configmaps/watched") as r:
                assert r.status == 200
        await asyncio.sleep(2)
        before = read_all(chain)
        snaps0 = snapshots(chain, snapdir, names, suffix) if probing else {}  # (--trim: trimmed already)
        if probing:
            await poke(chain)
        fan = BatchedFanout(chain, args.watchers, args.batch)
        await fan.setup()
        for _ in range(args.events):
            await fan.timed_event()
        await asyncio.sleep(2)
        after = read_all(chain)
        snaps1 = snapshots(chain, snapdir, names, suffix) if probing else {}
        if args.trim:
            await poke(chain)
            await asyncio.sleep(1)
            trimmed = read_all(chain)
            for name in names:
                grown_kib = (trimmed[name]["Rss"] - before[name]["Rss"]) / args.watchers
                print(f"  {name} after malloc_trim: Rss {grown_kib:.1f} KiB per watcher")
        w = args.watchers
        print(f"{w} watchers (opened {args.batch or 'all'} at a time), {args.events} events,"
              f" load {os.getloadavg()[0]:.1f}")
        for name in names:
            grown = {k: (after[name][k] - before[name][k]) / w for k in FIELDS}
            print(f"  {name}: " + ", ".join(f"{k} {v:.1f} KiB" for k, v in grown.items()))
        for name in names:
            if name in snaps0 and name in snaps1:
                if args.tracemalloc:
                    heap_report(name, snaps0[name], snaps1[name], w, args.top)
                if args.mallinfo:
                    m0, m1 = (json.loads(p.with_suffix(".mallinfo").read_text()) for p in (snaps0[name], snaps1[name]))
                    grown = {k: (m1[k] - m0[k]) / 1024 / w for k in ("uordblks", "fordblks", "hblkhd", "arena")}
                    print(f"  {name} malloc per watcher: in use {grown['uordblks']:.1f} KiB, free in heap"
                          f" {grown['fordblks']:.1f} KiB, mmapped {grown['hblkhd']:.1f} KiB"
                          f" (heap {grown['arena']:.1f})")
        await fan.close()
    finally:
        chain.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--watchers", type=int, default=300)
    parser.add_argument("--events", type=int, default=3)
    parser.add_argument("--batch", type=int, default=0, help="open the watches this many at a time (0: all at once)")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="FRAMES")
    parser.add_argument("--mallinfo", action="store_true", help="glibc malloc's in-use and free bytes grown")
    parser.add_argument("--trim", action="store_true", help="with --mallinfo: RSS again after malloc_trim(0)")
    parser.add_argument("--top", type=int, default=20)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
