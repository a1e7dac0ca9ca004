"""Where a cold start's time goes (issue 15): one ``Chain.start`` in a fresh data dir, as
``kubechain up`` runs it (controllers on unless ``--no-controllers``), printed as a timeline.

From this process: certificate generation, each child spawned (forked or executed), etcd's first
answer to ``/health`` (polled every 5 ms with the client certificate), each backend's socket
appearing (uvicorn binds it once the stores are up; the post-start hooks run after), the gateway's
``/readyz?verbose`` failing checks as they change (polled every 200 ms, a new TLS connection each: a
little load of its own), and ``Chain.start`` returning. From inside each process (the opt-in
``bench/cstrace_site/sitecustomize.py``, put on the children's ``PYTHONPATH`` only): interpreter
ready, fork, server module imported, waiting for etcd, watch caches started, each post-start hook,
the control server, uvicorn's startup, the gateway's start pieces and control-channel sessions
(one per connection attempt), and the number of etcd calls by method. Also each process's CPU
seconds at ready. From the services' logs after the run (``LOG_EVENTS``): the gateway's lease
``kube-aggregator`` acquired, its autoregister controller synced, the first and last APIService
registered, and core-api's controller lease.

What to read off it (issue 15): since 69d8684 core-api's socket accepts before its bootstrap hooks
end (``HookGroup._run``), the gateway's lease and registrations land inside them, and
``control-serving member=core-api serving=True`` is followed by ``Chain.start returned`` within a
poll or two (before, 1-4 s of lease retries and registration came after it).

    .venv/bin/python bench/coldstart_timeline.py [--no-controllers] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import ssl
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import kubechain_cli.chain as chainmod
from kubechain_cli.chain import Chain, free_port

SITE = Path(__file__).resolve().parent / "cstrace_site"


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[float, str, str]] = []
        self.lock = threading.Lock()

    def add(self, who: str, what: str, t: float | None = None) -> None:
        with self.lock:
            self.events.append((time.time() if t is None else t, who, what))


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return float("nan")


def _poll_etcd(chain: Chain, rec: Recorder, stop: threading.Event) -> None:
    while not stop.is_set() and "etcd" not in chain.processes:
        time.sleep(0.002)
    url = chain.etcd_endpoints
    while not stop.is_set() and not url.startswith("https://"):
        time.sleep(0.002)
        url = chain.etcd_endpoints
    ctx = ssl.create_default_context(cafile=chain.pki.etcd_ca)
    ctx.load_cert_chain(*chain.pki.etcd_client)
    while not stop.is_set():
        try:
            with urllib.request.urlopen(url + "/health", context=ctx, timeout=1) as r:
                if json.loads(r.read()).get("health") == "true":
                    rec.add("etcd", "first /health true")
                    return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.005)


def _poll_sockets(chain: Chain, rec: Recorder, stop: threading.Event) -> None:
    seen: set[str] = set()
    while not stop.is_set():
        for service in chainmod.BACKENDS:
            for url in [*chain.replica_urls.get(service, []), *chain.replica_grpc.get(service, [])]:
                path = url.removeprefix("unix://")
                if url.startswith("unix://") and path not in seen and os.path.exists(path):
                    seen.add(path)
                    rec.add(service, f"socket {Path(path).name} exists")
        time.sleep(0.005)


def _poll_gateway(chain: Chain, rec: Recorder, stop: threading.Event) -> None:
    last = None
    ctx: ssl.SSLContext | None = None
    while not stop.is_set():
        try:
            ctx = ctx or chain.ssl_context()
            with urllib.request.urlopen(chain.server_url + "/readyz?verbose", context=ctx, timeout=2) as r:
                body = r.read().decode()
        except urllib.error.HTTPError as err:
            body = err.read().decode()
        except (urllib.error.URLError, OSError, ssl.SSLError, ValueError):
            body = None
        failing = [line.split()[0][3:] for line in (body or "").splitlines() if line.startswith("[-]")]
        state = "not listening" if body is None else "failing: " + (", ".join(failing) or "none")
        if state != last:
            rec.add("aggregator", f"/readyz {state}")
            last = state
        if body is not None and "failing: none" in state:
            return
        time.sleep(0.2)


#: Service log lines worth a place on the timeline (the services log them at INFO with milliseconds):
#: the gateway's APIService controllers' lease, their start, the first and last APIService registered.
LOG_EVENTS = (
    (re.compile(r"acquired lease kube-system/kube-aggregator"), "lease kube-aggregator acquired"),
    (re.compile(r"controller apiservice-autoregister: synced"), "autoregister synced"),
    (re.compile(r"registered APIService "), "APIService registered"),
    (re.compile(r"Available Unknown -> True|Available -> True"), "APIService Available"),
    (re.compile(r"acquired lease kube-system/kube-controller-manager"), "lease kube-controller-manager acquired"),
)
_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


def _log_events(logs: Path, rec: Recorder, names: list[str]) -> None:
    """First (and, for repeated ones, last) occurrence of each of ``LOG_EVENTS`` per service log."""
    for name in names:
        path = logs / f"{name}.log"
        if not path.exists():
            continue
        seen: dict[str, list[float]] = {}
        for line in path.read_text(errors="replace").splitlines():
            match = _LOG_TIME.match(line)
            if match is None:
                continue
            for pattern, label in LOG_EVENTS:
                if pattern.search(line):
                    t = time.mktime(time.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")) + int(match.group(2)) / 1000
                    seen.setdefault(label, []).append(t)
        for label, times in seen.items():
            rec.add(name, f"log: {label}" + (f" (first of {len(times)})" if len(times) > 1 else ""), times[0])
            if len(times) > 1:
                rec.add(name, f"log: {label} (last of {len(times)})", times[-1])


def run(controllers: bool, keep: str) -> None:
    rec = Recorder()
    trace = Path(tempfile.mkdtemp(prefix="cstrace-"))
    os.environ["CSTRACE_DIR"] = str(trace)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(SITE), os.environ.get("PYTHONPATH", "")) if p)
    data = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="kubechain-timeline-"))
    chain = Chain(data, port=free_port(), controllers=controllers)

    real_certs = chainmod.ensure_certificates

    def timed_certs(*args: Any, **kw: Any) -> Any:
        rec.add("cli", "certificates: begin")
        try:
            return real_certs(*args, **kw)
        finally:
            rec.add("cli", "certificates: end")

    chainmod.ensure_certificates = timed_certs  # type: ignore[assignment]
    real_spawn = Chain._spawn

    def spawn(self: Chain, name: str, argv: list[str]) -> None:
        real_spawn(self, name, argv)
        rec.add(name, f"spawned (pid {self.processes[name].pid})")

    Chain._spawn = spawn  # type: ignore[method-assign]
    stop = threading.Event()
    pollers = [threading.Thread(target=f, args=(chain, rec, stop), daemon=True)
               for f in (_poll_etcd, _poll_sockets, _poll_gateway)]
    for thread in pollers:
        thread.start()
    t0 = time.time()
    rec.add("cli", "Chain.start", t0)
    cpu: dict[str, float] = {}
    try:
        chain.start()
        rec.add("cli", "Chain.start returned (gateway /readyz 200)")
        cpu = {name: _cpu_seconds(proc.pid) for name, proc in chain.processes.items()}
    finally:
        stop.set()
        names = list(chain.processes)
        chain.stop(timeout=5)
        _log_events(chain.log_dir or chain.data_dir / "logs", rec, names)
    pid_names: dict[int, str] = {}  # this run's pids, from the spawn events
    for _t, who, what in rec.events:
        if what.startswith("spawned (pid "):
            pid_names[int(what.removeprefix("spawned (pid ").rstrip(")"))] = who
    etcd_calls: dict[str, collections.Counter[str]] = {}
    for path in trace.glob("*.jsonl"):
        name = pid_names.get(int(path.stem))
        first = path.read_text().split("\n", 1)[0]
        if name is None and ("kubechain_cli.forkserver" in first or '"--preload"' in first):
            name = "forkserver"
        if name is None:
            continue
        calls: collections.Counter[str] = collections.Counter()
        stores: list[tuple[float, str]] = []
        for raw in path.read_text().splitlines():
            ev = json.loads(raw)
            kind = ev["ev"]
            if kind == "etcd":
                calls[ev["method"]] += 1
                if calls[ev["method"]] == 1:
                    rec.add(name, f"first etcd {ev['method']} ({ev['seconds'] * 1000:.0f} ms)", ev["t"])
                continue
            if kind.startswith("store.start"):
                stores.append((ev["t"], kind))
                continue
            detail = {k: v for k, v in ev.items() if k not in ("t", "ev", "argv")}

            rec.add(name, kind + (" " + " ".join(f"{k}={v}" for k, v in detail.items()) if detail else ""), ev["t"])
        if stores:
            rec.add(name, f"watch caches: first of {sum(1 for _t, k in stores if k.endswith('begin'))} starts",
                    min(t for t, _k in stores))
            rec.add(name, "watch caches: last started", max(t for t, k in stores if k.endswith("end")))
        etcd_calls[name] = calls
    print(f"cold start timeline, controllers {'on' if controllers else 'off'}, load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; seconds from Chain.start")
    for t, who, what in sorted(rec.events):
        print(f"{t - t0:7.3f}  {who:15s} {what}")
    print("etcd calls per process during the run:", {k: dict(v) for k, v in etcd_calls.items()})
    print("CPU seconds at ready:", {k: round(v, 2) for k, v in cpu.items()})
    print(f"trace in {trace}; data dir {data}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-controllers", action="store_true")
    parser.add_argument("--keep", default="", help="data dir to use (default: a new temporary one)")
    args = parser.parse_args()
    run(not args.no_controllers, args.keep)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
