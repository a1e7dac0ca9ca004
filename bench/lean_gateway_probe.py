"""How much of the gateway's CPU per GET a leaner HTTP server would save (issue 15's proposal).

Issue 15 asks to measure a leaner server than uvicorn + ASGI for the gateway's proxy path (the
gateway now runs genericapi.server.leanhttp, an HTTP/1.1 protocol of its own under uvicorn; it
still runs its ASGI filters, which the probe does not). This
starts a chain and, beside its gateway, a *probe*: the smallest TLS HTTP/1.1 proxy to core-api's
Unix socket that Python allows here (uvloop, httptools, the gateway's own ``UnixHTTPPool``; one
write per response; no ASGI, no Starlette). It does none of the gateway's work besides relaying
(client certificate check aside - TLS verifies it; no authorization, APF, audit, metrics), so it is
a floor: what the same relay costs without the server framework. Both serve the same GET of one
ConfigMap to the same client (aiohttp, TLS, 64 keep-alive connections) in alternating rounds;
CPU per GET of each process is read from /proc.

    .venv/bin/python bench/lean_gateway_probe.py [ROUNDS] [N]
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchutil import run_concurrently
from proccpu import cpu_seconds

from kubechain_cli.chain import Chain, free_port

PROBE = r'''
import asyncio, ssl, sys
import httptools, uvloop
from genericapi.server.unixhttp import UnixHTTPPool

port, sock, crt, key, ca = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
pool = UnixHTTPPool(sock)
IDENTITY = [("x-remote-user", "system:admin"), ("x-remote-group", "system:masters")]
REASONS = {200: b"OK", 201: b"Created", 404: b"Not Found"}


class Proxy(asyncio.Protocol):
    def connection_made(self, transport):
        self.t = transport
        self.parser = httptools.HttpRequestParser(self)
        self.headers = []
        self.url = b""
        self.body = []

    def data_received(self, data):
        self.parser.feed_data(data)

    def on_url(self, url):
        self.url += url

    def on_header(self, name, value):
        self.headers.append((name.decode("latin-1").lower(), value.decode("latin-1")))

    def on_body(self, body):
        self.body.append(body)

    def on_message_complete(self):
        method = self.parser.get_method().decode()
        url, headers, body = self.url.decode("latin-1"), self.headers, b"".join(self.body)
        self.url, self.headers, self.body = b"", [], []
        headers = [(k, v) for k, v in headers if k not in ("host", "connection", "content-length")] + IDENTITY
        asyncio.ensure_future(self.relay(method, url, headers, body))

    async def relay(self, method, url, headers, body):
        resp = await pool.request(method, url, headers, body)
        data = await resp.read()
        out = [b"HTTP/1.1 %d %s\r\n" % (resp.status, REASONS.get(resp.status, b""))]
        for k, v in resp.headers:
            if k.lower() not in (b"content-length", b"transfer-encoding", b"connection", b"date"):
                out.append(k + b": " + v + b"\r\n")
        out.append(b"content-length: %d\r\n\r\n" % len(data))
        out.append(data)
        self.t.write(b"".join(out))


async def main():
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(crt, key)
    ctx.load_verify_locations(ca)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    server = await asyncio.get_running_loop().create_server(Proxy, "127.0.0.1", int(port), ssl=ctx, backlog=1024)
    print("ready", flush=True)
    await server.serve_forever()

uvloop.run(main())
'''


async def gets(session: aiohttp.ClientSession, url: str, n: int) -> None:
    async def get(_i: int) -> None:
        async with session.get(url) as r:
            await r.read()
            assert r.status == 200, r.status

    await run_concurrently(n, get)


async def measure(chain: Chain, probe: subprocess.Popen[bytes], probe_port: int, rounds: int, n: int) -> None:
    ctx = chain.ssl_context()
    path = "/api/v1/namespaces/default/configmaps/probe"
    pids = {"gateway": chain.processes["aggregator"].pid, "probe": probe.pid,
            "core-api": chain.processes["core-api"].pid}
    cpu: dict[str, list[float]] = {"gateway": [], "probe": [], "core-api via gateway": [], "core-api via probe": []}
    wall: dict[str, list[float]] = {"gateway": [], "probe": []}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=64)) as session:
        async with session.post(chain.server_url + "/api/v1/namespaces/default/configmaps",
                                json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe"},
                                      "data": {"v": "x" * 400}}) as r:
            assert r.status in (201, 409), r.status
        base = {"gateway": chain.server_url, "probe": f"https://127.0.0.1:{probe_port}"}
        for which in base:  # warm both
            await gets(session, base[which] + path, 500)
        for _ in range(rounds):
            for which in base:
                before = {k: cpu_seconds(p) for k, p in pids.items()}
                t = time.perf_counter()
                await gets(session, base[which] + path, n)
                wall[which].append(time.perf_counter() - t)
                after = {k: cpu_seconds(p) for k, p in pids.items()}
                cpu[which].append((after[which] - before[which]) / n * 1e6)
                cpu[f"core-api via {which}"].append((after["core-api"] - before["core-api"]) / n * 1e6)
    print(f"load average {os.getloadavg()[0]:.1f}; {rounds} alternating rounds of {n} GETs, 64 concurrent")
    for k, v in cpu.items():
        print(f"{k:22s} CPU us/GET  min {min(v):6.0f}  median {sorted(v)[len(v) // 2]:6.0f}")
    for k, w in wall.items():
        print(f"{k:22s} GETs/s      best {n / min(w):6.0f}")
    g, p = min(cpu["gateway"]), min(cpu["probe"])
    print(f"probe / gateway CPU per GET: {p / g:.2f}; gateway / core-api {g / min(cpu['core-api via gateway']):.2f},"
          f" probe / core-api {p / min(cpu['core-api via probe']):.2f}")


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    data = Path(tempfile.mkdtemp(prefix="kubechain-probe-"))
    chain = Chain(data, port=free_port(), controllers=False)
    chain.start()
    probe = None
    try:
        pki = chain.pki
        crt, key = pki.pair("apiserver")
        sock = chain.backend_urls["core-api"].removeprefix("unix://")
        port = free_port()
        probe = subprocess.Popen([sys.executable, "-c", PROBE, str(port), sock, crt, key, pki.ca],
                                 stdout=subprocess.PIPE)
        assert probe.stdout is not None and probe.stdout.readline().strip() == b"ready"
        asyncio.run(measure(chain, probe, port, rounds, n))
    finally:
        if probe is not None:
            probe.kill()
        chain.stop()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
