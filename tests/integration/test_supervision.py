"""``kubechain up`` heals itself: any child killed with SIGKILL comes back, nothing written is lost.

The real CLI (``python -m kubechain_cli up``) in its own data dir, a writer creating ConfigMaps
through kubectl's own client library (the official Python client) while one child after the
other (core-api, extensions-api, the gateway, etcd) is killed. The chain must answer again within
a bounded window after each kill, every acknowledged write must still be there, and only SIGTERM
stops it (graceful: every child gone, exit code 0).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
import yaml
from kubernetes import client, config

from kubechain_cli.chain import free_port

pytestmark = pytest.mark.integration

#: Seconds a killed child may take to serve again (restart backoff 0.5 s + start + readiness).
HEAL_BUDGET = 20.0


@pytest.fixture
def up(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    data = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-m", "kubechain_cli", "up", "--data-dir", str(data),
                             "--port", str(free_port())], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "is ready at" in line or not line:
            break
    else:
        proc.kill()
        pytest.fail("kubechain up did not become ready")
    yield proc, data
    if proc.poll() is None:  # the test failed midway: stop it as a user would, then make sure
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    subprocess.run(["pkill", "-9", "-f", str(data)], check=False)


def child_pids(data: Path, module: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", "--", f"{module}.*{data}"], capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in out]


def child_pid(data: Path, module: str) -> int:
    pids = child_pids(data, module)
    assert pids, f"no {module} process for {data}"
    return pids[0]


def api(data: Path) -> client.CoreV1Api:
    cfg = client.Configuration()
    config.load_kube_config(str(data / "kubeconfig"), client_configuration=cfg)
    cfg.retries = 0
    return client.CoreV1Api(client.ApiClient(cfg))


def create(core: client.CoreV1Api, name: str) -> bool:
    try:
        core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name)),
                                          _request_timeout=5)
        return True
    except Exception:
        return False


@pytest.mark.parametrize("victims", [("-m coreapi", "-m extensionsapi", "-m aggregator", "etcdbin/etcd")])
def test_killed_children_come_back_and_nothing_is_lost(up: tuple[subprocess.Popen[str], Path],
                                                       victims: tuple[str, ...]) -> None:
    proc, data = up
    core = api(data)
    acknowledged: list[str] = []
    counter = 0
    for victim in victims:
        pid = child_pid(data, victim)
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        healed_after = None
        while time.monotonic() - killed_at < HEAL_BUDGET:
            counter += 1
            name = f"sup-{counter}"
            if create(core, name):
                acknowledged.append(name)
                if healed_after is None and time.monotonic() - killed_at > 0.1:
                    healed_after = time.monotonic() - killed_at
                    break
            time.sleep(0.1)
        assert healed_after is not None, f"the chain did not answer within {HEAL_BUDGET}s after killing {victim}"
        deadline = time.monotonic() + HEAL_BUDGET
        while time.monotonic() < deadline and child_pids(data, victim) in ([], [pid]):
            time.sleep(0.1)
        assert child_pids(data, victim) not in ([], [pid]), f"{victim} was not started again"
        # The killed child itself serves again (not only the parts of the chain that did not need it).
        if "extensionsapi" in victim:
            deadline = time.monotonic() + HEAL_BUDGET
            while time.monotonic() < deadline:
                try:
                    client.ApiextensionsV1Api(core.api_client).list_custom_resource_definition(_request_timeout=5)
                    break
                except Exception:
                    time.sleep(0.2)
            else:
                pytest.fail("extensions-api did not serve again")
    stored = {cm.metadata.name for cm in core.list_namespaced_config_map("default").items}
    missing = [name for name in acknowledged if name not in stored]
    assert not missing, f"acknowledged writes lost: {missing}"

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    output = proc.stdout.read() if proc.stdout else ""
    for victim in ("core-api", "extensions-api", "aggregator", "etcd"):
        assert f"{victim} exited with -9; restarting in" in output
        assert f"{victim} restarted (restart 1)" in output
    assert "kubechain stopped" in output
    leftover = subprocess.run(["pgrep", "-f", str(data)], capture_output=True, text=True).stdout.split()
    assert leftover == []


def test_sigterm_while_starting_stops_at_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-m", "kubechain_cli", "up", "--data-dir", str(data),
                             "--port", str(free_port())], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (data / "logs" / "aggregator.log").exists():
        time.sleep(0.05)  # until every child is started (and none is ready yet)
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run(["pkill", "-9", "-f", str(data)], check=False)
    assert proc.returncode == 1, out
    assert "SIGTERM while starting; stopped" in out
    time.sleep(0.5)
    assert subprocess.run(["pgrep", "-f", str(data)], capture_output=True, text=True).stdout.split() == []


# -- the error window per killed process, under write + watch load -------------------------------------


@dataclass
class Outcome:
    at: float
    error: str  # "" for an acknowledged write


@dataclass
class LoadRecord:
    writes: list[Outcome] = field(default_factory=list)
    acknowledged: dict[str, str] = field(default_factory=dict)  # name -> resourceVersion
    seen: set[str] = field(default_factory=set)  # ADDED by the watch (or listed after a 410)
    revisions: list[int] = field(default_factory=list)
    watch_errors: list[Outcome] = field(default_factory=list)
    relists: int = 0


def _admin_ssl(data: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(data / "pki" / "ca.crt"))
    ctx.load_cert_chain(str(data / "pki" / "admin.crt"), str(data / "pki" / "admin.key"))
    return ctx


async def _writer(session: aiohttp.ClientSession, base: str, record: LoadRecord, stop: asyncio.Event) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        name = f"win-{n}"
        started = time.monotonic()
        try:
            async with session.post(f"{base}/api/v1/namespaces/default/configmaps",
                                    json={"metadata": {"name": name}, "data": {"n": str(n)}},
                                    timeout=aiohttp.ClientTimeout(total=5)) as r:
                body = await r.json(content_type=None)
                if r.status == 201:
                    record.acknowledged[name] = body["metadata"]["resourceVersion"]
                    record.writes.append(Outcome(started, ""))
                else:
                    record.writes.append(Outcome(started, f"{r.status} {body.get('reason', '')}"))
        except (TimeoutError, aiohttp.ClientError, ValueError) as err:
            record.writes.append(Outcome(started, type(err).__name__))
        await asyncio.sleep(0.05)


async def _watcher(session: aiohttp.ClientSession, base: str, record: LoadRecord, stop: asyncio.Event) -> None:
    """A client-go style watch: resume from the last resourceVersion, relist after a 410."""
    url = f"{base}/api/v1/namespaces/default/configmaps"
    rv = ""
    while not stop.is_set():
        try:
            if not rv:
                async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as r:
                    listed = await r.json()
                    if r.status != 200:
                        raise RuntimeError(f"list {r.status}")
                    record.seen.update(i["metadata"]["name"] for i in listed["items"])
                    rv = listed["metadata"]["resourceVersion"]
                    continue
            params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "300"}
            async with session.get(url, params=params, timeout=aiohttp.ClientTimeout(total=None, sock_read=30)) as r:
                if r.status == 410:
                    record.relists += 1
                    rv = ""
                    continue
                if r.status != 200:
                    raise RuntimeError(f"watch {r.status}")
                async for line in r.content:
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        if obj.get("code") == 410:
                            record.relists += 1
                            rv = ""
                        else:
                            record.watch_errors.append(Outcome(time.monotonic(), f"ERROR {obj.get('code')}"))
                        break
                    new_rv = int(obj["metadata"]["resourceVersion"])
                    if event["type"] != "BOOKMARK":
                        record.revisions.append(new_rv)
                        if event["type"] == "ADDED":
                            record.seen.add(obj["metadata"]["name"])
                    rv = str(new_rv)
        except (TimeoutError, aiohttp.ClientError, RuntimeError, ValueError) as err:
            record.watch_errors.append(Outcome(time.monotonic(), type(err).__name__ if not isinstance(
                err, RuntimeError) else str(err)))
            await asyncio.sleep(0.2)


def _window(record: LoadRecord, killed_at: float, until: float) -> tuple[float, dict[str, int]]:
    """Seconds from the kill to the end of the last failed write before ``until``, and the errors."""
    failed = [w for w in record.writes if killed_at <= w.at < until and w.error]
    kinds: dict[str, int] = {}
    for w in failed:
        kinds[w.error] = kinds.get(w.error, 0) + 1
    return (max(w.at for w in failed) - killed_at if failed else 0.0), kinds


#: Seconds of clean writes that end one victim's window (then the next one is killed).
STEADY = 3.0


def test_error_window_per_killed_process_under_write_and_watch_load(up: tuple[subprocess.Popen[str], Path]) -> None:
    """SIGKILL each child in turn while a writer creates a ConfigMap every 50 ms and a watcher
    follows them: how long writes fail after each kill and with what, and that the watch resumes
    without a gap (every acknowledged create seen ADDED, or listed after a 410; revisions only
    rise). The numbers are printed (``-s``); the bound is the supervision budget, as the machine
    may be loaded."""
    _proc, data = up
    port = int(yaml.safe_load((data / "kubeconfig").read_text())["clusters"][0]["cluster"]["server"].rsplit(":", 1)[1])
    base = f"https://127.0.0.1:{port}"
    record = LoadRecord()
    report: list[str] = []

    async def scenario() -> None:
        stop = asyncio.Event()
        connector = aiohttp.TCPConnector(ssl=_admin_ssl(data), limit=8)
        async with aiohttp.ClientSession(connector=connector) as session:
            tasks = [asyncio.create_task(_writer(session, base, record, stop)),
                     asyncio.create_task(_watcher(session, base, record, stop))]
            await asyncio.sleep(STEADY)
            for label, victim in (("core-api", "-m coreapi"), ("extensions-api", "-m extensionsapi"),
                                  ("gateway", "-m aggregator"), ("etcd", "etcdbin/etcd")):
                pid = child_pid(data, victim)
                os.kill(pid, signal.SIGKILL)
                killed_at = time.monotonic()
                while True:  # until writes have succeeded for STEADY seconds after the last failure
                    await asyncio.sleep(0.25)
                    now = time.monotonic()
                    if now - killed_at > 60:
                        break
                    recent = [w for w in record.writes if w.at >= killed_at]
                    last_fail = max((w.at for w in recent if w.error), default=killed_at)
                    if now - last_fail > STEADY and any(not w.error and w.at > last_fail for w in recent):
                        break
                window, kinds = _window(record, killed_at, time.monotonic())
                watch_down = [e.error for e in record.watch_errors if e.at >= killed_at]
                report.append(f"{label}: writes failed for {window:.2f} s after SIGKILL; errors {kinds or 'none'}; "
                              f"watch errors {len(watch_down)} {sorted(set(watch_down))}")
                assert window < HEAL_BUDGET, report[-1]
            for _ in range(150):  # up to 30 s for the watch to deliver the last creates
                if not set(record.acknowledged) - record.seen:
                    break
                await asyncio.sleep(0.2)
            stop.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(scenario())
    print("\n" + "\n".join(report))
    print(f"writes {len(record.writes)}, acknowledged {len(record.acknowledged)}, relists after 410: "
          f"{record.relists}")
    missing = sorted(set(record.acknowledged) - record.seen)
    assert not missing, f"acknowledged creates the watch never delivered: {missing[:10]}"
    assert record.revisions == sorted(record.revisions), "watch revisions went backwards"
    assert len(record.revisions) == len(set(record.revisions)), "the watch delivered a revision twice"
