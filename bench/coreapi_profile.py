"""Where core-api's CPU goes per create and per GET: py-spy on core-api while a chain serves bursts of
ConfigMap creates, then GETs, through the gateway (bench/gc_bench.py's requests), and a breakdown of
the samples by function and by module, self and inclusive (issue 15: pick what to cut by measure).

    .venv/bin/python bench/coreapi_profile.py [SECONDS] [OUT_DIR] [PROCESS] [native]

Writes ``<OUT_DIR>/<phase>.txt`` (py-spy's raw collapsed stacks) and prints, per phase, the top
functions by self time, by inclusive time, and the modules by self time, as % of all samples
(idle samples, the event loop waiting in ``select``, are left out: py-spy runs without --idle).
PROCESS is ``core-api`` (default) or ``aggregator``; ``native`` adds the C frames (py-spy --native:
where the cyclic garbage collector runs, which otherwise shows as time in whatever line allocated).
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchutil import CONCURRENCY
from gc_bench import configmap

from kubechain_cli.chain import Chain, free_port

#: Leaves of threads that wait (a thread pool's idle worker, a thread blocked in C): py-spy cannot
#: always tell those from work, and they would swamp the event loop's samples.
_IDLE_LEAVES = {("_worker", "thread.py"), ("Thread.run", "threading.py")}

_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def frames(stack: str) -> list[tuple[str, str]]:
    """(function, module path) of each frame of one collapsed stack, outermost first."""
    out = []
    for frame in stack.split(";"):
        m = _FRAME.match(frame.strip())
        if m is None:
            out.append((frame.strip(), "?"))
            continue
        path = m.group("file")
        for marker in ("site-packages/", "genericapi/", "coreapi/", "aggregator/", "lib/python3"):
            i = path.find(marker)
            if i != -1:
                path = path[i:]
                break
        out.append((m.group("func"), path))
    return out


def breakdown(raw: Path, top: int = 30) -> str:
    """Self and inclusive % per function and self % per module of a py-spy raw file."""
    self_fn: Counter[str] = Counter()
    incl_fn: Counter[str] = Counter()
    self_mod: Counter[str] = Counter()
    incl_mod: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_s)
        fs = frames(stack)
        if not fs or (fs[-1][0], fs[-1][1].rpartition("/")[2]) in _IDLE_LEAVES:
            continue
        total += count
        func, mod = fs[-1]
        self_fn[f"{func} ({mod})"] += count
        self_mod[mod] += count
        for name in {f"{f} ({m})" for f, m in fs}:
            incl_fn[name] += count
        for m in {m for _, m in fs}:
            incl_mod[m] += count
    lines = [f"{total} busy samples (idle thread-pool and C-blocked threads left out)"]
    for title, counter in (("self by function", self_fn), ("inclusive by function", incl_fn),
                           ("self by module", self_mod), ("inclusive by module", incl_mod)):
        lines.append(f"-- {title}")
        for name, count in counter.most_common(top):
            lines.append(f"  {100 * count / max(total, 1):5.1f}%  {name}")
    return "\n".join(lines)


async def load(chain: Chain, kind: str, stop: asyncio.Event) -> int:
    """Creates (``kind == "create"``) or GETs until ``stop``; how many were made."""
    done = 0
    base = chain.server_url + "/api/v1/namespaces/bench/configmaps"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=chain.ssl_context(),
                                                                    limit=CONCURRENCY)) as session:
        async def worker(w: int) -> None:
            nonlocal done
            i = 0
            while not stop.is_set():
                i += 1
                if kind == "create":
                    async with session.post(base, json=configmap(f"{kind}-{w}-{i}")) as r:
                        assert r.status == 201, await r.text()
                else:
                    async with session.get(base + "/warm") as r:
                        await r.read()
                        assert r.status == 200
                done += 1

        await asyncio.gather(*(worker(w) for w in range(CONCURRENCY)))
    return done


async def profile(chain: Chain, kind: str, seconds: int, out: Path, process: str, native: bool) -> int:
    stop = asyncio.Event()
    task = asyncio.create_task(load(chain, kind, stop))
    await asyncio.sleep(2)  # the load running before sampling starts
    spy = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("py-spy")), "record", "-r", "200", "-d", str(seconds),
        "-p", str(chain.processes[process].pid), "-f", "raw", "-o", str(out),
        *(["--native"] if native else []), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    await spy.wait()
    stop.set()
    return await task


async def main_async(seconds: int, out_dir: Path, process: str, native: bool = False) -> None:
    chain = Chain(Path(tempfile.mkdtemp(prefix="kubechain-profile-")), port=free_port())
    chain.start()
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=chain.ssl_context())) as s:
            async with s.post(chain.server_url + "/api/v1/namespaces",
                              json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}) as r:
                assert r.status == 201, await r.text()
            async with s.post(chain.server_url + "/api/v1/namespaces/bench/configmaps",
                              json=configmap("warm")) as r:
                assert r.status == 201, await r.text()
        for kind in ("create", "get"):
            raw = out_dir / f"{kind}.txt"
            n = await profile(chain, kind, seconds, raw, process, native)
            print(f"== {process} under {kind}s ({n} requests)\n{breakdown(raw)}\n", flush=True)
    finally:
        chain.stop(timeout=5)
        shutil.rmtree(chain.data_dir, ignore_errors=True)


def main() -> None:
    out_dir = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("/tmp/coreapi-profile")
    out_dir.mkdir(parents=True, exist_ok=True)
    asyncio.run(main_async(int(sys.argv[1]) if len(sys.argv) > 1 else 20, out_dir,
                           sys.argv[3] if len(sys.argv) > 3 else "core-api", "native" in sys.argv[4:]))


if __name__ == "__main__":
    main()
